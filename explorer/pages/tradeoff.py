"""Privacy trade-off page: how each mechanism's error moves with eps (or rho).

Everything here re-scales plans that are already made: a plan's error at another privacy
level is ``plan.rmse(other_privacy)``, so moving a slider never re-optimises anything. The
curves are redrawn only when new plans arrive or the noise family / delta change; a slider
release only moves the markers and the numbers (measured in the browser tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models.widgets.tables import NumberFormatter

from engine.errors import SpecError, one_line
from engine.privacy import Privacy
from engine.workflows.compare import Comparison
from explorer.components.background import BackgroundView, change_page
from explorer.components.charts import BOUND_LABEL, LiveTradeoffChart, privacy_knob
from explorer.components.exports import csv_download, scenario_columns
from explorer.components.notes import caption
from explorer.components.privacy import PrivacyControls
from explorer.components.progress import PlanningProgress, served
from explorer.pages.base import Page

#: The sweep of each privacy knob (log-spaced).
GRIDS = {"epsilon": np.logspace(-2, 1, 31), "rho": np.logspace(-3, 1, 33)}
#: Where the inverse question searches (a knob outside this range is reported as such).
SEARCH = (1e-4, 1e4)

NOTE = """
**Privacy budget** is how much any one person's data may change what is published. Smaller
eps (or rho) means stronger privacy, which needs more noise, so every count gets less
accurate. The question is *how much* less accurate, and whether it is worth it.

* Each line is one mechanism: its typical error per count (RMSE) at every budget. Both axes
  are logarithmic, so a straight line going down means "double the budget, cut the error by
  a fixed factor" (half the error for Laplace and for Gaussian with fixed delta, roughly).
* The dashed black line is the **lower bound**: no mechanism of this kind can be below it.
* The dots and the grey vertical line mark your current budget. Move the slider (it is on
  a log scale, like the chart) or type a value to see the numbers change: the mechanisms'
  plans do not change, only the noise level.
* Click a row of the table under the chart to highlight that mechanism's line. A mechanism
  whose line is exactly another's (for example hb on a small domain, which is identity) is
  drawn dotted and labelled "same as".
* **delta** (Gaussian noise) is the small probability that the guarantee fails; it should be
  much smaller than one over the number of people. **rho** is the zCDP budget, another way to
  count privacy loss that adds up neatly over many releases; the page converts between them.
* **What budget do I need?** Type the error you can live with: the table says, for each
  mechanism, the smallest eps (or rho) that reaches it.
