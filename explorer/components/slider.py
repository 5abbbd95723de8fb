"""A slider a screen reader can name: a native ``<input type="range">`` with a ``<label>``.

Bokeh's slider (behind ``pn.widgets.FloatSlider``) draws a noUiSlider handle, a ``<div
role="slider">`` that no option of Bokeh or Panel gives a name: a screen reader announces
"slider, -0.5" and axe-core reports every one as a serious violation (issue 29).
:class:`LabelledSlider` is the browser's own range input with a ``<label>``: the label is its
name, the value it stands for (``1`` for eps, not its log10 ``0``) is its ``aria-valuetext``, the
arrow, Page and Home/End keys move it, and mouse and touch drag it.

``value`` changes once per gesture, when the handle is released or a key moves it (what
``throttled=True`` does for Panel's sliders), so a drag costs one update, not hundreds; the
number beside the label follows the handle while it moves. Link it to a parameter as any
Panel widget: ``LabelledSlider.from_param(obj.param.x, shown_as="power of ten")``.
"""

from __future__ import annotations

from typing import ClassVar

import param
from panel.custom import JSComponent
from panel.widgets import WidgetBase

#: The browser side: a label, the value in words beside it, and the range input.
SLIDER_ESM = """
export function render({ model }) {
  const box = document.createElement("div");
  box.className = "labelled-slider";
  const header = document.createElement("div");
  header.className = "slider-header";
  const label = document.createElement("label");
  label.htmlFor = "range";
  const shown = document.createElement("output");
  shown.htmlFor = "range";
  shown.className = "slider-value";
  header.append(label, ": ", shown);
  const input = document.createElement("input");
  input.type = "range";
  input.id = "range";
  box.append(header, input);

  const words = (value) => model.shown_as === "power of ten"
    ? Number(Math.pow(10, value).toPrecision(3)).toString()
    : value.toFixed(model.decimals);
  const show = (value) => {
    shown.textContent = words(value);
    input.setAttribute("aria-valuetext", words(value));
  };
  const sync = () => {
    label.textContent = model.label;
    input.min = model.start;
    input.max = model.end;
    input.step = model.step;
    input.value = model.value;
    show(model.value);
  };
  input.addEventListener("input", () => show(Number(input.value)));
  input.addEventListener("change", () => { model.value = Number(input.value); });
  model.on(["value", "start", "end", "step", "label", "shown_as", "decimals"], sync);
  sync();
  return box;
}
"""

#: The look of Panel's widgets: the label above the track, the site's primary colour.
SLIDER_CSS = """
.labelled-slider { display: flex; flex-direction: column; padding: 0 4px; }
.slider-header { font-size: var(--font-size, 14px); margin-bottom: 2px; }
input[type="range"] {
  width: 100%;
  margin: 4px 0;
  accent-color: var(--design-primary-color, var(--panel-primary-color, #0072b5));
}
"""


class LabelledSlider(JSComponent, WidgetBase):
    """A labelled range input whose ``value`` changes when the handle is released or a key
    moves it (see the module docstring)."""

    value = param.Number(default=0.0, doc="The slider's position, in its own units.")
    start = param.Number(default=0.0, doc="The smallest value.")
    end = param.Number(default=1.0, doc="The largest value.")
    step = param.Number(default=0.01, doc="How far one key press or one notch moves it.")
    shown_as = param.Selector(default="number", objects=["number", "power of ten"], doc="""
        How the value is written beside the label and read out: as it is (``decimals``
        places) or as 10 to its power (three significant digits; a log-scale slider).""")
    decimals = param.Integer(default=2, bounds=(0, 10), doc="Places shown for 'number'.")

    # A release does not set Panel's busy flag: it is one for the whole process, shown by
    # every open tab's spinner, and says nothing about this tab.
    _busy__ignore = ["value"]
    # One change per gesture: nothing to gather, so no 50 ms debounce timer before the page
    # answers (Panel's default for a widget change); the change runs on the next tick.
    _priority_changes: ClassVar[list[str]] = ["value"]
    _esm = SLIDER_ESM
    _stylesheets = [SLIDER_CSS]
