"""Strategy page: what the chosen mechanism measures, as pictures with plain captions.

Shown for every plan: the facts (error, noise, measurements), then pictures of the strategy
matrix A and of AᵀA at any size (the engine's block means at screen resolution, re-drawn on
every zoom, never a dense array of the whole matrix), the reconstruction map W A⁺ where it can
be formed, how precisely the count of each value of each attribute is known (± people at
95 %), and the typed views the
mechanism attached to its plan (``plan.views()``), each drawn by its type: matrices as
zoomable pictures, weights as bar charts, series as lines, tables and facts as tables, so new
mechanisms show up without changes here. Plain words come first; what the optimiser reports
about itself (facts and views marked ``detail``) is folded under "Details".
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pandas as pd
import panel as pn

from engine import (
    Comparison,
    Fact,
    FactsView,
    MatrixView,
    NotApplicable,
    Plan,
    SeriesView,
    TableView,
    View,
    WeightsView,
    chernoff_half_width,
    gaussian_half_width,
    one_line,
    reconstruction_map,
    value_count_variances,
)
from explorer.components.background import BackgroundView
from explorer.components.charts import color_of, series_curve, weights_bars
from explorer.components.exports import csv_download
from explorer.components.heatmap import too_big
from explorer.components.lazy_view import lazy_card, on_sight_in_turn
from explorer.components.matrix_picture import zoomable_picture
from explorer.components.mechanism_choice import mechanism_choice
from explorer.components.notes import caption
from explorer.components.progress import PlanningProgress, served
from explorer.components.table import DataTable
from explorer.pages.base import Page

#: Largest domain whose A and AᵀA are listed entry by entry (all-zero rows of A left out);
#: larger ones are drawn from the implicit matrix, block by block.
MATRIX_CELLS = 1024
#: Longest list of named weights drawn as bars (longer ones become a table).
MAX_BARS = 60
#: Views drawn when the page opens (the plan's numbers and the strategy's picture); the
#: others are drawn when the reader scrolls near them (:func:`on_sight_in_turn`).
FIRST_VIEWS = 2

NOTE = """
A mechanism does not answer your queries directly. It picks a set of **measurements** (the
*strategy*), adds random noise to each measured count, and then works out your answers from
those noisy counts. Good strategies measure things from which many of your answers can be
added up at once, so less noise piles up in each answer.

* **Strategy (A)**: each row is one measurement, each column one cell of the data (one
  combination of attribute values). A coloured entry means the measurement includes that cell,
  with that weight. Identity is the diagonal: every cell measured on its own.
* **What the measurements cover (AᵀA)**: a bright diagonal means every cell is well covered;
  colour away from the diagonal shows cells measured together.
* **How answers are rebuilt (W A⁺)**: each row is one of your queries, each column one
  measurement; the row's weights say how that answer is assembled from noisy measurements.
* **Per attribute**: many strategies are built attribute by attribute and then combined;
  each small picture is the part for one attribute.
* **Weights**: mechanisms that measure whole tables (marginals) or pieces of them (residuals)
  spread the privacy budget over them; taller bars mean more budget and less noise there.
