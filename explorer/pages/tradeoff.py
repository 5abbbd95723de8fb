"""Privacy trade-off page: how each mechanism's error moves with eps (or rho).

Everything here re-scales plans that are already made: a plan's error at another privacy
level is ``plan.rmse(other_privacy)``, so moving a slider never re-optimises anything. The
curves are redrawn only when new plans arrive or the noise family / delta change; a slider
release only moves the markers and the numbers (measured in the browser tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import panel as pn
import param

from engine import Comparison, Privacy, SpecError
from explorer.components.background import BackgroundView, change_page, page_closed
from explorer.components.charts import BOUND_LABEL, LiveTradeoffChart, privacy_knob
from explorer.components.exports import csv_download, described
from explorer.components.lazy_view import on_sight
from explorer.components.messages import plain
from explorer.components.notes import caption
from explorer.components.number_box import NumberBox
from explorer.components.people import (
    GAUSSIAN_FACTOR,
    PER_QUERY_LIMIT,
    people,
    people_factor,
    worst_people,
)
from explorer.components.privacy import PrivacyControls
from explorer.components.progress import PlanningProgress, served
from explorer.components.table import DataTable
from explorer.pages.base import Page
from explorer.pages.compare import LIVE_PER_QUERY_LIMIT
from explorer.session import Session

#: The sweep of each privacy knob (log-spaced).
GRIDS = {"epsilon": np.logspace(-2, 1, 31), "rho": np.logspace(-3, 1, 33)}
#: The units the chart can show its errors in: (axis label, short name for tooltips).
UNITS = {"people": ("typical error, +/- people at 95 %", "+/- people (95 %)"),
         "rmse": ("RMSE (typical error per query)", "RMSE")}
#: Where the inverse question searches (a knob outside this range is reported as such).
SEARCH = (1e-4, 1e4)
#: About the height of the answer to "What budget do I need?", in pixels (its placeholder's
#: until the reader scrolls near it).
REQUIRED_HEIGHT = 360

NOTE = """
**Privacy budget** is how much any one person's data may change what is published. Smaller
eps (or rho) means stronger privacy, which needs more noise, so every count gets less
accurate. The question is *how much* less accurate, and whether it is worth it.

* Each line is one mechanism: how far a typical count is from the truth at every budget, in
  people at 95 % (switch the axis to RMSE, the root mean squared error, if you prefer). Both
  axes
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
* **What budget do I need?** Type the error you can live with, in people: the table says,
  for each mechanism, the smallest eps (or rho) at which a typical count is within +/- that
  many people 95 % of the time, and the smallest at which every count (the worst one too) is.
