"""Parts of a page built when the reader scrolls near them, not when the page opens.

A served page's web-process CPU goes mostly into Bokeh models (issue 30 item 3: a page in under
0.2 s); charts, pictures and tables far below the first screen were built, sent and often never
looked at. :func:`on_sight` puts a placeholder of about the part's height there instead; a
small browser component (:class:`SeenSignal`, an ``IntersectionObserver``) reports when the
placeholder comes within :data:`AHEAD_PX` of the browser's window, and the part is built then,
in its place. Nothing is dropped: everything is built once it is about to be seen. In a notebook
or a test that is not served, the part is built at once. Folded parts wait for their first
expand instead (:func:`lazy_card`), and parts hidden until something happens (results of a run,
an upload chosen) for the first time it does (:class:`Later` parts of a :func:`laid_out`
layout, which leave no empty holder on the page until then; :func:`once_true` is one such part
in a column of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import panel as pn
import param
from panel.custom import JSComponent

from explorer.components.progress import served

#: How far below (or above) the browser's window a placeholder starts its part's build, in
#: CSS pixels: a screen ahead, so a reader scrolling at a normal pace finds the part drawn.
AHEAD_PX = 600


class SeenSignal(JSComponent):
    """An empty box of ``min_height`` that sets :attr:`seen` once the browser shows it (or it
    comes within :data:`AHEAD_PX` of the window); it never changes again."""

    seen = param.Boolean(default=False, doc="True once the box came near the window.")

    _esm = f"""
// The nearest ancestor that scrolls (across shadow roots): the page's main area in the site's
// template, which clips what it holds, so the window itself would never see the box come near.
function scroller(node) {{
  for (let n = node.parentNode || node.host; n; n = n.parentNode || n.host) {{
    if (n instanceof Element) {{
      const overflow = getComputedStyle(n).overflowY
      if ((overflow === "auto" || overflow === "scroll") && n.scrollHeight > n.clientHeight)
        return n
    }}
  }}
  return null
}}

