"""Compare page: every mechanism's expected error on the workload, against the SVD lower bound.

The bound is computed first, on its own thread, and shows (or says why there is none) within
moments; the mechanisms are then planned cheapest first on a planner thread, each waiting one
listed with its estimated cost, and those estimated to take over a minute start only when the
user presses "Plan anyway" (see :func:`explorer.planning.schedule.schedule`). Finished plans
are cached per workload (see :mod:`explorer.planning.store`), so coming back is instant, and
changing the privacy level only re-scales them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import panel as pn
import param

from engine import METHODS, Comparison, is_continual
from explorer.components.background import BackgroundView, change_page
from explorer.components.charts import LiveBarsChart, color_of
from explorer.components.continual import continual_section
from explorer.components.exports import csv_download, described, provenance, text_download
from explorer.components.histogram import ScaledHistogram
from explorer.components.lazy_view import lazy_card, on_sight_in_turn
from explorer.components.mechanism_choice import mechanism_choice
from explorer.components.messages import plain
from explorer.components.notes import caption
from explorer.components.people import (
    GAUSSIAN_FACTOR,
    PER_QUERY_LIMIT,
    TYPICAL_MEANING,
    people,
    people_factor,
    plan_errors,
    row_factor,
)
from explorer.components.privacy import PrivacyControls
from explorer.components.progress import PlanningProgress, served
from explorer.components.report import html_report
from explorer.components.table import DataTable
from explorer.pages.base import Page
from explorer.planning.schedule import AUTO_START_SECONDS, OPERATIONS_PER_SECOND, is_data_dependent
from explorer.session import Session
from explorer.snippet import comparison_snippet

#: Columns of the comparison table and of its CSV export.
TABLE_COLUMNS = ("mechanism", "title", "error_95", "rmse", "ratio_to_bound", "plan_seconds",
                 "note", "error_95_method")
#: The comparison table's numeric columns and their type (missing numbers are NaN).
NUMBER_COLUMNS = {"error_95": "float64", "rmse": "float64", "ratio_to_bound": "float64",
                  "plan_seconds": "float64"}
#: What each column of comparison.csv means (written into its JSON sidecar).
COLUMN_MEANINGS = {
    "mechanism": "registered mechanism name", "title": "its display name",
    "error_95": f"typical error in people at 95 %: {TYPICAL_MEANING}",
    "rmse": "root mean squared error per query at the privacy level (people)",
    "ratio_to_bound": "rmse / the SVD lower bound (1.0 is the best possible)",
    "plan_seconds": "seconds spent planning", "note": "why a mechanism does not apply",
    "error_95_method": "how error_95 was obtained (exact quantile, or a bound)"}
#: Share of the comparison table's width per column (titles and notes wrap).
COLUMN_WIDTHS = {"mechanism": "15%", "title": "15%", "error_95": "15%", "rmse": "9%",
                 "ratio_to_bound": "12%", "plan_seconds": "9%", "note": "25%"}
#: Headers shown for the table's columns (the CSV keeps the names).
COLUMN_TITLES = {"error_95": "typical error (+/- people, 95 %)", "rmse": "RMSE",
                 "ratio_to_bound": "ratio to bound", "plan_seconds": "plan (s)"}
#: Check boxes in rows that wrap (Bokeh lays an inline group out in one row).
WRAPPED_BOXES = (".bk-input-group.bk-inline {flex-wrap: wrap; column-gap: 16px;}"
                 " .bk-inline > * {margin-left: 0 !important;}")
#: The page where each data-dependent mechanism runs on the user's data.
DATA_PAGES = {"aim-grem": "Adaptive", "hierarchical-pgsr": "Census hierarchy"}
#: Seconds a served compare page waits for the SVD bound before it is built without it.
BOUND_WAIT = 1.0
#: How many of the worst queries are listed.
WORST = 20
#: About the heights of the sections below the table, in pixels: their placeholders' until
#: the reader scrolls near them and they are built.
CONTINUAL_HEIGHT, PER_QUERY_HEIGHT, EXPORTS_HEIGHT = 560, 1000, 160
#: Largest number of rows of the per-query CSV (every query of one mechanism): a file size,
#: not a limit on what is computed (per-query errors go up to the engine's
#: :data:`~engine.analysis.expected_error.QUERY_LIMIT`, the one limit the pages state).
CSV_ROW_LIMIT = 1_000_000
#: Workloads with more queries than this show per-query errors only once planning has finished:
#: every query's variance under one plan takes seconds there (OPT_+ on Adult's 21 million
#: queries: 6.5 s), the best mechanism changes as each plan arrives, and that work in the web
#: process took the CPU from the planners (Adult's comparison: 24.5 s instead of ~12 s).
LIVE_PER_QUERY_LIMIT = 100_000

NOTE = """
Every **mechanism** here answers your queries by measuring some set of counts with random
noise added (the *strategy*), then combining those noisy counts into answers. They differ in
*which* counts they measure, so they differ in accuracy.