"""


def knob_value(privacy: Privacy) -> float:
    """The current value of the swept knob (eps, or rho for zCDP)."""
    name, _ = privacy_knob(privacy.noise)
    return float(getattr(privacy, name))


def at_knob(privacy: Privacy, value: float) -> Privacy:
    """``privacy`` with its swept knob set to ``value``."""
    name, _ = privacy_knob(privacy.noise)
    return privacy.with_(**{name: float(value)})


def unit_factors(comparison: Comparison | None, unit: str) -> dict[str, float]:
    """What multiplies each curve's RMSE to show it in ``unit`` (a key of :data:`UNITS`):
    1 for RMSE; for people at 95 % each mechanism's :func:`people_factor` and 1.96 for the
    bound."""
    if comparison is None:
        return {}
    rows = [r for r in comparison.rows if r.plan is not None and r.rmse is not None]
    if unit == "rmse":
        return {**{r.mechanism: 1.0 for r in rows}, BOUND_LABEL: 1.0}
    return {**{r.mechanism: people_factor(r.plan)[0] for r in rows},
            BOUND_LABEL: GAUSSIAN_FACTOR}


def curve_frame(comparison: Comparison | None, privacy: Privacy, unit: str = "rmse"
                ) -> pd.DataFrame:
    """The error of every planned mechanism and of the bound across the knob's grid, in
    ``unit`` (a key of :data:`UNITS`: RMSE, or a typical count's error in people at 95 %).

    Columns ``x`` (eps or rho), ``rmse`` (the error in ``unit``), ``mechanism`` (the bound
    as :data:`BOUND_LABEL`).
    """
    records: list[dict[str, Any]] = []
    if comparison is None:
        return pd.DataFrame(records, columns=["x", "rmse", "mechanism"])
    name, _ = privacy_knob(privacy.noise)
    levels = [(float(x), at_knob(privacy, x)) for x in GRIDS[name]]
    factors = unit_factors(comparison, unit)
    plans = [r.plan for r in comparison.rows if r.plan is not None and r.rmse is not None]
    for plan in plans:
        for x, level in levels:
            records.append({"x": x, "rmse": factors[plan.mechanism] * plan.rmse(level),
                            "mechanism": plan.mechanism})
    if comparison.bound.value is not None:
        for x, level in levels:
            records.append({"x": x, "rmse": factors[BOUND_LABEL]
                            * comparison.bound.rmse(comparison.workload, level),
                            "mechanism": BOUND_LABEL})
    return pd.DataFrame(records, columns=["x", "rmse", "mechanism"])


def marker_frame(comparison: Comparison | None, unit: str = "rmse") -> pd.DataFrame:
    """The current point of every planned mechanism and of the bound, in ``unit``."""
    if comparison is None:
        return pd.DataFrame(columns=["x", "rmse", "mechanism"])
    x = knob_value(comparison.privacy)
    factors = unit_factors(comparison, unit)
    rows = [{"x": x, "rmse": factors[r.mechanism] * r.rmse, "mechanism": r.mechanism}
            for r in comparison.rows if r.rmse is not None and r.plan is not None]
    if comparison.bound_rmse is not None:
        rows.append({"x": x, "rmse": factors[BOUND_LABEL] * comparison.bound_rmse,
                     "mechanism": BOUND_LABEL})
    return pd.DataFrame(rows, columns=["x", "rmse", "mechanism"])


#: Columns of the "at your budget" table (and of tradeoff.csv before its scenario columns).
READOUT_COLUMNS = ("mechanism", "error_95", "error_95_at_half_budget", "rmse",
                   "ratio_to_bound", "note")


def readout_frame(comparison: Comparison | None) -> pd.DataFrame:
    """Per mechanism and for the bound: a typical count's error in people at 95 % now and at
    half the budget, the RMSE, and the ratio to the bound.

    (How much halving the budget multiplies the error is the same for every mechanism, so it
    is said once, in :func:`halving_sentence`, not repeated on every row.)
    """
    columns = list(READOUT_COLUMNS)
    # Fixed dtypes, empty or not: a column type changing with the rows makes the browser's
    # table rebuild itself, and it drops rows that arrive while it does.
    numbers = {c: "float64" for c in columns[1:-1]}
    if comparison is None:
        return pd.DataFrame(columns=columns).astype(numbers)
    half = at_knob(comparison.privacy, knob_value(comparison.privacy) / 2)
    bound = comparison.bound_rmse
    rows = []
    for r in comparison.rows:
        if r.rmse is None or r.plan is None:
            continue
        factor, _ = people_factor(r.plan)
        at_half = r.plan.rmse(half)
        twin = next((row["mechanism"] for row in rows
                     if math.isclose(row["rmse"], r.rmse, rel_tol=1e-9)
                     and math.isclose(row["error_95_at_half_budget"], factor * at_half,
                                      rel_tol=1e-9)), None)
        rows.append({"mechanism": r.mechanism, "error_95": factor * r.rmse,
                     "error_95_at_half_budget": factor * at_half, "rmse": r.rmse,
                     "ratio_to_bound": r.rmse / bound if bound else None,
                     "note": f"same error as {twin}" if twin else ""})
    if bound is not None:
        rows.append({"mechanism": BOUND_LABEL, "error_95": GAUSSIAN_FACTOR * bound,
                     "error_95_at_half_budget": GAUSSIAN_FACTOR
                     * comparison.bound.rmse(comparison.workload, half),
                     "rmse": bound, "ratio_to_bound": 1.0,
                     "note": "no mechanism of this kind can do better"})
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


def worst_ratios(session: Session, comparison: Comparison | None) -> dict[str, float | str]:
    """For each planned mechanism: its worst query's error in people at 95 % over its RMSE
    (the same at every budget), or why it is not computed (a sentence)."""
    out: dict[str, float | str] = {}
    if comparison is None:
        return out
    queries = session.workload.num_queries
    why = ""
    if queries > PER_QUERY_LIMIT:
        why = f"per-query errors are computed for up to {PER_QUERY_LIMIT:,} queries"
    elif queries > LIVE_PER_QUERY_LIMIT and not session.complete:
        why = "shown once every mechanism is planned (this workload has many queries)"
    for r in comparison.rows:
        if r.plan is None or not r.rmse:
            continue
        if why:
            out[r.mechanism] = why
            continue
        try:
            worst, _ = worst_people(session, r.mechanism, comparison.privacy)
        except Exception as exc:  # no per-query variances for this plan, or it went away
            out[r.mechanism] = plain(exc)
            continue
        out[r.mechanism] = worst / r.rmse
    return out


def _needed(budget_for_rmse: Callable[[float, Privacy], float | None], privacy: Privacy,
            rmse: float, name: str) -> tuple[float | None, str]:
    """:func:`required_knob` for an RMSE target, as (value or None, why none)."""
    try:
        needed = required_knob(budget_for_rmse, privacy, rmse)
    except SpecError as exc:
        return None, plain(exc)
    if math.isinf(needed):
        return None, f"not reachable with {name} <= {SEARCH[1]:g}"
    if needed == 0.0:
        return 0.0, f"reached already at {name} = {SEARCH[0]:g}"
    return needed, ""


def required_frame(comparison: Comparison | None, privacy: Privacy, target: float | None,
                   worst: Mapping[str, float | str] | None = None) -> pd.DataFrame:
    """For each planned mechanism and for the bound, the budget at which a typical count
    (``<knob>_typical``) and every count, the worst too (``<knob>_every``), is within
    +/- ``target`` people at 95 %.

    A typical count: the RMSE reaches ``target`` / the mechanism's :func:`people_factor`
    (1.96 for Gaussian noise). Every count: the RMSE reaches ``target`` / ``worst[m]`` (the
    worst query's error in people over the RMSE, :func:`worst_ratios`; empty, with the
    reason in the note, where ``worst[m]`` is a reason or missing). The bound's row uses 1.96
    for both: no query can do better than the typical one, so it is a floor for both columns.
    Sorted by the typical budget.
    """
    name, _ = privacy_knob(privacy.noise)
    typical_column, every_column = f"{name}_typical", f"{name}_every"
    columns = ["mechanism", typical_column, every_column, "note"]
    if comparison is None or not target or target <= 0:
        return pd.DataFrame(columns=columns)
    worst = worst or {}
    rows = []
    for r in comparison.rows:
        if r.plan is None:
            continue
        factor, _ = people_factor(r.plan)
        typical, note = _needed(r.plan.budget_for_rmse, privacy, target / factor, name)
        ratio = worst.get(r.mechanism, "not computed")
        if isinstance(ratio, str):
            every, every_note = None, ratio
        else:
            every, every_note = _needed(r.plan.budget_for_rmse, privacy, target / ratio, name)
        notes = [note] if note else []
        if every_note and every_note != note:
            notes.append(f"every count: {every_note}")
        rows.append({"mechanism": r.mechanism, typical_column: typical, every_column: every,
                     "note": "; ".join(notes)})
    if comparison.bound.value is not None:
        needed, note = _needed(
            lambda t, p: comparison.bound.budget_for_rmse(comparison.workload, t, p),
            privacy, target / GAUSSIAN_FACTOR, name)
        rows.append({"mechanism": BOUND_LABEL, typical_column: needed, every_column: needed,
                     "note": note or "no mechanism of this kind can need less"})
    frame = pd.DataFrame(rows, columns=columns).astype({typical_column: "float64",
                                                         every_column: "float64"})
    return frame.sort_values(typical_column, na_position="last", kind="stable").reset_index(
        drop=True)


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
    factor, _ = people_factor(best.plan)
    return (f"With the best mechanism (**{best.mechanism}**), halving {name} from {now:.4g} "
            f"to {now / 2:.4g} widens a typical count's error from **{people(factor * best.rmse)}"
            f"** to **{people(factor * half)}** at 95 % (x{half / best.rmse:.2f}, the same for "
            f"every mechanism; RMSE {best.rmse:.4g} to {half:.4g}).")


class TradeoffModel(param.Parameterized):
    """View-model of the inverse question (what budget reaches a target error) and of the
    mechanism highlighted on the chart."""

    target = param.Number(default=None, allow_None=True, bounds=(0, None),
                          inclusive_bounds=(False, True), label="Target error (+/- people)",
                          doc="The largest error in people at 95 % you accept.")
    highlighted = param.String(default=None, allow_None=True,
                               doc="The mechanism drawn bold on the chart (None: all alike).")
    unit = param.Selector(default="people", objects=list(UNITS),
                          doc="What the chart's y axis shows (a key of UNITS).")


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
            self.model.target = _round_sig(people_factor(best.plan)[0] * best.rmse / 2)
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
                    p.param.calibration, self.model.param.unit),
            sizing_mode="stretch_width")
        # The class goes on a wrapper: a Bokeh pane puts its css_classes on a figure only when
        # the figure is replaced, so a page opened on stored plans would have no class at all.
        chart = pn.Column(self._chart_pane, sizing_mode="stretch_width",
                          css_classes=["tradeoff-chart"])
        target = NumberBox(label="Target error (+/- people, 95 %)", value=self.model.target,
                           low=0, low_inclusive=False, css_class="target-people", width=240,
                           on_value=lambda value: setattr(self.model, "target", value))
        self.model.param.watch(lambda event: setattr(target, "value", event.new), "target")
        self.target_box = target
        unit = pn.widgets.RadioButtonGroup.from_param(
            self.model.param.unit, options={"+/- people (95 %)": "people", "RMSE": "rmse"},
            label="Chart's error axis", css_classes=["tradeoff-unit"],
            description=None)  # no tooltip: a button group shows none (one Bokeh model less)
        readout = DataTable(
            pn.bind(readout_frame, session.param.comparison),
            # columns share the page's width and notes wrap
            selectable=True, sizing_mode="stretch_width",
            widths={"mechanism": "18%", "error_95": "17%", "error_95_at_half_budget": "17%",
                    "rmse": "10%", "ratio_to_bound": "11%", "note": "27%"},
            titles={"error_95": "typical error (+/- people, 95 %)",
                    "error_95_at_half_budget": "at half the budget (+/- people)",
                    "rmse": "RMSE", "ratio_to_bound": "ratio to bound"},
            formats={"error_95": ",.1f", "error_95_at_half_budget": ",.1f", "rmse": ",.4f",
                     "ratio_to_bound": ".3f"},
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
            pn.Row(pn.pane.Markdown("Chart's error axis:", margin=(8, 10)), unit),
            chart,
            caption(pn.bind(self._caption, session.param.comparison, self.model.param.unit)),
            # Panes whose *content* is bound: a slider release updates text in place instead
            # of replacing panes (which would re-process the whole page).
            # Bound to the level too: while the plans are missing there is no comparison to
            # re-scale, and the line must still name the level the slider set.
            pn.pane.Markdown(pn.bind(self._level, session.param.comparison, p.param.noise,
                                     p.param.epsilon, p.param.delta, p.param.rho,
                                     p.param.calibration),
                             css_classes=["tradeoff-level"], margin=(0, 10)),
            caption("Click a row to highlight that mechanism's line on the chart (click it "
                    "again to show all alike)."),
            readout,
            csv_download(lambda: described(readout_frame(session.comparison),
                                           session.privacy, session.workload,
                                           session.comparison.bound_rmse
                                           if session.comparison else None),
                         "tradeoff.csv",
                         "Download table (CSV)", css_class="tradeoff-csv"),
            pn.pane.Markdown("### What budget do I need?", margin=(0, 10)),
            target,
            # answered when the reader scrolls near it (typing a target brings it into view)
            on_sight(lambda: BackgroundView(self._required, self.model.param.target,
                                            session.param.plans, p.param.noise,
                                            p.param.delta, p.param.calibration),
                     REQUIRED_HEIGHT, css_classes=["required-section"]),
            sizing_mode="stretch_width", css_classes=["tradeoff-page"],
        )

    def _select_row(self, table: DataTable) -> None:
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
                pn.state.notifications.error(f"Planning could not start: {plain(exc)}")

    def _comparison_changed(self, event: param.parameterized.Event) -> None:
        self._move_markers(event.new)
        if self.model.target is None and event.new is not None:
            best = event.new.best()
            if best is not None and best.plan is not None:
                self.model.target = _round_sig(people_factor(best.plan)[0] * best.rmse / 2)

    def _chart(self, plans: Comparison | None, noise: str, delta: float, calibration: str,
               unit: str):
        session = self.session
        if self._live is not None and page_closed(getattr(self, "_doc", None)):
            # The tab has gone: the chart is not redrawn for nobody, and its pane is left
            # alone (handed the drawn figure again, it copies the figure's stylesheet models
            # into parameters that take only text, and the page that changed the plans fails).
            raise param.Skip
        comparison = session.comparison
        privacy = comparison.privacy if comparison is not None else session.privacy
        y_label, y_name = UNITS[unit]
        self._live = LiveTradeoffChart(curve_frame(comparison, session.privacy, unit),
                                       marker_frame(comparison, unit), knob_value(privacy),
                                       privacy.noise, y_label=y_label, y_name=y_name)
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
            live.move(marker_frame(comparison, self.model.unit), knob_value(comparison.privacy))
            if self._doc is None:  # notebook: push the changed models explicitly
                self._chart_pane.param.trigger("object")

        # On the page's next tick, always: the change may come from another page of this
        # session, and a figure drawn in this same callback may not have reached the browser
        # yet (moving its markers now would reach it first: "reference ... isn't known").
        change_page(self._doc, move)

    def _caption(self, comparison: Comparison | None, unit: str) -> str:
        """What the chart draws, and only that (no dashed bound line when there is none)."""
        what = ("how far a typical count is from the truth, +/- people at 95 %"
                if unit == "people" else "the typical error per count (RMSE)")
        bound = ("the dashed black line is the SVD lower bound" if comparison is not None
                 and comparison.bound_rmse is not None
                 else "no lower bound is drawn (none is computable for this workload)")
        return (f"Log-log: each line is a mechanism's error across budgets, as {what}; "
                f"{bound}; dots mark your current budget. The toolbar's save button exports "
                "a PNG.")

    def _level(self, comparison: Comparison | None, *level: object) -> str:
        """The readout's heading and 'At <level>:' (``level``: the live level's fields it
        follows; one pane for both, not a pane per line)."""
        privacy = comparison.privacy if comparison is not None else self.session.privacy
        return f"### At your budget\n\nAt **{privacy.describe()}**:"

    def _required(self, target: float | None, plans: Comparison | None, noise: str, delta: float,
                  calibration: str) -> pn.viewable.Viewable:
        # A BackgroundView: one root search per mechanism for the analytic Gaussian.
        if not target:
            return pn.pane.Markdown("Type the error, in people, you can accept.")
        comparison = self.session.comparison
        privacy = self.session.privacy.with_()
        try:
            frame = required_frame(comparison, privacy, target,
                                   worst_ratios(self.session, comparison))
        except Exception as exc:  # a failed search must not take the page down
            return pn.pane.Alert(f"Could not answer: {plain(exc)}", alert_type="warning")
        name, _ = privacy_knob(noise)
        shown = f"{target:,g}"
        return pn.Column(
            pn.pane.Markdown(f"The smallest **{name}** at which a typical count is within "
                             f"**+/- {shown} people** (95 %), and at which every count, the "
                             "worst too, is:", margin=(0, 10), css_classes=["required-lead"]),
            DataTable(frame, sizing_mode="stretch_width",
                      widths={"mechanism": "18%", f"{name}_typical": "22%",
                              f"{name}_every": "22%", "note": "38%"},
                      css_classes=["required-budget"],
                      titles={f"{name}_typical": f"{name}: a typical count within +/- {shown}",
                              f"{name}_every": f"{name}: every count within +/- {shown}"},
                      formats={f"{name}_typical": ".3f", f"{name}_every": ".3f"}),
            caption("Each count is within the target 95 % of the time. A typical count: one "
                    "whose error has the mechanism's RMSE as its standard deviation. Every "
                    "count: the mechanism's worst query meets the target too. The bound's row "
                    "is a floor for both."),
            csv_download(lambda: described(frame.assign(target_people_95=target), privacy,
                                           self.session.workload,
                                           comparison.bound_rmse if comparison else None),
                         "budget-needed.csv", "Download table (CSV)",
                         css_class="required-csv"),
            sizing_mode="stretch_width")
