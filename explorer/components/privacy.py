"""Privacy controls bound to the session's live :class:`~engine.privacy.Privacy`.

The sliders (:class:`~explorer.components.slider.LabelledSlider`, named for screen readers) are
updated when released, so a drag costs one re-scale, not hundreds. A new level changes the
page under ``pn.io.hold``: the readout, the sentences and the conversion that follow it reach
the browser in one message instead of one per changed model, and the slider is not moved to
the exact log10 of the level it just set (that sent the browser its own release back): 8
messages per slider release before, 3 after, at about 27 ms of server CPU
(``benchmarks/slider_cost.py``).

eps, rho and delta span orders of magnitude, so their sliders are logarithmic:
:class:`PrivacyControls` holds their base-10 exponents and keeps them equal to the Privacy
object's values in both directions.
"""

from __future__ import annotations

import math
from functools import lru_cache

import panel as pn
import param

from engine import Privacy, cdp_eps, cdp_rho
from explorer.components.lazy_view import once_true
from explorer.components.number_box import NumberBox
from explorer.components.slider import LabelledSlider


@lru_cache(maxsize=1024)
def conversion_text(noise: str, epsilon: float, delta: float, rho: float) -> str:
    """The (eps, delta) <-> rho conversion of a privacy level, in words.

    The conversions are numerical searches (under a millisecond each), cached per level.
    """
    try:
        if noise == "zcdp":
            return (f"rho = {rho:.4g} zCDP implies (eps = {cdp_eps(rho, delta):.4g}, "
                    f"delta = {delta:.1e})-DP.")
        if noise == "gaussian":
            return (f"(eps = {epsilon:.4g}, delta = {delta:.1e}) corresponds to "
                    f"rho = {cdp_rho(epsilon, delta):.4g} zCDP.")
        return f"Pure eps = {epsilon:.4g} (Laplace) implies rho = {epsilon**2 / 2:.4g} zCDP."
    except Exception as exc:  # a conversion that cannot be computed must not break a page
        return f"(conversion unavailable: {exc})"



#: The log10 range of each budget's slider (the typed box accepts any positive value).
EXPONENT_BOUNDS = {"epsilon": (-2.0, 1.0), "rho": (-3.0, 1.0)}


def rounded(value: float, digits: int = 3) -> float:
    """``value`` to ``digits`` significant digits (what a log slider sets)."""
    return float(f"{value:.{digits}g}")