"""

CAPTIONS = {
    "A": ("Each row is one noisy measurement, each column one cell of the data; colour is the "
          "weight the measurement gives the cell. All rows get the same noise, so a strategy "
          "is good when your queries can be added up from few of its rows."),
    "gram": ("How much the measurements together tell about each pair of cells. A strong "
             "diagonal means each cell is pinned down; colour off the diagonal means cells "
             "are mostly measured together."),
    "recon": ("How each of your answers (a row) is computed from the noisy measurements (the "
              "columns). Many large weights in a row mean more noise adds up in that answer."),
}


#: What each headline number means, in words and units (by fact key).
FACT_MEANINGS = {
    "rmse": "the typical size of the error in one published count, in counts (people): "
            "about two thirds of the answers are off by less than this",
    "privacy": "the noise family and the privacy budget the numbers are computed at",
    "l1": "how much one person can change all the measurements together, summed in absolute "
          "value; Laplace noise is scaled to it",
    "l2": "the same change measured as a Euclidean length; Gaussian noise is scaled to it",
    "plan_seconds": "how long choosing the measurements took, in seconds (no data is touched)",
    "noise_std": "the standard deviation of the noise added to each measurement, in counts",
    "rows": "how many noisy numbers the mechanism measures; the answers are computed from them",
    "unit_error": "the total squared error of all queries if each measurement had noise of "
                  "variance 1; smaller is better",
}

#: Title of the folded part that holds what the optimisers report about themselves.
DETAILS = "Details: how the optimiser ended (for researchers)"


def plan_facts(plan: Plan) -> FactsView:
    """The headline numbers of a plan at its privacy level."""
    entries = [
        Fact("mechanism", "mechanism", plan.mechanism),
        Fact("rmse", "RMSE (typical error per query)", plan.rmse(), "counts"),
        Fact("privacy", "privacy", plan.privacy.describe()),
        Fact("plan_seconds", "planning time", round(plan.plan_seconds, 3), "s"),
    ]
    # A sensitivity a mechanism does not calibrate to (infinite) is left out, not shown.
    entries += [Fact(f"l{p}", f"L{p} sensitivity", plan.sensitivity[p], detail=True)
                for p in (1, 2) if math.isfinite(plan.sensitivity.get(p, math.inf))]
    # A plan without a single noise scale (per-residual noise) simply leaves this out.
    with contextlib.suppress(Exception):
        entries.append(Fact("noise_std", "noise std per measurement", plan.noise_std(),
                            "counts"))
    if plan.strategy is not None:
        entries.append(Fact("rows", "measurements (rows of A)", plan.strategy.shape[0],
                            "rows"))
    return FactsView(key="plan", title="The plan", caption="The numbers behind the picture.",
                     facts=tuple(entries))


def _note(text: str) -> FactsView:
    return FactsView(key="A", title="Strategy", caption="Why the matrices are not drawn.",
                     facts=(Fact("strategy_matrix", "strategy matrix", text),))


def matrix_views(plan: Plan) -> list[View]:
    """A, AᵀA and W A⁺: listed entry by entry for small domains, drawn from the implicit
    matrix for large ones (a sentence saying why instead of a picture that cannot be made)."""
    A = plan.strategy
    n = plan.workload.domain.size
    if A is None:
        return [_note("This mechanism measures through its own routine; see its views below.")]
    m = A.shape[0]
    if n <= MATRIX_CELLS and not (too_big(A.shape) or too_big(plan.workload.shape)):
        dense = np.asarray(A.dense(), dtype=float)
        shown = dense[np.any(dense != 0, axis=1)]  # all-zero rows measure nothing
        strategy, gram = shown, dense.T @ dense
        m = shown.shape[0]
    else:
        strategy, gram = A, A.gram()
    views: list[View] = [drawable(
        MatrixView(key="A", title=f"Strategy A ({m:,} measurements x {n:,} cells)",
                   caption=CAPTIONS["A"], matrix=strategy, units="weight",
                   row_label="measurement", column_label="data cell")), drawable(
        MatrixView(key="gram", title="What the measurements cover (AᵀA)",
                   caption=CAPTIONS["gram"], matrix=gram, units="weight",
                   row_label="data cell", column_label="data cell"))]
    try:
        recon = reconstruction_map(plan.workload, A)
    except NotApplicable as exc:
        views.append(FactsView(key="recon", title="How answers are rebuilt (W A⁺)",
                               caption="Why this picture is not drawn.",
                               facts=(Fact("recon", "not drawn", one_line(exc)),)))
    else:
        views.append(MatrixView(key="recon", title=f"How answers are rebuilt (W A⁺, "
                                f"{recon.shape[0]:,} queries)", caption=CAPTIONS["recon"],
                                matrix=recon, units="weight", row_label="query",
                                column_label="measurement"))
    return views


def drawable(view: MatrixView) -> View:
    """``view``, or a sentence saying why it cannot be pictured (a coarse picture is tried
    first: an unstructured matrix too large for its products with indicators)."""
    try:
        view.picture(2, 2, statistic="mean")
    except ValueError as exc:
        return FactsView(key=view.key, title=view.title, caption="Why this picture is not "
                         "drawn.", facts=(Fact(view.key, "not drawn", one_line(exc)),))
    return view


def value_count_views(plan: Plan) -> list[View]:
    """For each attribute, how precisely the count of each of its values can be worked out
    from the plan's measurements (± people at 95 %); nothing when it cannot be computed."""
    if plan.strategy is None:
        return []
    domain = plan.workload.domain
    try:
        std = plan.noise_std()
        variances = value_count_variances(plan.strategy, domain.shape)
    except Exception:  # a plan without one noise scale, or too large: no view, no error
        return []
    gaussian = plan.privacy.noise != "laplace"
    views: list[View] = []
    for attribute, unit in zip(domain.attributes, variances, strict=True):
        if not np.all(np.isfinite(unit)):
            continue  # some counts are not estimable on their own
        people = np.asarray(gaussian_half_width(std * np.sqrt(unit)) if gaussian
                            else chernoff_half_width(std * np.sqrt(unit)), dtype=float)
        names = [str(v) for v in (attribute.labels or range(people.size))]
        words = {"key": f"counts[{attribute.name}]", "units": "people, 95 %",
                 "title": f"How precisely each {attribute.name} count is known",
                 "caption": (f"For each value of {attribute.name}: the number of records with "
                             "that value (over everything else), worked out from the noisy "
                             "measurements, is within ± this many people "
                             f"{'' if gaussian else 'at least '}95 % of the time. Lower is "
                             "more precise.")}
        if people.size <= MAX_BARS:
            views.append(WeightsView(names=tuple(names), values=people, **words))
        else:  # many values (ages, incomes): a line over the values in order
            views.append(SeriesView(values=people, x_label=f"{attribute.name} value", **words))
    return views


