"""Strategy page: what the chosen mechanism measures, as pictures with plain captions.

Shown for every plan: the facts (sensitivity, noise, error). For small domains: the strategy
matrix A, the Gram matrix AᵀA and the reconstruction map W A⁺. Then whatever views the
mechanism attached to its plan (``Plan.details``), drawn generically: matrices as heat maps,
named weights as bar charts, tables as tables, so new mechanisms show up without changes here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import panel as pn

from engine.domain import Domain
from engine.error import reconstruction_map
from engine.linalg.matrix import Matrix
from engine.mechanisms import Plan
from explorer.components.charts import color_of, weights_bars
from explorer.components.exports import csv_download
from explorer.components.heatmap import matrix_heatmap, too_big
from explorer.components.notes import caption
from explorer.components.progress import PlanningProgress, off_loop, served
from explorer.pages.base import Page
from explorer.state import one_line

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
    "factors": ("The strategy is built attribute by attribute: this is the part for one "
                "attribute (rows: measurements, columns: its values). The full strategy "
                "measures every combination of these parts."),
    "marginal_weights": ("The share of the privacy budget each table (marginal) gets. Taller "
                         "bars are measured more precisely; a table with no bar is not "
                         "measured and is worked out from the others."),
    "union_weights": ("How the budget is split between the parts of a union strategy (one "
                      "part per group of queries)."),
    "residual_table": ("How the noise is spread over residuals: a residual is what a table "
                       "adds beyond its smaller sub-tables. Each is measured once with its "
                       "own noise level."),
    "strategy": "The measurements the mechanism takes (rows) over the data cells (columns).",
}


@dataclass(frozen=True)
class StrategyView:
    """One picture or table of a plan: what it is, a caption, and the data to draw."""

    key: str
    title: str
    caption: str
    kind: str  # matrix | weights | table | facts | text
    data: Any


def _axes_label(key: Any, domain: Domain | None) -> str:
    """Attribute names for an axis-tuple key such as (0, 2); the key itself otherwise."""
    if domain is not None and isinstance(key, tuple) and all(
            isinstance(i, int | np.integer) and 0 <= int(i) < len(domain) for i in key):
        return " x ".join(domain.names[int(i)] for i in key) or "total"
    if isinstance(key, tuple):
        return " x ".join(map(str, key)) or "total"
    return str(key)


def _as_array(value: Any) -> np.ndarray | None:
    """A dense array for a small Matrix / ndarray / nested list, else None."""
    if isinstance(value, Matrix):
        if too_big(value.shape):
            return None
        try:
            return np.asarray(value.dense(), dtype=float)
        except Exception:  # a matrix refusing to densify is shown as text instead
            return None
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return array if array.ndim in (1, 2) and array.size else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool)


def detail_views(details: Mapping[str, Any], domain: Domain | None = None,
                 prefix: str = "") -> list[StrategyView]:
    """Views of a plan's ``details``, drawn by the shape of each value."""
    views: list[StrategyView] = []
    facts: dict[str, Any] = {}
    for key, value in details.items():
        name = f"{prefix}{key}"
        text = CAPTIONS.get(str(key), f"The mechanism's '{key}' view.")
        if key == "kind":
            facts["strategy kind"] = value
            continue
        if key == "factors" and isinstance(value, Sequence) and not isinstance(value, str):
            names = domain.names if domain is not None and len(domain) == len(value) else None
            for i, factor in enumerate(value):
                label = names[i] if names else f"factor {i + 1}"
                array = _as_array(factor)
                if array is None:
                    shape = getattr(factor, "shape", "?")
                    views.append(StrategyView(f"{name}[{i}]", f"Part for {label}", text, "text",
                                              f"a {shape} matrix, too large to draw"))
                elif array.ndim == 2:
                    views.append(StrategyView(f"{name}[{i}]", f"Part for {label}", text,
                                              "matrix", array))
            continue
        if isinstance(value, pd.DataFrame):
            views.append(StrategyView(name, str(key).replace("_", " "), text, "table", value))
        elif isinstance(value, Mapping):
            if value and all(_is_number(v) for v in value.values()):
                weights = {_axes_label(k, domain): float(v) for k, v in value.items()}
                kind = "weights" if len(weights) <= MAX_BARS else "table"
                data = weights if kind == "weights" else pd.DataFrame(
                    {"name": list(weights), "value": list(weights.values())})
                views.append(StrategyView(name, str(key).replace("_", " "), text, kind, data))
            else:
                views.extend(detail_views(value, domain, prefix=f"{name}."))
        elif isinstance(value, list | tuple) and value and all(isinstance(v, Mapping)
                                                                 for v in value):
            frame = pd.DataFrame([{str(k): (_axes_label(v, domain) if isinstance(v, tuple)
                                            else v) for k, v in row.items()} for row in value])
            views.append(StrategyView(name, str(key).replace("_", " "), text, "table", frame))
        elif _is_number(value) or isinstance(value, str | bool) or value is None:
            facts[str(key).replace("_", " ")] = value
        else:
            array = _as_array(value)
            if array is None:
                facts[str(key).replace("_", " ")] = _short(value)
            elif array.ndim == 2:
                views.append(StrategyView(name, str(key).replace("_", " "), text, "matrix",
                                          array))
            else:
                weights = {str(i): float(v) for i, v in enumerate(array)}
                kind = "weights" if len(weights) <= MAX_BARS else "table"
                data = weights if kind == "weights" else pd.DataFrame(
                    {"index": list(weights), "value": list(weights.values())})
                views.append(StrategyView(name, str(key).replace("_", " "), text, kind, data))
    if facts:
        views.insert(0, StrategyView(f"{prefix}facts", "Details", "What the mechanism "
                                     "reports about its plan.", "facts", facts))
    return views


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def plan_facts(plan: Plan) -> dict[str, Any]:
    """The headline numbers of a plan at its privacy level."""
    facts: dict[str, Any] = {
        "mechanism": plan.mechanism,
        "RMSE (typical error per query)": plan.rmse(),
        "privacy": plan.privacy.describe(),
        "L1 sensitivity": plan.sensitivity.get(1),
        "L2 sensitivity": plan.sensitivity.get(2),
        "planning time (s)": round(plan.plan_seconds, 3),
    }
    # A plan without a single noise scale (per-residual noise) simply leaves this out.
    with contextlib.suppress(Exception):
        facts["noise std per measurement"] = plan.noise_std()
    if plan.strategy is not None:
        facts["measurements (rows of A)"] = plan.strategy.shape[0]
    return facts