* **Typical error (+/- people, 95 %)**: a typical one of your counts is within this many
  people of the truth, 95 % of the time. Smaller is better. It does not depend on your data,
  only on the queries and the privacy level.
* **RMSE** (for researchers) is the same typical error as a standard deviation: the square
  root of the average squared error, in people. For Gaussian noise the 95 % error is
  1.96 x RMSE.
* The **SVD lower bound** (dashed line) is a floor: no mechanism of this kind (a fixed set of
  noisy linear measurements, combined by least squares) can have a smaller RMSE on this
  workload. *Ratio to bound* says how far a mechanism is from that floor; 1.0 is perfect.
* **Not applicable** means the mechanism cannot serve this workload or noise type; the note
  says why. Data-dependent mechanisms need the data itself and have their own pages.
* The **per-query** chart shows that a mechanism's error is not the same for every query:
  some counts come out much noisier than others. The table lists the worst ones.
"""


def comparison_frame(comparison: Comparison | None) -> pd.DataFrame:
    """One row per mechanism (best first): the table shown and the CSV written; the error in
    people at 95 % (``error_95``) first, the RMSE beside it."""
    records = comparison.to_records() if comparison is not None else []
    plans = {r.mechanism: r.plan for r in comparison.rows} if comparison is not None else {}
    for record in records:
        plan = plans.get(record["mechanism"])
        record["error_95"], record["error_95_method"] = None, ""
        if record["rmse"] is not None and plan is not None:
            factor, method = people_factor(plan)
            record["error_95"] = factor * record["rmse"]
            record["error_95_method"] = METHODS[method]
        if record["rmse"] is None and is_data_dependent(record["mechanism"]):
            # the engine's note gives command-line advice; on the page it has its own page
            page = DATA_PAGES.get(record["mechanism"], "its own")
            record["note"] = (f"not applicable here: it adapts to your data, so it runs on "
                              f"your data on the {page} page")
    # Fixed dtypes: with every RMSE still missing the numbers would be an object column, and
    # its type changing with the rows changes the table's column configuration, on which the
    # browser's table rebuilds itself and drops rows that arrive while it does.
    return pd.DataFrame(records, columns=list(TABLE_COLUMNS)).astype(NUMBER_COLUMNS)


def comparison_description(session: Session) -> dict[str, Any]:
    """comparison.json, the sidecar of comparison.csv: the privacy level, noise, workload
    and SVD bound the table's numbers are for, and what each column means."""
    comparison = session.comparison
    privacy = session.privacy
    workload = session.workload
    bound = comparison.bound_rmse if comparison is not None else None
    return {"file": "comparison.csv", "privacy": privacy.to_spec(),
            "privacy_text": privacy.describe(), "noise": privacy.noise,
            "workload": workload.describe(),
            "queries": workload.num_queries, "cells": workload.domain.size,
            **provenance(workload, bound), "columns": COLUMN_MEANINGS}


def comparison_table(comparison: Comparison | None) -> DataTable:
    """The comparison table, built with its rows (one row per mechanism, a row selectable).

    A page makes one and puts each new comparison into it (``value``): a new table per
    arriving plan sometimes never showed under load, the page keeping a table rows short
    while the headline (updated in place) was current; the browser had received the new
    table's model as a bare reference ("DataTabulator(p5885).css_classes is unset").
    """
    return DataTable(
        comparison_frame(comparison), selectable=True,
        # columns share the page's width and long titles and notes wrap
        widths=COLUMN_WIDTHS, titles=COLUMN_TITLES, sizing_mode="stretch_width",
        css_classes=["comparison-table"], hidden_columns=["error_95_method"],
        formats={"error_95": ",.1f", "rmse": ",.4f", "ratio_to_bound": ".3f",
                 "plan_seconds": ".3f"})