export function render({{ model, el }}) {{
  const box = document.createElement("div")
  box.style.width = "100%"
  box.style.height = "100%"
  el.appendChild(box)
  if (model.seen) return
  let observer = null
  const watch = () => {{
    if (observer !== null || model.seen || !box.isConnected) return
    observer = new IntersectionObserver((entries) => {{
      if (entries.some((entry) => entry.isIntersecting)) {{
        observer.disconnect()
        model.seen = true
      }}
    }}, {{ root: scroller(box), rootMargin: "{AHEAD_PX}px 0px {AHEAD_PX}px 0px" }})
    observer.observe(box)
  }}
  model.on("after_render", watch)
  setTimeout(watch, 50)
  model.on("remove", () => {{ if (observer !== null) observer.disconnect() }})
}}
"""


Part = TypeVar("Part", bound=pn.viewable.Viewable)


def styled_as_on_open(build: Callable[[], Part]) -> Part:
    """``build()``, styled as the parts built when the page opened.

    Panel gives what is made after a served page's template is set up the template's design
    as its own, and a component with a design of its own gets Bootstrap's whole stylesheet in
    its shadow root (larger headings, plain card titles, more stylesheet models). Made with no
    design, it gets the template's, as the page's first parts do. Every part built late by
    this module is made so.
    """
    with pn.config.set(design=None):
        return build()


def on_sight(build: Callable[[], pn.viewable.Viewable], height: int,
             **layout: object) -> pn.Column:
    """A column that holds ``build()``'s result, built once the reader scrolls near it.

    Until then it holds a blank :class:`SeenSignal` of ``height`` pixels (about the part's own,
    so the parts below stay below and are not all built at once), with the CSS class
    ``on-sight-waiting``. Not served: ``build()`` at once. ``layout``: parameters of the
    column (``css_classes``, ``sizing_mode``...; stretched to the page's width by default).
    """
    layout.setdefault("sizing_mode", "stretch_width")
    layout.setdefault("margin", 0)
    if not served():
        return pn.Column(build(), **layout)
    signal = SeenSignal(height=height, sizing_mode="stretch_width", margin=0,
                        css_classes=["on-sight-waiting"])
    holder = pn.Column(signal, **layout)

    def seen(event: param.parameterized.Event) -> None:
        if event.new and holder.objects == [signal]:
            holder.objects = [styled_as_on_open(build)]

    signal.param.watch(seen, "seen")
    return holder


def on_sight_in_turn(parts: list[tuple[Callable[[], pn.viewable.Viewable], int]],
                     **layout: object) -> pn.Column:
    """Parts one under the other, each built once the reader scrolls near it, behind a single
    placeholder: ``parts`` are ``(build, height)`` pairs in page order.

    Like an :func:`on_sight` per part, but the page opens with one :class:`SeenSignal` (of the
    parts' whole height) instead of one per part: seeing it builds the first part, with the
    next placeholder (the rest's height) under it, and so on, so the parts within reach of the
    window are still built at once and the others when scrolled to. Not served: all at once.
    """
    layout.setdefault("sizing_mode", "stretch_width")
    layout.setdefault("margin", 0)
    if not parts:
        return pn.Column(**layout)
    (build, _), rest = parts[0], parts[1:]

    def first_and_rest() -> pn.viewable.Viewable:
        built = build()
        return pn.Column(built, on_sight_in_turn(rest), sizing_mode="stretch_width",
                         margin=0) if rest else built

    return on_sight(first_and_rest, sum(height for _, height in parts), **layout)


class Later(NamedTuple):
    """A part of a :func:`laid_out` layout built the first time ``condition`` (a Param
    reactive expression, e.g. ``page.param.results.rx.pipe(bool)``) is true; until then the
    layout simply does not hold it."""

    build: Callable[[], pn.viewable.Viewable]
    condition: Any


def laid_out(layout: type[pn.layout.ListPanel], *items: pn.viewable.Viewable | Later,
             **params: Any) -> pn.layout.ListPanel:
    """``layout(*items, **params)`` (a ``pn.Column``, a ``pn.Row``), where a :class:`Later`
    item is built the first time its condition holds and then takes its place among the
    others, in the order given.

    For parts hidden until something happens (results of a run, an upload chosen): their
    Bokeh models were built and sent on every page open and never shown to a reader who does
    not run anything. Nothing stands in for a part not built yet (an empty column in its place
    was a Bokeh model and about 1.4 ms of a page's build each: the census page had six). A
    part keeps its own visibility once built. Not served, or its condition true already:
    built at once.
    """
    slots: list[pn.viewable.Viewable | None] = []
    holder = layout(**params)

    def place(index: int, part: Later) -> None:
        def changed(value: object) -> None:
            if value and slots[index] is None:
                slots[index] = pn.panel(styled_as_on_open(part.build))
                holder.objects = [item for item in slots if item is not None]

        part.condition.rx.watch(changed)

    for item in items:
        # each item as the layout holds it (a Viewer's view made once: the layout keeps the
        # same components, and their models, when a later part joins them)
        if not isinstance(item, Later):
            slots.append(pn.panel(item))
        elif not served() or item.condition.rx.value:
            slots.append(pn.panel(item.build()))
        else:
            slots.append(None)
            place(len(slots) - 1, item)
    holder.objects = [item for item in slots if item is not None]
    return holder


def once_true(build: Callable[[], pn.viewable.Viewable], condition: Any,
              **layout: object) -> pn.Column:
    """A column of its own for one :class:`Later` part: ``laid_out(pn.Column, Later(build,
    condition), **layout)``, empty until ``condition`` first holds; for a part that must keep
    its place where its neighbours are not laid out with it. ``layout`` as for
    :func:`on_sight`."""
    layout.setdefault("sizing_mode", "stretch_width")
    layout.setdefault("margin", 0)
    return laid_out(pn.Column, Later(build, condition), **layout)


def lazy_card(build: Callable[[], pn.viewable.Viewable], **card_params: Any) -> pn.Card:
    """A collapsed card whose content ``build()`` makes on the first expand, not when the
    page opens (a collapsed card's content is otherwise built, sent and never looked at)."""
    card = pn.Card(**{"collapsed": True, **card_params})

    def expanded(event: param.parameterized.Event) -> None:
        if not event.new and not card.objects:
            card.objects = [styled_as_on_open(build)]

    card.param.watch(expanded, "collapsed")
    return card