def strategy_views(plan: Plan) -> list[View]:
    """Every view of a plan: facts, the matrices, per-attribute count precision, the
    mechanism's views."""
    views: list[View] = [plan_facts(plan)]
    try:
        views.extend(matrix_views(plan))
    except Exception as exc:  # drawing must never take the page down
        views.append(_note(f"The matrices could not be drawn: {one_line(exc)}"))
    views.extend(value_count_views(plan))
    views.extend(plan.views())
    return views


def _with_units(label: str, units: str) -> str:
    return f"{label} ({units})" if units else label


def _table(frame: pd.DataFrame, key: str) -> pn.viewable.Viewable:
    return pn.Column(
        DataTable(frame, page_size=20, sizing_mode="stretch_width"),
        csv_download(lambda: frame, f"{key}.csv", "Download table (CSV)"))


def render_view(view: View, color: str) -> pn.viewable.Viewable:
    """One view as a Panel component, chosen by its type, with its caption and units."""
    return pn.Column(*view_parts(view, color), sizing_mode="stretch_width")


def view_parts(view: View, color: str) -> list[pn.viewable.Viewable]:
    """The components of one view, top to bottom (:func:`render_view` puts them in a column;
    a facts view's tables go straight into it, without a column of their own)."""
    # Charts carry their own title; tables get a bold line.
    title = pn.pane.Markdown(f"**{view.title}**", margin=(12, 10, 0, 10))
    chart = True
    tables: list[pn.viewable.Viewable] = []  # a facts view's tables, straight in its parts
    if isinstance(view, MatrixView):
        body: pn.viewable.Viewable = pn.pane.HoloViews(
            zoomable_picture(view), sizing_mode="stretch_width",
            css_classes=["strategy-heatmap", f"strategy-picture-{_css(view.key)}"])
    elif isinstance(view, WeightsView) and len(view.names) <= MAX_BARS:
        body = pn.Column(
            pn.pane.HoloViews(weights_bars(view.as_dict(), view.title,
                                           ylabel=view.units or "weight",
                                           color=color), sizing_mode="stretch_width"),
            _extremes(view.names, view.values, view.units, view.key),
            sizing_mode="stretch_width")
    elif isinstance(view, SeriesView):
        body = pn.Column(
            pn.pane.HoloViews(series_curve(view.values, view.title, view.x_label,
                                           view.units or "value", color),
                              sizing_mode="stretch_width"),
            _extremes([f"{view.x_label} {i}" for i in range(view.values.size)], view.values,
                      view.units, view.key),
            sizing_mode="stretch_width")
    elif isinstance(view, FactsView):
        chart = False
        plain = [f for f in view.facts if not f.detail]
        detail = [f for f in view.facts if f.detail]
        tables = [_facts_table(plain, "strategy-facts")] if plain else []
        if detail:
            tables.append(lazy_card(lambda: _facts_table(detail, "strategy-detail-facts"),
                                    title=f"Details: {view.title.lower()}",
                                    sizing_mode="stretch_width",
                                    css_classes=["strategy-details"]))
    elif isinstance(view, WeightsView):  # too many weights for bars
        chart = False
        body = _table(pd.DataFrame({"name": view.names, _with_units("weight", view.units):
                                    view.values}), view.key)
    elif isinstance(view, TableView):
        chart = False
        body = _table(pd.DataFrame(list(view.rows), columns=list(view.columns)), view.key)
    else:
        raise TypeError(f"strategy page: no drawing for {type(view).__name__}")
    content = tables if isinstance(view, FactsView) else [body]
    parts = content if chart else [title, *content]
    if not isinstance(view, FactsView) or view.key != "plan":
        units = f" Units: {view.units}." if view.units and not chart else ""
        parts.append(caption(view.caption + units))
    return parts