def bound_line(comparison: Comparison | None) -> str:
    """The SVD bound in one line: its RMSE at the live level, "computing...", or why none."""
    bound = comparison.bound if comparison is not None else None
    if bound is None or bound.method == "pending":
        return "**SVD lower bound:** computing..."
    value = comparison.bound_rmse
    if value is None:
        return f"**No SVD bound:** {bound.reason or 'it cannot be computed for this workload'}."
    typical = people(GAUSSIAN_FACTOR * value)
    if bound.kind == "floor":
        return (f"**SVD lower bound (certified floor):** {value:.4g} per count: the exact bound "
                "is too large to compute here, so this is a floor under it (the sum of the "
                "exact bounds of parts of the workload); no mechanism of this kind can have a "
                f"smaller RMSE on these queries, nor a typical count better than **{typical}** "
                "at 95 %.")
    return (f"**SVD lower bound:** {value:.4g} per count (exact): no mechanism of this kind "
            f"can have a smaller RMSE on these queries, nor a typical count better than "
            f"**{typical}** at 95 %.")


def bars_caption(comparison: Comparison | None) -> str:
    """What the bar chart draws, and only that (the dashed line only when there is a bound)."""
    bound = ("Dashed line: the SVD lower bound, the smallest typical error any mechanism of "
             "this kind could reach on these queries. " if comparison is not None
             and comparison.bound_rmse is not None else
             "No lower bound line: none is computed for this workload (the line above says "
             "why). ")
    return ("Bars: each mechanism's typical error in people: a typical count is within +/- "
            "this many people of the truth, 95 % of the time (smaller is better; hover a bar "
            "for its RMSE, the same error as a standard deviation), best first. " + bound
            + "Click a legend entry or a table row to highlight one mechanism (again to show "
            "all alike). Use the toolbar's save button for a PNG.")


def queue_table(queue: list[tuple[str, str, str]]) -> str:
    """The mechanisms without a row yet, in plan order, as a Markdown table ('' when none)."""
    if not queue:
        return ""
    lines = [
        f"**Not planned yet**, cheapest first. Estimates are rough: the cost model's operation "
        f"count at about {OPERATIONS_PER_SECOND:.0e} operations per second; mechanisms "
        f"estimated over {AUTO_START_SECONDS:.0f} s wait for 'Plan anyway'.",
        "",
        "| mechanism | state | estimate |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {state} | {estimate} |" for name, state, estimate in queue]
    return "\n".join(lines)


def headline(comparison: Comparison | None, privacy_text: str, complete: bool) -> str:
    """The answer in one or two plain sentences."""
    if comparison is None or not comparison.rows:
        return "No results yet: the mechanisms are being planned."
    best = comparison.best()
    bound = comparison.bound_rmse
    pending = "" if complete else " (still planning the rest)"
    if best is None and not complete:
        return (f"None of the mechanisms planned so far applies to this workload at "
                f"{privacy_text}{pending}.")
    if best is None:
        return f"No mechanism applies to this workload at {privacy_text}."
    typical = people_factor(best.plan)[0] * best.rmse if best.plan is not None else None
    text = (f"At **{privacy_text}**, the most accurate mechanism is **{best.mechanism}** "
            f"({best.title}): a typical count is within **{people(typical)}**, 95 % of the "
            f"time (RMSE {best.rmse:.4g} per count){pending}.")
    if bound:
        text += (f" No mechanism of this kind can go below **{people(GAUSSIAN_FACTOR * bound)}"
                 f"** (the SVD bound, RMSE {bound:.4g}), so it is within "
                 f"**{best.rmse / bound:.2f}x** of the best possible.")
    return text