"""


def knob_value(privacy: Privacy) -> float:
    """The current value of the swept knob (eps, or rho for zCDP)."""
    name, _ = privacy_knob(privacy.noise)
    return float(getattr(privacy, name))


def at_knob(privacy: Privacy, value: float) -> Privacy:
    """``privacy`` with its swept knob set to ``value``."""
    name, _ = privacy_knob(privacy.noise)
    return privacy.with_(**{name: float(value)})


def curve_frame(comparison: Comparison | None, privacy: Privacy) -> pd.DataFrame:
    """RMSE of every planned mechanism and of the bound across the knob's grid.

    Columns ``x`` (eps or rho), ``rmse``, ``mechanism`` (the bound as :data:`BOUND_LABEL`).
    """
    records: list[dict[str, Any]] = []
    if comparison is None:
        return pd.DataFrame(records, columns=["x", "rmse", "mechanism"])
    name, _ = privacy_knob(privacy.noise)
    levels = [(float(x), at_knob(privacy, x)) for x in GRIDS[name]]
    plans = [r.plan for r in comparison.rows if r.plan is not None and r.rmse is not None]
    for plan in plans:
        for x, level in levels:
            records.append({"x": x, "rmse": plan.rmse(level), "mechanism": plan.mechanism})
    if comparison.bound.value is not None:
        for x, level in levels:
            records.append({"x": x, "rmse": comparison.bound.rmse(comparison.workload, level),
                            "mechanism": BOUND_LABEL})
    return pd.DataFrame(records, columns=["x", "rmse", "mechanism"])


def marker_frame(comparison: Comparison | None) -> pd.DataFrame:
    """The current point of every planned mechanism and of the bound."""
    if comparison is None:
        return pd.DataFrame(columns=["x", "rmse", "mechanism"])
    x = knob_value(comparison.privacy)
    rows = [{"x": x, "rmse": r.rmse, "mechanism": r.mechanism}
            for r in comparison.rows if r.rmse is not None]
    if comparison.bound_rmse is not None:
        rows.append({"x": x, "rmse": comparison.bound_rmse, "mechanism": BOUND_LABEL})
    return pd.DataFrame(rows, columns=["x", "rmse", "mechanism"])


def readout_frame(comparison: Comparison | None) -> pd.DataFrame:
    """RMSE now, ratio to the bound, and the cost of halving the budget, per mechanism."""
    columns = ["mechanism", "rmse", "ratio_to_bound", "rmse_at_half_budget", "increase",
               "note"]
    # Fixed dtypes, empty or not: a column type changing with the rows makes the browser's
    # table rebuild itself, and it drops rows that arrive while it does.
    numbers = {c: "float64" for c in columns[1:-1]}
    if comparison is None:
        return pd.DataFrame(columns=columns).astype(numbers)
    half = at_knob(comparison.privacy, knob_value(comparison.privacy) / 2)
    bound = comparison.bound_rmse
    rows = []
    for r in comparison.rows:
        if r.rmse is None:
            continue
        at_half = r.plan.rmse(half)
        twin = next((row["mechanism"] for row in rows
                     if math.isclose(row["rmse"], r.rmse, rel_tol=1e-9)
                     and math.isclose(row["rmse_at_half_budget"], at_half, rel_tol=1e-9)), None)
        rows.append({"mechanism": r.mechanism, "rmse": r.rmse,
                     "ratio_to_bound": r.rmse / bound if bound else None,
                     "rmse_at_half_budget": at_half, "increase": at_half / r.rmse,
                     "note": f"same error as {twin}" if twin else ""})
    return pd.DataFrame(rows, columns=columns).astype(numbers)


def required_knob(budget_for_rmse: Callable[[float, Privacy], float | None],
                  privacy: Privacy, target: float) -> float:
    """The smallest eps (or rho) at which an error reaches ``target``, within :data:`SEARCH`.

    ``budget_for_rmse`` is the engine's answer (``plan.budget_for_rmse``). Returns ``inf``
    when more than :data:`SEARCH`'s upper end is needed (or the bound is not computable) and
    ``0.0`` when its lower end already meets the target.

    Raises:
        SpecError: the target is unreachable at any budget.
    """
    lo, hi = SEARCH
    needed = budget_for_rmse(target, privacy)
    if needed is None or needed > hi:
        return math.inf
    return 0.0 if needed <= lo else needed


def required_frame(comparison: Comparison | None, privacy: Privacy, target: float | None
                   ) -> pd.DataFrame:
    """For each planned mechanism, the budget needed to reach ``target`` RMSE."""
    name, _ = privacy_knob(privacy.noise)
    column = f"{name}_needed"
    columns = ["mechanism", column, "note"]
    if comparison is None or not target or target <= 0:
        return pd.DataFrame(columns=columns)
    rows = []
    for r in comparison.rows:
        if r.plan is None:
            continue
        note = ""
        try:
            needed = required_knob(r.plan.budget_for_rmse, privacy, target)
        except SpecError as exc:
            needed, note = math.inf, one_line(exc)
        if not note and math.isinf(needed):
            note = f"not reachable with {name} <= {SEARCH[1]:g}"
        elif needed == 0.0:
            note = f"reached already at {name} = {SEARCH[0]:g}"
        rows.append({"mechanism": r.mechanism, column: needed if math.isfinite(needed)
                     else None, "note": note})
    if comparison.bound.value is not None:
        needed = required_knob(
            lambda t, p: comparison.bound.budget_for_rmse(comparison.workload, t, p),
            privacy, target)
        rows.append({"mechanism": BOUND_LABEL, column: needed if math.isfinite(needed)
                     else None, "note": "no mechanism of this kind can need less"})
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(column, na_position="last", kind="stable").reset_index(drop=True)


def halving_sentence(comparison: Comparison | None) -> str:
    """'What does lowering eps cost', in one sentence, for the best mechanism."""
    if comparison is None:
        return ""
    best = comparison.best()
    if best is None:
        return ""
    name, _ = privacy_knob(comparison.privacy.noise)
    now = knob_value(comparison.privacy)
    half = best.plan.rmse(at_knob(comparison.privacy, now / 2))
    return (f"With the best mechanism (**{best.mechanism}**), halving {name} from {now:.4g} "
            f"to {now / 2:.4g} raises the typical error from **{best.rmse:.4g}** to "
            f"**{half:.4g}** (x{half / best.rmse:.2f}).")


class TradeoffModel(param.Parameterized):
    """View-model of the inverse question (what budget reaches a target error) and of the
    mechanism highlighted on the chart."""

    target = param.Number(default=None, allow_None=True, bounds=(0, None),
                          inclusive_bounds=(False, True), label="Target RMSE",
                          doc="The largest typical error per count you accept.")
    problem = param.String(default="", doc="Why the last typed target was refused ('' if not).")
    highlighted = param.String(default=None, allow_None=True,
                               doc="The mechanism drawn bold on the chart (None: all alike).")

    def type_target(self, value: float | None) -> None:
        """A typed target: used when positive and finite, else refused with a message."""
        if value is not None and math.isfinite(value) and value > 0:
            self.target, self.problem = float(value), ""
            return
        still = (f"the table still answers for {self.target:g}" if self.target
                 else "type a positive number")
        shown = "nothing" if value is None else f"{value:g}"
        self.problem = f"Target RMSE must be greater than 0 (got {shown}); {still}."


def _round_sig(value: float, digits: int = 2) -> float:
    if not value or not math.isfinite(value):
        return 1.0
    return float(f"{value:.{digits}g}")


class TradeoffPage(Page):
    """The privacy trade-off page."""

    title = "Privacy trade-off"
    note = NOTE

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.model = TradeoffModel()
        best = self.session.comparison.best() if self.session.comparison else None
        if best is not None:
            self.model.target = _round_sig(best.rmse / 2)
        self._live: LiveTradeoffChart | None = None
        self._drawn: Comparison | None = None  # the comparison the chart was drawn from

    def __panel__(self) -> pn.viewable.Viewable:
        session, p = self.session, self.session.privacy
        if served():
            pn.state.onload(self._plan_missing)
            self.watch(p, lambda *events: self._plan_missing(), "noise")
        elif not session.complete:
            session.compare_now()
        self.watch(session, self._comparison_changed, "comparison")
        self._doc = pn.state.curdoc
        self._chart_pane = pn.pane.Bokeh(
            pn.bind(self._chart, session.param.plans, p.param.noise, p.param.delta,
                    p.param.calibration),
            sizing_mode="stretch_width")
        # The class goes on a wrapper: a Bokeh pane puts its css_classes on a figure only when
        # the figure is replaced, so a page opened on stored plans would have no class at all.
        chart = pn.Column(self._chart_pane, sizing_mode="stretch_width",
                          css_classes=["tradeoff-chart"])
        target = pn.widgets.FloatInput(label="Target RMSE", value=self.model.target, step=0.1,
                                       start=None, css_classes=["target-rmse"], width=200)

        def typed(event: param.parameterized.Event) -> None:
            self.model.type_target(event.new)
            if event.new is None and self.model.target is not None:
                # an emptied box shows "NaN": show the target in use, keep the message
                refused = self.model.problem
                target.value = self.model.target
                self.model.problem = refused

        target.param.watch(typed, "value")
        self.model.param.watch(lambda event: setattr(target, "value", event.new), "target")
        refused = pn.pane.Alert(self.model.param.problem, alert_type="warning",
                                visible=pn.bind(bool, self.model.param.problem),
                                css_classes=["target-problem"], margin=(0, 10))
        readout = pn.widgets.Tabulator(
            pn.bind(readout_frame, session.param.comparison), show_index=False, disabled=True,
            selectable=1, layout="fit_data_stretch", sizing_mode="stretch_width",
            formatters={c: NumberFormatter(format="0,0.0000") for c in
                        ("rmse", "ratio_to_bound", "rmse_at_half_budget", "increase")},
            css_classes=["tradeoff-readout"])
        readout.param.watch(lambda event: self._select_row(readout), "selection")
        intro = (f"How the error of each planned mechanism ({self.link('/compare', 'compare')}"
                 " plans them) changes with the privacy budget.")
        return pn.Column(
            self.header(intro),
            PrivacyControls(privacy=p),
            PlanningProgress(session=session),
            pn.pane.Markdown(pn.bind(halving_sentence, session.param.comparison),
                             css_classes=["halving"], margin=(0, 10),
                             sizing_mode="stretch_width"),
            chart,
            caption("Log-log: each line is a mechanism's typical error per count across "
                    "budgets; the dashed line is the lower bound; dots mark your current "
                    "budget. The toolbar's save button exports a PNG."),
            pn.pane.Markdown("### At your budget", margin=(0, 10)),
            # Panes whose *content* is bound: a slider release updates text in place instead
            # of replacing panes (which would re-process the whole page).
            pn.pane.Markdown(pn.bind(self._level, session.param.comparison),
                             css_classes=["tradeoff-level"], margin=(0, 10)),
            caption("Click a row to highlight that mechanism's line on the chart (click it "
                    "again to show all alike)."),
            readout,
            csv_download(lambda: scenario_columns(readout_frame(session.comparison),
                                                  session.privacy, session.workload),
                         "tradeoff.csv",
                         "Download table (CSV)", css_class="tradeoff-csv"),
            pn.pane.Markdown("### What budget do I need?", margin=(0, 10)),
            pn.Row(target, refused),
            BackgroundView(self._required, self.model.param.target, session.param.plans,
                           p.param.noise, p.param.delta, p.param.calibration),
            sizing_mode="stretch_width", css_classes=["tradeoff-page"],
        )

    def _select_row(self, table: pn.widgets.Tabulator) -> None:
        rows = table.selection
        names = list(table.value["mechanism"]) if table.value is not None else []
        self.highlight(names[rows[0]] if rows and rows[0] < len(names) else None)

    def highlight(self, mechanism: str | None) -> None:
        """Draw ``mechanism``'s line bold and fade the others (None: all alike)."""
        self.model.highlighted = mechanism
        live = self._live
        if live is None:
            return
        # A table event arrives without the document lock: the figure's models change on the
        # page's next tick.
        change_page(getattr(self, "_doc", None), lambda: live.highlight(mechanism),
                    self._chart_pane)

    def _plan_missing(self) -> None:
        try:
            self.session.request_comparison(background=True)
        except Exception as exc:  # nothing a user does may take the server down
            if pn.state.notifications is not None:
                pn.state.notifications.error(f"Planning could not start: {one_line(exc)}")

    def _comparison_changed(self, event: param.parameterized.Event) -> None:
        self._move_markers(event.new)
        if self.model.target is None and event.new is not None:
            best = event.new.best()
            if best is not None:
                self.model.target = _round_sig(best.rmse / 2)

    def _chart(self, plans: Comparison | None, noise: str, delta: float, calibration: str):
        session = self.session
        comparison = session.comparison
        privacy = comparison.privacy if comparison is not None else session.privacy
        self._live = LiveTradeoffChart(curve_frame(comparison, session.privacy),
                                       marker_frame(comparison), knob_value(privacy),
                                       privacy.noise)
        self._drawn = comparison
        if self.model.highlighted is not None:
            self._live.highlight(self.model.highlighted)
        return self._live.figure

    def _move_markers(self, comparison: Comparison | None) -> None:
        if comparison is None or comparison.privacy.noise != self.session.privacy.noise:
            return  # nothing to show, or the chart is being redrawn for the new noise family

        def move() -> None:
            live = self._live
            if live is None or comparison is self._drawn:
                return  # a chart drawn from this comparison shows its markers already
            live.move(marker_frame(comparison), knob_value(comparison.privacy))
            if self._doc is None:  # notebook: push the changed models explicitly
                self._chart_pane.param.trigger("object")

        # On the page's next tick, always: the change may come from another page of this
        # session, and a figure drawn in this same callback may not have reached the browser
        # yet (moving its markers now would reach it first: "reference ... isn't known").
        change_page(self._doc, move)

    def _level(self, comparison: Comparison | None) -> str:
        privacy = comparison.privacy if comparison is not None else self.session.privacy
        return f"At **{privacy.describe()}**:"

    def _required(self, target: float | None, plans: Comparison | None, noise: str, delta: float,
                  calibration: str) -> pn.viewable.Viewable:
        # A BackgroundView: one root search per mechanism for the analytic Gaussian.
        if not target:
            return pn.pane.Markdown("Type the typical error per count you can accept.")
        comparison = self.session.comparison
        privacy = self.session.privacy.with_()
        try:
            frame = required_frame(comparison, privacy, target)
        except Exception as exc:  # a failed search must not take the page down
            return pn.pane.Alert(f"Could not answer: {one_line(exc)}", alert_type="warning")
        name, _ = privacy_knob(noise)
        return pn.Column(
            pn.pane.Markdown(f"The smallest **{name}** at which each mechanism's typical "
                             f"error is at most **{target:g}**:", margin=(0, 10)),
            pn.widgets.Tabulator(frame, show_index=False, disabled=True,
                                 layout="fit_data_stretch", sizing_mode="stretch_width",
                                 css_classes=["required-budget"],
                                 formatters={f"{name}_needed": NumberFormatter(
                                     format="0.0000")}),
            csv_download(lambda: scenario_columns(frame.assign(target_rmse=target), privacy,
                                                  self.session.workload),
                         "budget-needed.csv", "Download table (CSV)",
                         css_class="required-csv"),
            sizing_mode="stretch_width")