def view_height(view: View) -> int:
    """About the height a view takes on the page, in pixels (its placeholder's, until it is
    drawn)."""
    if isinstance(view, MatrixView):
        return 480
    if isinstance(view, WeightsView | SeriesView):
        return 360
    if isinstance(view, TableView):
        return 520
    return 40 + 36 * len(view.facts) if isinstance(view, FactsView) else 200


def _extremes(names: list[str] | tuple[str, ...], values: np.ndarray, units: str,
              key: str) -> pn.pane.Markdown:
    """The largest and smallest value of a chart in words, so its numbers can be read (and
    copied) without hovering."""
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return pn.pane.Markdown("No finite values to compare.", margin=(0, 10))
    hi = finite[np.argmax(values[finite])]
    lo = finite[np.argmin(values[finite])]
    if np.isclose(values[hi], values[lo], rtol=1e-9, atol=0):
        text = f"Every value: **{_fmt(values[hi], units)}**."
    else:
        text = (f"Largest: **{names[hi]}** ({_fmt(values[hi], units)}); "
                f"smallest: **{names[lo]}** ({_fmt(values[lo], units)}).")
    return pn.pane.Markdown(text, margin=(0, 10),
                            css_classes=["strategy-extremes", f"strategy-extremes-{_css(key)}"])


def _facts_table(entries: list[Fact], css: str) -> pn.pane.DataFrame:
    frame = pd.DataFrame({"": [f.label for f in entries],
                          "value": [_fmt(f.value, f.units) for f in entries]})
    meanings = [FACT_MEANINGS.get(f.key, "") for f in entries]
    if any(meanings):
        frame["what it means"] = meanings
    return pn.pane.DataFrame(frame, index=False, sizing_mode="stretch_width",
                             css_classes=[css])


def _css(key: str) -> str:
    """A view key as a CSS class suffix (``counts[age]`` -> ``counts-age``)."""
    return "".join(c if c.isalnum() else "-" for c in key).strip("-")


def _fmt(value: object, units: str = "") -> str:
    text = (f"{float(value):,.6g}" if isinstance(value, int | float)
            and not isinstance(value, bool) else str(value))
    return f"{text} {units}" if units else text


class StrategyPage(Page):
    """The strategy page."""

    title = "Strategy"
    note = NOTE

    def __panel__(self) -> pn.viewable.Viewable:
        session = self.session
        if served():
            # Opened directly: plan what is missing, as the compare page would.
            pn.state.onload(lambda: session.request_comparison(background=True))
        elif not session.complete:
            session.compare_now()
        choice = self._choice = mechanism_choice(session, "strategy-mechanism", 240)
        intro = ("The measurements the chosen mechanism makes for your workload "
                 f"({self.link('/compare', 'compare')} ranks the mechanisms).")
        return pn.Column(self.header(intro), choice, PlanningProgress(session=session),
                         BackgroundView(self._views, session.param.selected,
                                        session.param.plans),
                         sizing_mode="stretch_width", css_classes=["strategy-page"])

    def _views(self, name: str | None, plans: Comparison | None) -> pn.viewable.Viewable:
        # A BackgroundView: dense matrices and a pseudo-inverse for small domains.
        plan = self.session.plan(name)
        if plan is None:
            return pn.pane.Alert(
                "No plan to show yet: open the Compare page to plan the mechanisms, then "
                "pick one here.", alert_type="info", css_classes=["strategy-empty"])
        try:
            views = strategy_views(plan)
        except Exception as exc:  # drawing must never take the page down
            return pn.pane.Alert(f"The strategy of {name} could not be drawn: {one_line(exc)}",
                                 alert_type="warning")
        color = color_of(plan.mechanism)
        plain = [v for v in views if not v.detail]
        folded = [v for v in views if v.detail]
        shown = [render_view(v, color) for v in plain[:FIRST_VIEWS]]
        if plain[FIRST_VIEWS:]:
            shown.append(on_sight_in_turn([(lambda v=v: render_view(v, color), view_height(v))
                                           for v in plain[FIRST_VIEWS:]]))
        if folded:
            shown.append(lazy_card(
                lambda: pn.Column(*[render_view(v, color) for v in folded],
                                  sizing_mode="stretch_width"),
                title=DETAILS, sizing_mode="stretch_width", css_classes=["strategy-details"]))
        return pn.Column(*shown, sizing_mode="stretch_width", css_classes=["strategy-views"])
