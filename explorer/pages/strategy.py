"""Strategy page: what the chosen mechanism measures, as pictures with plain captions.

Shown for every plan: the facts (sensitivity, noise, error). For small domains: the strategy
matrix A, the Gram matrix AᵀA and the reconstruction map W A⁺. Then the typed views the
mechanism attached to its plan (``plan.views()``), each drawn by its type: matrices as heat
maps, weights as bar charts, series as lines, tables and facts as tables, so new mechanisms
show up without changes here.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import panel as pn

from engine import (
    Comparison,
    Fact,
    FactsView,
    MatrixView,
    Plan,
    SeriesView,
    TableView,
    View,
    WeightsView,
    one_line,
    reconstruction_map,
)
from explorer.components.background import BackgroundView
from explorer.components.charts import color_of, series_curve, weights_bars
from explorer.components.exports import csv_download
from explorer.components.heatmap import matrix_heatmap, too_big
from explorer.components.mechanism_choice import mechanism_choice
from explorer.components.notes import caption
from explorer.components.progress import PlanningProgress, served
from explorer.pages.base import Page

#: Largest domain for the A / AᵀA / W A⁺ pictures (they are computed densely).
MATRIX_CELLS = 1024
#: Longest list of named weights drawn as bars (longer ones become a table).
MAX_BARS = 60

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


def plan_facts(plan: Plan) -> FactsView:
    """The headline numbers of a plan at its privacy level."""
    entries = [
        Fact("mechanism", "mechanism", plan.mechanism),
        Fact("rmse", "RMSE (typical error per query)", plan.rmse(), "counts"),
        Fact("privacy", "privacy", plan.privacy.describe()),
        Fact("l1", "L1 sensitivity", plan.sensitivity[1]),
        Fact("l2", "L2 sensitivity", plan.sensitivity[2]),
        Fact("plan_seconds", "planning time", round(plan.plan_seconds, 3), "s"),
    ]
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
    """A, AᵀA and W A⁺ for small domains (an explanation instead when they are too big)."""
    A = plan.strategy
    n = plan.workload.domain.size
    if A is None:
        return [_note("This mechanism measures through its own routine; see its views below.")]
    if n > MATRIX_CELLS:
        return [_note(f"The domain has {n:,} cells; the full strategy matrix is drawn for at "
                      f"most {MATRIX_CELLS:,} cells. The per-attribute views below show its "
                      "structure.")]
    reason = too_big(A.shape) or too_big(plan.workload.shape)
    if reason:
        return [_note(f"Not drawn: {reason}.")]
    dense = np.asarray(A.dense(), dtype=float)
    shown = dense[np.any(dense != 0, axis=1)]  # all-zero rows measure nothing
    recon = reconstruction_map(plan.workload, A)
    return [
        MatrixView(key="A", title=f"Strategy A ({shown.shape[0]} measurements x {n} cells)",
                   caption=CAPTIONS["A"], matrix=shown, units="weight",
                   row_label="measurement", column_label="data cell"),
        MatrixView(key="gram", title="What the measurements cover (AᵀA)",
                   caption=CAPTIONS["gram"], matrix=dense.T @ dense, units="weight",
                   row_label="data cell", column_label="data cell"),
        MatrixView(key="recon", title=f"How answers are rebuilt (W A⁺, {recon.shape[0]} "
                   "queries)", caption=CAPTIONS["recon"], matrix=recon, units="weight",
                   row_label="query", column_label="measurement"),
    ]


def strategy_views(plan: Plan) -> list[View]:
    """Every view of a plan: facts, the matrices (small domains), the mechanism's views."""
    views: list[View] = [plan_facts(plan)]
    try:
        views.extend(matrix_views(plan))
    except Exception as exc:  # drawing must never take the page down
        views.append(_note(f"The matrices could not be drawn: {one_line(exc)}"))
    views.extend(plan.views())
    return views


def _with_units(label: str, units: str) -> str:
    return f"{label} ({units})" if units else label


def _table(frame: pd.DataFrame, key: str) -> pn.viewable.Viewable:
    return pn.Column(
        pn.widgets.Tabulator(frame, show_index=False, disabled=True, page_size=20,
                             pagination="local", sizing_mode="stretch_width"),
        csv_download(lambda: frame, f"{key}.csv", "Download table (CSV)"))


def render_view(view: View, color: str) -> pn.viewable.Viewable:
    """One view as a Panel component, chosen by its type, with its caption and units."""
    # Charts carry their own title; tables get a bold line.
    title = pn.pane.Markdown(f"**{view.title}**", margin=(12, 10, 0, 10))
    chart = True
    if isinstance(view, MatrixView):
        reason = too_big(view.shape)
        body: pn.viewable.Viewable = pn.pane.HoloViews(
            matrix_heatmap(view.array(), view.title, xlabel=view.column_label,
                           ylabel=view.row_label),
            sizing_mode="stretch_width", css_classes=["strategy-heatmap"]) if not reason \
            else pn.pane.Markdown(f"Not drawn: {reason}.", margin=(0, 10))
    elif isinstance(view, WeightsView) and len(view.names) <= MAX_BARS:
        body = pn.pane.HoloViews(weights_bars(view.as_dict(), view.title,
                                              ylabel=_with_units("weight", view.units),
                                              color=color), sizing_mode="stretch_width")
    elif isinstance(view, SeriesView):
        body = pn.pane.HoloViews(series_curve(view.values, view.title, view.x_label,
                                              _with_units("value", view.units), color),
                                 sizing_mode="stretch_width")
    elif isinstance(view, FactsView):
        chart = False
        frame = pd.DataFrame({"": [f.label for f in view.facts],
                              "value": [_fmt(f.value, f.units) for f in view.facts]})
        meanings = [FACT_MEANINGS.get(f.key, "") for f in view.facts]
        if any(meanings):
            frame["what it means"] = meanings
        body = pn.pane.DataFrame(frame, index=False, sizing_mode="stretch_width",
                                 css_classes=["strategy-facts"])
    elif isinstance(view, WeightsView):  # too many weights for bars
        chart = False
        body = _table(pd.DataFrame({"name": view.names, _with_units("weight", view.units):
                                    view.values}), view.key)
    elif isinstance(view, TableView):
        chart = False
        body = _table(pd.DataFrame(list(view.rows), columns=list(view.columns)), view.key)
    else:
        raise TypeError(f"strategy page: no drawing for {type(view).__name__}")
    parts = [body] if chart else [title, body]
    if not isinstance(view, FactsView) or view.key != "plan":
        units = f" Units: {view.units}." if view.units and not chart else ""
        parts.append(caption(view.caption + units))
    return pn.Column(*parts, sizing_mode="stretch_width")


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
        return pn.Column(*[render_view(v, color) for v in views], sizing_mode="stretch_width",
                         css_classes=["strategy-views"])