def query_error_frame(session: Session, name: str | None = None,
                      limit: int | None = None) -> pd.DataFrame:
    """Expected error of every query (or of the ``limit`` worst) under a mechanism's plan at
    the live privacy level, worst first.

    Columns: ``query`` (term and row), ``description`` (the query in the domain's value
    labels, e.g. "age 30-34, sex female"), ``group`` (workload item, 1-based),
    ``expected_error`` (standard deviation of the query's error, counts), ``error_95``
    (the error is within +/- this many counts with 95 % probability: exact for Gaussian
    noise, a bound for Laplace, see ``error_95_method``) and ``variance`` (squared counts).
    Re-scaled from :func:`plan_errors`, so a privacy level costs a few multiplications.

    Raises:
        ValueError: when the mechanism has no plan, the workload has more queries than
            :data:`PER_QUERY_LIMIT`, or (every query, ``limit`` None) than
            :data:`CSV_ROW_LIMIT`.
    """
    workload = session.workload
    if workload.num_queries > PER_QUERY_LIMIT:
        raise ValueError(f"per-query errors are computed for up to {PER_QUERY_LIMIT:,} "
                         f"queries; this workload has {workload.num_queries:,}")
    if limit is None and workload.num_queries > CSV_ROW_LIMIT:
        raise ValueError(f"the file of every query is offered up to {CSV_ROW_LIMIT:,} rows; "
                         f"this workload has {workload.num_queries:,} queries")
    errors = plan_errors(session, name)
    privacy = session.privacy.with_()
    rows = errors.worst_first()
    if limit is not None:
        rows = rows[:limit]
    sizes = [t.num_queries for t in workload.terms]
    starts = np.cumsum([0, *sizes[:-1]])
    terms = np.searchsorted(starts, rows, side="right") - 1
    std = errors.std(privacy)[rows]
    labels = [workload.terms[t].label for t in terms]
    return pd.DataFrame({
        "query": [f"{label} [{r - starts[t]}]"
                  for label, t, r in zip(labels, terms, rows, strict=True)],
        "description": errors.labels(rows),
        "group": np.array([workload.terms[t].group + 1 for t in range(len(sizes))])[terms],
        "expected_error": std,
        "error_95": errors.half_widths(privacy)[rows],
        "error_95_method": METHODS[errors.method(privacy)],
        "variance": std * std})


def per_query_mechanism(session: Session) -> str | None:
    """The mechanism whose per-query errors the page, its CSV and the report show: the
    selected one when it has a plan, else the most accurate (None: no plan yet)."""
    if session.selected is not None and session.plan(session.selected) is not None:
        return session.selected
    best = session.comparison.best() if session.comparison is not None else None
    return best.mechanism if best is not None else None


def comparison_report(session: Session) -> str:
    """The one-page HTML report: headline, chart, table, the worst queries of the mechanism
    the per-query view shows (:func:`per_query_mechanism`), the privacy statement, the
    scenario, and when, with which version and for which workload it was made (opens
    offline)."""
    comparison = session.comparison
    shown = per_query_mechanism(session)
    worst = None
    if shown is not None:
        try:
            frame = query_error_frame(session, shown, WORST)
            worst = frame[["description", "query", "expected_error", "error_95"]]
        except ValueError:  # too many queries to list
            worst = None
    bound = comparison.bound_rmse if comparison else None
    return html_report(
        headline=headline(comparison, session.privacy.describe(), session.complete),
        table=comparison_frame(comparison), bound=bound, worst=worst, worst_of=shown,
        privacy=session.privacy.describe(), workload=session.workload.describe(),
        scenario_yaml=session.export_yaml(), made=provenance(session.workload, bound))


