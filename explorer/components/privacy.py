"""Privacy controls bound to the session's live :class:`~engine.privacy.Privacy`.

The eps and rho sliders are the Privacy object's own parameters (``pn.Param`` on it), updated
when a slider is released (``throttled``), so a drag costs one re-scale, not hundreds. delta
spans ten orders of magnitude, so it gets a log slider: :class:`PrivacyControls` holds its
base-10 exponent and keeps it equal to ``privacy.delta`` in both directions.
"""

from __future__ import annotations

import math
from functools import lru_cache

import panel as pn
import param

from engine.privacy import Privacy, cdp_eps, cdp_rho
from explorer.components.progress import off_loop


@lru_cache(maxsize=1024)
def conversion_text(noise: str, epsilon: float, delta: float, rho: float) -> str:
    """The (eps, delta) <-> rho conversion of a privacy level, in words.

    The conversions are numerical searches of about 0.2 s each, so results are cached and
    pages compute them off the event loop.
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


#: How long the conversion waits after a slider release before it starts (seconds).
CONVERSION_DELAY_S = 0.3


class PrivacyControls(pn.viewable.Viewer):
    """Noise type, eps, delta (log scale) and rho, editing ``privacy`` in place."""

    privacy = param.ClassSelector(class_=Privacy, instantiate=False, doc="The level edited.")
    delta_exponent = param.Number(default=-6.0, bounds=(-12.0, -1.0), step=0.25,
                                  label="delta (log10)", doc="log10 of delta.")
    compact = param.Boolean(default=False, doc="One row instead of a column.")

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self._from_privacy()
        self.privacy.param.watch(lambda event: self._from_privacy(), "delta")

    def _from_privacy(self) -> None:
        exponent = math.log10(self.privacy.delta)
        if not math.isclose(exponent, self.delta_exponent, abs_tol=1e-9):
            lo, hi = self.param.delta_exponent.bounds
            self.delta_exponent = min(max(exponent, lo), hi)

    @param.depends("delta_exponent", watch=True)
    def _to_privacy(self) -> None:
        delta = 10.0**self.delta_exponent
        if not math.isclose(delta, self.privacy.delta, rel_tol=1e-9):
            self.privacy.delta = delta

    def conversion(self) -> str:
        """The (eps, delta) <-> rho conversion at the current level, in words."""
        p = self.privacy
        return conversion_text(p.noise, float(p.epsilon), float(p.delta), float(p.rho))

    def __panel__(self) -> pn.viewable.Viewable:
        p = self.privacy
        noise = pn.widgets.RadioButtonGroup.from_param(
            p.param.noise, color="primary", variant="outline",
            css_classes=["noise-choice"])
        eps = pn.widgets.EditableFloatSlider.from_param(
            p.param.epsilon, throttled=True, start=0.01, end=10.0, step=0.01, format="0.00",
            fixed_start=0.001, css_classes=["eps-slider"], label="epsilon", width=280,
            visible=pn.bind(lambda n: n != "zcdp", p.param.noise))
        delta = pn.widgets.FloatSlider.from_param(
            self.param.delta_exponent, throttled=True, format="0.00",
            css_classes=["delta-slider"], width=260,
            visible=pn.bind(lambda n: n != "laplace", p.param.noise))
        rho = pn.widgets.EditableFloatSlider.from_param(
            p.param.rho, throttled=True, start=0.001, end=10.0, step=0.001, format="0.000",
            fixed_start=0.0001, css_classes=["rho-slider"], label="rho", width=280,
            visible=pn.bind(lambda n: n == "zcdp", p.param.noise))
        # Off the event loop, and after the charts: the conversion search is pure Python, so
        # running it at once would compete with the slider's own update for the interpreter.
        shown = pn.pane.Markdown(
            pn.bind(off_loop(self._conversion, delay=CONVERSION_DELAY_S), p.param.noise,
                    p.param.epsilon, p.param.delta, p.param.rho),
            css_classes=["privacy-conversion"], margin=(0, 10))
        layout = pn.Row if self.compact else pn.Column
        return pn.Column(layout(noise, eps, delta, rho), shown, sizing_mode="stretch_width",
                         css_classes=["privacy-controls"])

    def _conversion(self, noise: str, epsilon: float, delta: float, rho: float) -> str:
        text = conversion_text(noise, float(epsilon), float(delta), float(rho))
        prefix = f"delta = {delta:.1e}. " if noise != "laplace" else ""
        return prefix + text