class PrivacyControls(pn.viewable.Viewer):
    """Noise type, eps and rho (typed, and on log sliders), delta (log slider), editing
    ``privacy`` in place.

    A typed value that is not a valid budget ("abc", "0", "-5") is not passed on: the field
    keeps it as typed, a message next to it says what is wrong and which value the charts
    still use (:attr:`problem`); "1,000" is read as 1000 (:class:`NumberBox`).
    """

    privacy = param.ClassSelector(class_=Privacy, instantiate=False, doc="The level edited.")
    delta_exponent = param.Number(default=-6.0, bounds=(-12.0, -1.0), step=0.25,
                                  label="delta (log10)", doc="log10 of delta.")
    epsilon_exponent = param.Number(default=0.0, bounds=EXPONENT_BOUNDS["epsilon"], step=0.01,
                                    label="epsilon (log scale)", doc="log10 of eps.")
    rho_exponent = param.Number(default=math.log10(0.5), bounds=EXPONENT_BOUNDS["rho"],
                                step=0.01, label="rho (log scale)", doc="log10 of rho.")
    problem = param.String(default="", doc="Why the last typed value was refused ('' if not).")
    compact = param.Boolean(default=False, doc="One row instead of a column.")

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self._inputs = {name: NumberBox(
            label=short, value=float(getattr(self.privacy, name)), low=0, low_inclusive=False,
            width=110, css_class=f"{short}-input", problem_class="privacy-problem",
            on_value=lambda value, name=name: self.type_value(name, value))
            for name, short in (("epsilon", "eps"), ("rho", "rho"))}
        for box in self._inputs.values():
            box.param.watch(lambda *events: self._collect_problems(), "problem")
        self._from_privacy()
        self.privacy.param.watch(lambda *events: self._from_privacy(), ["delta", "epsilon", "rho"])

    def _from_privacy(self) -> None:
        targets = {"delta_exponent": self.privacy.delta, "epsilon_exponent": self.privacy.epsilon,
                   "rho_exponent": self.privacy.rho}
        for exponent_name, value in targets.items():
            if math.isclose(rounded(10.0 ** getattr(self, exponent_name)), value, rel_tol=1e-9):
                # The slider stands for this level already (it set it): moving it to the exact
                # log10 of the rounded level would send the browser its own release back.
                continue
            lo, hi = self.param[exponent_name].bounds
            setattr(self, exponent_name, min(max(math.log10(value), lo), hi))
        for name, box in self._inputs.items():
            value = float(getattr(self.privacy, name))
            if box.value is None or not math.isclose(box.value, value, rel_tol=1e-12):
                box.value = value

    @param.depends("delta_exponent", watch=True)
    def _to_privacy(self) -> None:
        # 10 ** -4.0 is 1.0000000000000041e-04 in floating point: rounded, as eps and rho
        # are, so exports and scenarios say delta = 0.0001
        delta = rounded(10.0**self.delta_exponent)
        if not math.isclose(delta, self.privacy.delta, rel_tol=1e-9):
            with pn.io.hold():  # one message for everything the new level changes
                self.privacy.delta = delta

    @param.depends("epsilon_exponent", "rho_exponent", watch=True)
    def _budget_to_privacy(self) -> None:
        for name in ("epsilon", "rho"):
            exponent = getattr(self, f"{name}_exponent")
            current = float(getattr(self.privacy, name))
            lo, hi = self.param[f"{name}_exponent"].bounds
            if math.isclose(exponent, min(max(math.log10(current), lo), hi), abs_tol=1e-9):
                continue  # the slider only followed the privacy level
            with pn.io.hold():  # one message for everything the new level changes
                setattr(self.privacy, name, rounded(10.0**exponent))

    def type_value(self, name: str, value: float) -> None:
        """A valid budget typed into the eps or rho box (> 0, checked by the box)."""
        if not math.isclose(value, float(getattr(self.privacy, name)), rel_tol=1e-12):
            setattr(self.privacy, name, float(value))

    def _collect_problems(self) -> None:
        self.problem = " ".join(box.problem for box in self._inputs.values() if box.problem)

    def conversion(self) -> str:
        """The (eps, delta) <-> rho conversion at the current level, in words."""
        p = self.privacy
        return conversion_text(p.noise, float(p.epsilon), float(p.delta), float(p.rho))

    def __panel__(self) -> pn.viewable.Viewable:
        p = self.privacy
        noise = pn.widgets.RadioButtonGroup.from_param(
            p.param.noise, color="primary", variant="outline",
            css_classes=["noise-choice"], description=None)  # a button group shows no tooltip
        # The controls of the other noise types are built the first time they are chosen (a
        # hidden rho knob or delta slider was five Bokeh models on every page open), then shown
        # and hidden with the choice.
        knobs = {}
        for name, css in (("epsilon", "eps"), ("rho", "rho")):
            def knob(name: str = name, css: str = css) -> pn.Row:
                slider = LabelledSlider.from_param(
                    self.param[f"{name}_exponent"], shown_as="power of ten",
                    css_classes=[f"{css}-slider"], width=220)
                visible = pn.bind(lambda n: (n == "zcdp") == (name == "rho"), p.param.noise)
                return pn.Row(self._inputs[name], slider, visible=visible, margin=0)
            chosen = p.param.noise.rx() == "zcdp" if name == "rho" else (
                p.param.noise.rx() != "zcdp")
            knobs[name] = knob() if chosen.rx.value else once_true(knob, chosen,
                                                                     sizing_mode=None)

        def delta_slider() -> LabelledSlider:
            return LabelledSlider.from_param(
                self.param.delta_exponent, decimals=2, css_classes=["delta-slider"], width=260,
                visible=pn.bind(lambda n: n != "laplace", p.param.noise))
        delta = (delta_slider() if p.noise != "laplace" else
                 once_true(delta_slider, p.param.noise.rx() != "laplace", sizing_mode=None))
        # At once, in the same update as the level: a conversion takes under a millisecond
        # (cached per level), and built on the shared view threads it waited behind the
        # page's slow views (about 5 s after a slider release).
        shown = pn.pane.Markdown(pn.bind(self._conversion, p.param.noise, p.param.epsilon,
                                         p.param.delta, p.param.rho),
                                 css_classes=["privacy-conversion"], margin=(0, 10),
                                 sizing_mode="stretch_width")
        controls = (noise, knobs["epsilon"], delta, knobs["rho"])
        if self.compact:
            controls = (pn.Row(*controls),)
        return pn.Column(*controls, shown, sizing_mode="stretch_width",
                         css_classes=["privacy-controls"])

    def _conversion(self, noise: str, epsilon: float, delta: float, rho: float) -> str:
        """The level in the other privacy units, in words."""
        text = conversion_text(noise, float(epsilon), float(delta), float(rho))
        prefix = f"delta = {float(delta):.1e}. " if noise != "laplace" else ""
        return prefix + text