def matrix_views(plan: Plan) -> list[StrategyView]:
    """A, AᵀA and W A⁺ for small domains (an explanation instead when they are too big)."""
    A = plan.strategy
    n = plan.workload.domain.size
    if A is None:
        return [StrategyView("A", "Strategy", "", "text",
                             "This mechanism measures through its own routine; see its "
                             "views below.")]
    if n > MATRIX_CELLS:
        return [StrategyView("A", "Strategy", "", "text",
                             f"The domain has {n:,} cells; the full strategy matrix is drawn "
                             f"for at most {MATRIX_CELLS:,} cells. The per-attribute views "
                             "below show its structure.")]
    reason = too_big(A.shape) or too_big(plan.workload.shape)
    if reason:
        return [StrategyView("A", "Strategy", "", "text", f"Not drawn: {reason}.")]
    dense = np.asarray(A.dense(), dtype=float)
    shown = dense[np.any(dense != 0, axis=1)]  # all-zero rows measure nothing
    gram = dense.T @ dense
    views = [
        StrategyView("A", f"Strategy A ({shown.shape[0]} measurements x {n} cells)",
                     CAPTIONS["A"], "matrix", shown),
        StrategyView("gram", "What the measurements cover (AᵀA)", CAPTIONS["gram"], "matrix",
                     gram),
    ]
    recon = reconstruction_map(plan.workload, A)
    views.append(StrategyView("recon", f"How answers are rebuilt (W A⁺, {recon.shape[0]} queries)",
                              CAPTIONS["recon"], "matrix", recon))
    return views


def strategy_views(plan: Plan) -> list[StrategyView]:
    """Every view of a plan: facts, the matrices (small domains), the mechanism's details."""
    views = [StrategyView("plan", "The plan", "The numbers behind the picture.", "facts",
                          plan_facts(plan))]
    try:
        views.extend(matrix_views(plan))
    except Exception as exc:  # drawing must never take the page down
        views.append(StrategyView("A", "Strategy", "", "text",
                                  f"The matrices could not be drawn: {one_line(exc)}"))
    views.extend(detail_views(plan.details, plan.workload.domain))
    return views


def render_view(view: StrategyView, color: str) -> pn.viewable.Viewable:
    """One view as a Panel component (heat map, bars, table or text) with its caption."""
    # Charts carry their own title; tables and text get a bold line.
    title = pn.pane.Markdown(f"**{view.title}**", margin=(12, 10, 0, 10))
    if view.kind == "matrix":
        body: pn.viewable.Viewable = pn.pane.HoloViews(
            matrix_heatmap(view.data, view.title, xlabel="column", ylabel="row"),
            sizing_mode="stretch_width", css_classes=["strategy-heatmap"])
    elif view.kind == "weights":
        body = pn.pane.HoloViews(weights_bars(view.data, view.title, color=color),
                                 sizing_mode="stretch_width")
    elif view.kind == "facts":
        frame = pd.DataFrame({"": list(view.data), "value": [_fmt(v) for v in
                                                            view.data.values()]})
        body = pn.pane.DataFrame(frame, index=False, sizing_mode="stretch_width",
                                 css_classes=["strategy-facts"])
    elif view.kind == "table":
        frame = view.data if isinstance(view.data, pd.DataFrame) else pd.DataFrame(view.data)
        body = pn.Column(
            pn.widgets.Tabulator(frame, show_index=False, disabled=True, page_size=20,
                                 pagination="local", sizing_mode="stretch_width"),
            csv_download(lambda: frame, f"{view.key}.csv", "Download table (CSV)"))
    else:
        body = pn.pane.Markdown(str(view.data), margin=(0, 10))
    parts = [body] if view.kind in ("matrix", "weights") else [title, body]
    if view.caption and view.kind != "facts":
        parts.append(caption(view.caption))
    return pn.Column(*parts, sizing_mode="stretch_width")


def _fmt(value: Any) -> str:
    if _is_number(value):
        return f"{float(value):,.6g}"
    return str(value)


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
        choice = pn.widgets.Select.from_param(session.param.selected, label="Mechanism",
                                              css_classes=["strategy-mechanism"], width=240)
        intro = ("The measurements the chosen mechanism makes for your workload "
                 f"({self.link('/compare', 'compare')} ranks the mechanisms).")
        return pn.Column(self.header(intro), choice, PlanningProgress(session=session),
                         pn.bind(off_loop(self._views), session.param.selected,
                                 session.param.planned),
                         sizing_mode="stretch_width", css_classes=["strategy-page"])

    def _views(self, name: str | None, planned: int) -> pn.viewable.Viewable:
        # Bound through off_loop: dense matrices and a pseudo-inverse for small domains.
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