class ComparePage(Page):
    """The compare page."""

    title = "Compare mechanisms"
    note = NOTE
    #: False while a large workload's per-query views wait for planning to finish: the views
    #: follow it, so they are built when it flips (a view built as the last plan arrived,
    #: before the comparison on show had every row, would otherwise wait for good)
    per_query_ready = param.Boolean(default=True)
    #: the per-query view shown: (mechanism, plans, spread, worst table, histogram, its pane)
    _per_query: tuple[Any, ...] | None = None
    #: the comparison table (its rows follow the live comparison)
    _table: DataTable

    def __panel__(self) -> pn.viewable.Viewable:
        session = self.session
        progress = PlanningProgress(session=session)
        run = pn.widgets.Button(label="Plan missing mechanisms", color="primary",
                                css_classes=["run-comparison"])
        run.on_click(lambda event: self.run(include_skipped=True))
        anyway = pn.widgets.Button(label="Plan anyway", color="warning",
                                   css_classes=["plan-anyway"],
                                   visible=pn.bind(bool, session.param.held))
        anyway.on_click(lambda event: self.run(include_slow=True))
        # Check boxes, not a multi-choice menu: each is a labelled native input that a
        # keyboard and a screen reader reach (the menu's chips carry ARIA states axe refuses).
        # (their heading ends the intro's text: one pane, not two and a column)
        mechanisms = pn.widgets.CheckBoxGroup.from_param(
            session.param.mechanisms, inline=True, sizing_mode="stretch_width",
            css_classes=["mechanism-choice"], stylesheets=[WRAPPED_BOXES])
        if served():
            # Bound first: started before the page is built and waited for a moment, so the
            # page usually opens with it (planning starts once the page has loaded).
            session.start_bound(wait=BOUND_WAIT)
            session.refresh()
            session.preview_queue()  # estimates while the page loads
            pn.state.onload(self.run)
            # A new workload, noise type or mechanism choice needs plans: start them at once.
            self.watch(session, lambda *events: self.run(), ["scenario", "mechanisms"])
            self.watch(session.privacy, lambda *events: self.run(), "noise")
        elif not session.complete:
            session.compare_now()
        self._doc = pn.state.curdoc
        self._bars = LiveBarsChart(session.comparison, on_pick=self._picked, factor=row_factor)
        self._bars_pane = pn.pane.Bokeh(self._bars.figure, sizing_mode="stretch_width")
        self._table = comparison_table(session.comparison)
        self._select_highlighted()
        self._table.param.watch(self._row_chosen, "selection")
        self.watch(session, self._comparison_changed, "comparison")
        return pn.Column(
            self.header(),
            pn.pane.Markdown(pn.bind(self._intro, session.param.scenario), margin=(0, 10),
                             css_classes=["compare-intro"]),
            mechanisms,
            PrivacyControls(privacy=session.privacy, compact=True),
            pn.Row(run, anyway, progress, sizing_mode="stretch_width"),
            pn.pane.Markdown(pn.bind(bound_line, session.param.comparison),
                             css_classes=["bound-status"], sizing_mode="stretch_width"),
            pn.pane.Markdown(pn.bind(queue_table, session.param.queue),
                             css_classes=["planning-queue"], sizing_mode="stretch_width"),
            pn.pane.Markdown(pn.bind(self._headline, session.param.comparison,
                                     session.param.plans),
                             css_classes=["compare-headline"], sizing_mode="stretch_width",
                             styles={"font-size": "1.1em"}),
            # On a wrapper: a Bokeh pane gives its figure the class only when it is replaced.
            pn.Column(self._bars_pane, sizing_mode="stretch_width", css_classes=["rmse-chart"]),
            caption(pn.bind(bars_caption, session.param.comparison)),
            self._table,
            pn.Row(csv_download(lambda: described(comparison_frame(session.comparison),
                                                  session.privacy, session.workload,
                                                  session.comparison.bound_rmse
                                                  if session.comparison else None),
                                "comparison.csv",
                                "Download table (CSV)", css_class="comparison-csv"),
                   text_download(lambda: json.dumps(comparison_description(session), indent=1),
                                 "comparison.json", "Download what it describes (JSON)",
                                 css_class="comparison-json")),
            # below the table: built when the reader scrolls near them, one placeholder for
            # them all (on_sight_in_turn); a workload over time first gets its continual part
            on_sight_in_turn(self._below_the_table()),
            sizing_mode="stretch_width", css_classes=["compare-page"],
        )

    def _below_the_table(self) -> list[tuple[Callable[[], pn.viewable.Viewable], int]]:
        """The parts under the table and about their heights: the continual part (a workload
        over time), per-query errors and exports (each under a divider)."""
        session = self.session

        def divided(build: Callable[[], pn.viewable.Viewable], css_class: str,
                    divider: bool = True) -> Callable[[], pn.viewable.Viewable]:
            # a rule drawn by the column's own border: a Divider made after the page has loaded
            # asks the browser for its stylesheet from Panel's CDN, which a server offline lacks
            rule = {"border-top": "1px solid #dddddd", "padding-top": "10px",
                    "margin-top": "10px"} if divider else {}
            return lambda: pn.Column(build(), margin=0, sizing_mode="stretch_width",
                                     css_classes=[css_class], styles=rule)

        # the continual part is empty for other workloads, but there from the start: the
        # workload may become one over time while the page is open
        continual = divided(lambda: continual_section(session), "continual-section", False)
        return [(continual, CONTINUAL_HEIGHT if is_continual(session.workload) else 0),
                (divided(self._per_query_section, "per-query-section"), PER_QUERY_HEIGHT),
                (divided(self._exports_section, "exports-section"), EXPORTS_HEIGHT)]

    def run(self, include_skipped: bool = False, include_slow: bool = False) -> None:
        """Plan whatever is missing (on a worker thread when served).

        Automatic runs leave out mechanisms the user skipped and those estimated over a minute;
        "Plan missing mechanisms" plans both, "Plan anyway" the slow ones.
        """
        try:
            self.session.request_comparison(background=served(),
                                            include_skipped=include_skipped,
                                            include_slow=include_skipped or include_slow)
        except Exception as exc:  # nothing a user does may take the server down
            if pn.state.notifications is not None:
                pn.state.notifications.error(f"Planning could not start: {plain(exc)}")

    # ----- the chart and its highlight ------------------------------------------------------
    @property
    def highlighted(self) -> str | None:
        """The mechanism highlighted on the chart (None: all alike)."""
        return self._bars.highlighted

    def highlight(self, mechanism: str | None) -> None:
        """Outline ``mechanism``'s bar and fade the others (None: all alike)."""
        bars = self._bars
        self._on_page_tick(lambda: bars.highlight(mechanism))

    def _picked(self, mechanism: str | None) -> None:
        if self._doc is None:  # notebook: push the changed models
            self._bars_pane.param.trigger("object")

    def _select_highlighted(self) -> None:
        """Select the highlighted mechanism's row (none when no mechanism is highlighted)."""
        names = list(self._table.value["mechanism"])
        rows = [names.index(self.highlighted)] if self.highlighted in names else []
        if self._table.selection != rows:
            self._table.selection = rows

    def _row_chosen(self, event: param.parameterized.Event) -> None:
        names = list(self._table.value["mechanism"])
        rows = event.new
        self.highlight(names[rows[0]] if rows and rows[0] < len(names) else None)

    def _comparison_changed(self, event: param.parameterized.Event) -> None:
        comparison = event.new
        self.per_query_ready = not self._planning_large()
        self._table.value = comparison_frame(comparison)
        self._select_highlighted()
        self._follow_privacy()

        def show() -> None:
            if self._bars.fits(comparison):
                self._bars.rescale(comparison)  # a new privacy level: heights only
                return
            picked = self._bars.highlighted
            self._bars = LiveBarsChart(comparison, on_pick=self._picked, factor=row_factor)
            self._bars.highlight(picked)
            self._bars_pane.object = self._bars.figure

        self._on_page_tick(show)

    def _on_page_tick(self, change: Callable[[], None], pane: pn.pane.Bokeh | None = None
                      ) -> None:
        """Run ``change`` (which touches the models of a chart: the bars' unless ``pane`` is
        given) on this page's next tick when served (table events and the session's other
        pages arrive without this page's document lock, and Bokeh requires it); at once, then
        pushed, in a notebook."""
        change_page(self._doc, change, pane or self._bars_pane)

    def _intro(self, scenario: Any) -> str:
        w = scenario.workload
        return (f"Workload: **{w.describe()}**. Change it on the "
                f"{self.link('/builder', 'workload page')}; explore the budget on the "
                f"{self.link('/tradeoff', 'privacy trade-off page')}.\n\n"
                "**Mechanisms to compare**")

    def _headline(self, comparison: Comparison | None, plans: Comparison | None) -> str:
        text = headline(comparison, self.session.privacy.describe(), self.session.complete)
        held = self.session.held
        if held:
            text += (f" {len(held)} mechanism(s) estimated to take over "
                     f"{AUTO_START_SECONDS:.0f} s were not started: press 'Plan anyway'.")
        return text

    # ----- per-query errors -----------------------------------------------------------------
    def _per_query_section(self) -> pn.viewable.Viewable:
        session = self.session
        choice = mechanism_choice(session, "selected-mechanism", 220)
        query = pn.widgets.TextInput(label="A query, in words (e.g. 'age 30, sex female')",
                                     placeholder="empty: the worst query",
                                     css_classes=["query-in-words"], width=360)
        return pn.Column(
            pn.pane.Markdown("## Which queries are worst?", margin=(0, 10)),
            pn.Row(choice, query),
            BackgroundView(self._in_people, session.param.selected, session.param.comparison,
                           query.param.value, self.param.per_query_ready),
            BackgroundView(self._per_query_view, session.param.selected, session.param.plans,
                           self.param.per_query_ready),
            sizing_mode="stretch_width", css_classes=["per-query"],
        )

    def _planning_large(self) -> bool:
        """True while mechanisms are still being planned for a workload of more than
        :data:`LIVE_PER_QUERY_LIMIT` queries (per-query views then wait for the last plan)."""
        session = self.session
        return (session.workload.num_queries > LIVE_PER_QUERY_LIMIT
                and not session.complete)

    def _after_planning(self, what: str) -> str:
        return (f"{what} will show once every mechanism is planned: this workload has "
                f"{self.session.workload.num_queries:,} queries, and computing each arriving "
                "plan's per-query errors would slow planning down.")

    def _in_people(self, name: str | None, comparison: Comparison | None, text: str,
                   ready: bool = True) -> pn.viewable.Viewable:
        """One query's error in people at 95 % under the selected mechanism (``ready``:
        :attr:`per_query_ready`, an input only so that the view is rebuilt when it flips)."""
        plan = self.session.plan(name) if name is not None else None
        if plan is None:
            why = ("no mechanism is picked yet" if name is None else
                   f"{name} has no plan (not applicable here, or not planned yet)")
            return pn.pane.Markdown(f"No query errors to show: {why}.",
                                    css_classes=["query-in-people"])
        if not text.strip() and self._planning_large():
            return pn.pane.Markdown(self._after_planning("The worst query"),
                                    css_classes=["query-in-people"])
        try:
            errors = plan_errors(self.session, name)
            query = text if text.strip() else errors.worst()
            error = errors.query(query, self.session.privacy.with_())
        except Exception as exc:  # an unknown label, too many queries
            return pn.pane.Alert(plain(exc), alert_type="warning",
                                 css_classes=["query-error-message"])
        lead = "" if text.strip() else "The worst query, "
        return pn.pane.Markdown(
            f"{lead}**{error.label}** under **{name}**: within **+/- "
            f"{error.half_width:,.1f} people** of the truth with {error.level:.0%} probability "
            f"(standard deviation {error.std:,.2f}; {METHODS[error.method]}).",
            css_classes=["query-in-people"], sizing_mode="stretch_width")

    def _per_query_numbers(self, name: str) -> tuple[pd.DataFrame, str, float]:
        """The worst queries, the spread in words and the scale from unit noise, at the live
        privacy level (re-scaled from :func:`plan_errors`)."""
        privacy = self.session.privacy.with_()
        per_query = plan_errors(self.session, name)
        frame = query_error_frame(self.session, name, WORST)
        scale = per_query.scale(privacy)
        order = per_query.worst_first()
        unit = per_query.unit_std()
        spread = (f"Errors range from **{scale * unit[order[-1]]:.4g}** to "
                  f"**{scale * unit[order[0]]:.4g}** (median {per_query.median_std(privacy):.4g})"
                  f" over {unit.size:,} queries.")
        return frame, spread, scale

    def _per_query_view(self, name: str | None, plans: Comparison | None, ready: bool = True
                        ) -> pn.viewable.Viewable:
        """The selected mechanism's per-query errors: built when plans or the selection change
        (a :class:`BackgroundView`: the first call computes every query's variance) or
        :attr:`per_query_ready` (``ready``) flips,
        re-scaled in place by :meth:`_follow_privacy` when the privacy level moves."""
        self._per_query = None
        if name is None or plans is None:
            return pn.pane.Markdown("Pick a planned mechanism to see its per-query errors.")
        if self._planning_large():
            return pn.pane.Markdown(self._after_planning("Per-query errors"))
        try:
            frame, spread, scale = self._per_query_numbers(name)
            unit = plan_errors(self.session, name).unit_std()
        except Exception as exc:  # too many queries, no explicit strategy, ...
            return pn.pane.Alert(f"Per-query errors of {name} are not available: "
                                 f"{plain(exc)}", alert_type="secondary")
        histogram = ScaledHistogram(unit, scale, color_of(name), f"Per-query error of {name}")
        text = pn.pane.Markdown(spread, margin=(0, 10), css_classes=["per-query-spread"])
        pane = pn.pane.Bokeh(histogram.figure, sizing_mode="stretch_width")
        # error_95_method is the same on every row (the plan's, named in the sentence above
        # and kept in the CSV): on the page it only pushed the table past the right edge
        table = DataTable(
            frame, hidden_columns=["error_95_method"],
            sizing_mode="stretch_width", css_classes=["worst-queries"],
            formats={"expected_error": ",.4f", "error_95": ",.1f", "variance": ",.4f"})
        self._per_query = (name, self.session.plans, text, table, histogram, pane)
        return pn.Column(
            text,
            pn.Column(pane, sizing_mode="stretch_width", css_classes=["per-query-histogram"]),
            caption("How many queries have each level of expected error. A wide spread means "
                    "some of your counts are much less reliable than others."),
            table,
            caption(f"error_95: the error is within +/- this many counts with 95 % probability "
                    f"({frame['error_95_method'].iloc[0] if len(frame) else ''})."),
            self._per_query_csv(name),
            sizing_mode="stretch_width")

    def _per_query_csv(self, name: str) -> pn.viewable.Viewable:
        """The download of every query's error under ``name`` (named after it), or why not."""
        session = self.session
        if session.workload.num_queries > CSV_ROW_LIMIT:
            return caption(f"The file of every query is offered up to {CSV_ROW_LIMIT:,} rows; "
                           f"this workload has {session.workload.num_queries:,} queries (the "
                           "worst ones are listed above).")
        return csv_download(lambda: described(
                                query_error_frame(session, name).assign(mechanism=name),
                                session.privacy, session.workload,
                                session.comparison.bound_rmse if session.comparison else None),
                            f"per-query-{name}.csv", f"Download all queries of {name} (CSV)",
                            css_class="per-query-csv")

    def _follow_privacy(self) -> None:
        """Re-scale the shown per-query view to the live privacy level: new numbers in the
        spread line and the worst-queries table, new bin edges on the histogram (the order of
        the queries and the bin counts do not change with the level)."""
        session = self.session
        shown = self._per_query
        if shown is None or shown[0] != session.selected or shown[1] is not session.plans:
            return  # a new view is being built for the new plans or selection
        name, _, text, table, histogram, pane = shown
        try:
            frame, spread, scale = self._per_query_numbers(name)
        except ValueError:  # the plan went away meanwhile
            return
        text.object = spread
        table.value = frame
        self._on_page_tick(lambda: histogram.rescale(scale), pane)

    # ----- exports --------------------------------------------------------------------------
    def _exports_section(self) -> pn.viewable.Viewable:
        session = self.session

        def code() -> str:
            return comparison_snippet(session.export_spec())

        def view(*changed: Any) -> pn.pane.Markdown:
            if not _small(session):
                return pn.pane.Markdown("The scenario is large: download the script instead.")
            return pn.pane.Markdown(f"```python\n{code()}\n```", sizing_mode="stretch_width",
                                    css_classes=["python-snippet"])

        snippet = pn.bind(view, session.param.scenario, session.param.mechanisms,
                          session.param.comparison)
        return pn.Column(
            pn.pane.Markdown("## Take it with you", margin=(0, 10)),
            pn.Row(text_download(session.export_yaml, "scenario.yaml",
                                 "Download scenario (YAML)", css_class="yaml-download"),
                   text_download(code, "comparison.py", "Download Python script",
                                 css_class="snippet-download"),
                   text_download(lambda: comparison_report(session), "comparison-report.html",
                                 "Download report (HTML)", css_class="report-download")),
            lazy_card(lambda: pn.panel(snippet), title="Python that reproduces this comparison",
                      sizing_mode="stretch_width"),
            sizing_mode="stretch_width")


def _small(session: Session) -> bool:
    spec = session.draft if isinstance(session.draft, dict) else {}
    return len(str(spec)) < 20_000
