"""How HDMM's plans are shown: the optimisers' results (OPT_0, OPT_kron, OPT_+, OPT_M and the
choice between them) mapped to typed views (:mod:`engine.mechanisms.views`).

The optimisers return their results only; these functions decide what a reader sees, in
plain words and units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from engine.linalg.matrix import Dense
from engine.mechanisms.hdmm.results import Factor, KronResult, MarginalsResult, UnionResult
from engine.mechanisms.views import (
    MAX_VIEW_ENTRIES,
    Fact,
    MatrixView,
    Scalar,
    SeriesView,
    TableView,
    View,
    WeightsView,
    fact_if,
    facts,
)
from engine.workloads.workload import Workload

#: Units of every unit-noise error below: squared counts per unit noise variance and unit
#: sensitivity (``||A||**2 tr[(A^T A)^+ W^T W]``).
UNIT_ERROR = "squared counts at unit noise"

FAMILIES = {
    "identity": "every cell measured once",
    "total": "the total only",
    "p-identity": "cells plus p weighted extra queries (p-Identity)",
    "id-total": "cells plus a weighted total",
    "hb-tree": "cells plus the blocks of HB's hierarchy (no optimised strategy did better)",
    "gaussian": "the best possible measurements for Gaussian noise",
}


def operator_facts(kind: str, operator: str, unit_error: float, *more: Fact | None
                   ) -> View:
    """The headline of an HDMM plan: which operator, and the error it reached."""
    return facts("hdmm", "HDMM result", "What the HDMM optimiser chose and the error it "
                 "reached (before scaling by the privacy level).", [
                     Fact("kind", "strategy kind", kind, detail=True),
                     Fact("operator", "HDMM operator", operator, detail=True),
                     Fact("unit_error", "expected total squared error at unit noise",
                          unit_error, UNIT_ERROR, detail=True), *more])


def factor_views(factor: Factor, where: str = "") -> list[View]:
    """The strategy OPT_0 chose for one Gram: its facts, and for small domains its matrix,
    the identity weights and extra queries of a p-Identity strategy, the restart losses.

    Args:
        factor: OPT_0's result.
        where: the attribute it is for ('' for the whole domain); keys get ``[where]``.
    """
    tag, part = (f"[{where}]", f" for {where}") if where else ("", "")
    info = factor.info
    A = factor.matrix
    pidentity = factor.kind in ("p-identity", "id-total", "hb-tree")
    rows = int(A.shape[0])
    out: list[View] = [facts(
        f"opt0{tag}", f"OPT_0 strategy{part}",
        "The strategy OPT_0 found: its family, size and error, and how the optimiser ended.", [
            Fact(f"family{tag}", "strategy family", factor.kind),
            Fact(f"family_meaning{tag}", "what it measures", FAMILIES.get(factor.kind,
                                                                           factor.kind)),
            Fact(f"cells{tag}", "data cells", factor.n, "cells"),
            Fact(f"rows{tag}", "measurements", rows, "rows"),
            Fact(f"loss{tag}", "error at unit noise", factor.loss, UNIT_ERROR, detail=True),
            fact_if(f"p{tag}", "extra queries (p)", A.p if pidentity else None, "rows"),
            fact_if(f"nonzero_rows{tag}", "extra queries in use",
                    int(np.count_nonzero(A.theta.max(axis=1) > 0)) if pidentity else None,
                    "rows"),
            fact_if(f"theta_total{tag}", "weight of the total", info.get("theta_total"),
                    detail=True),
            fact_if(f"gap{tag}", "certified duality gap (relative)", info.get("gap"),
                    detail=True),
            fact_if(f"lower_bound{tag}", "lower bound on the error (dual)",
                    info.get("lower_bound"), UNIT_ERROR, detail=True),
            fact_if(f"evaluations{tag}", "dual evaluations (eigendecompositions)",
                    info.get("evaluations"), detail=True),
            fact_if(f"rank{tag}", "rank of the workload Gram", info.get("rank"),
                    detail=True),
            fact_if(f"factorization{tag}", "strategy factorisation",
                    info.get("factorization"), detail=True)])]
    # The implicit matrix: a page draws it at screen resolution, whatever its size (folded
    # for the whole domain, where it is the plan's own strategy A).
    out.append(MatrixView(
        key=f"strategy{tag}", title=f"The measurements{part}", matrix=A,
        caption=("Each row is one noisy measurement, each column one cell; colour is the "
                 "weight the measurement gives the cell (its average size where a pixel "
                 "holds many)."), units="weight",
        row_label="measurement", column_label="cell", detail=not where))
    if pidentity:
        out.append(WeightsView(
            key=f"identity_weights{tag}", title=f"Weight of each cell's own count{part}",
            names=tuple(map(str, range(factor.n))), values=A.scale, units="weight",
            caption=("p-Identity measures every cell once, scaled down so that each column "
                     "has L1 norm 1; the rest of each column goes to the extra queries.")))
        theta = A.theta if A.theta.size <= MAX_VIEW_ENTRIES else Dense(A.theta)
        out.append(MatrixView(
            key=f"theta{tag}", title=f"Extra queries Θ{part}", matrix=theta,
            units="weight before column scaling", row_label="extra query",
            column_label="cell",
            caption=("The p extra queries of p-Identity: each row adds up cells with "
                     "these weights; an all-zero row is not measured."), detail=True))
    if "start_losses" in info:
        out.append(SeriesView(
            key=f"start_losses{tag}", title=f"OPT_0 restarts{part}", x_label="restart",
            values=np.asarray(info["start_losses"], dtype=float), units=UNIT_ERROR,
            caption=("The error each random start of the (non-convex) p-Identity "
                     "optimisation reached; the best one was polished further."), detail=True))
    if "candidates" in info:
        out.append(TableView.of(
            [{"candidate": k, "error at unit noise": v} for k, v in info["candidates"].items()],
            key=f"opt0_candidates{tag}", title=f"OPT_0 candidates{part}", units=UNIT_ERROR,
            detail=True,
            caption=("Every strategy family OPT_0 tried, with its error at unit noise "
                     "(inf: the strategy cannot answer the queries); the best one is used.")))
    return out


def factors_table(names: Sequence[str], factors: Sequence[Factor]) -> TableView:
    """One row per attribute of a Kronecker strategy: family, size, error."""
    return TableView.of(
        [{"attribute": name, "family": f.kind, "cells": f.n, "measurements": f.matrix.shape[0],
          "error at unit noise": f.loss} for name, f in zip(names, factors, strict=True)],
        key="factors", title="Per-attribute parts", units=UNIT_ERROR,
        caption=("The strategy is built attribute by attribute and combined as a Kronecker "
                 "product: one OPT_0 strategy per attribute."))


def kron_views(workload: Workload, result: KronResult) -> tuple[View, ...]:
    """OPT_kron: the headline, the loss per sweep, and every attribute's part."""
    names = workload.domain.names
    views: list[View] = [
        operator_facts("kron", "OPT_kron", result.loss,
                       Fact("sweeps", "sweeps over the attributes", len(result.history) - 1,
                            detail=True)),
        SeriesView(key="loss_history", title="Error after each sweep", x_label="sweep",
                   values=np.asarray(result.history, dtype=float), units=UNIT_ERROR,
                   detail=True,
                   caption=("Block-coordinate descent: the error of the Kronecker strategy "
                            "at the start and after each sweep over the attributes.")),
        factors_table(names, result.factors)]
    for name, f in zip(names, result.factors, strict=True):
        views.extend(factor_views(f, name))
    return tuple(views)


def union_views(workload: Workload, result: UnionResult, sensitivity_exact: bool
                ) -> tuple[View, ...]:
    """OPT_+: the headline, the budget split between groups and the groups themselves."""
    labels = [f"group {g + 1}" for g in range(len(result.groups))]
    return (
        operator_facts("union", "OPT_+", result.loss,
                       Fact("sensitivity_exact", "sensitivity computed exactly",
                            sensitivity_exact, detail=True),
                       Fact("reconstruction", "reconstruction", "local least squares per group",
                            detail=True)),
        WeightsView(key="union_weights", title="Budget per group", names=tuple(labels),
                    values=np.asarray(result.weights, dtype=float), units="weight",
                    caption=("How the budget is split between the parts of a union strategy "
                             "(one Kronecker strategy per group of queries).")),
        TableView.of(
            [{"group": label, "terms": "; ".join(workload.terms[j].label for j in members),
              "weight": float(result.weights[g]), "error": float(result.block_errors[g])}
             for g, (label, members) in enumerate(zip(labels, result.groups, strict=True))],
            key="union_groups", title="Groups of the union", units=UNIT_ERROR,
            caption=("Each group of query terms gets its own Kronecker strategy; error is "
                     "that strategy's error at unit noise on its own terms.")),
    )


def marginal_views(records: Sequence[Mapping[str, Scalar]], result: MarginalsResult
                   ) -> tuple[View, ...]:
    """OPT_M: the headline, the weight per marginal (``records``: one per measured marginal
    with label, attributes, weight, cells), and the closed form's verdict."""
    info = result.info
    views: list[View] = [
        operator_facts(
            "marginals", "OPT_M", result.loss,
            Fact("reconstruction", "reconstruction",
                 "marginal-only least squares (no data vector)", detail=True),
            Fact("closed_form_min", "smallest closed-form weight (relative)",
                 info["closed_form_min"], detail=True),
            Fact("closed_form_negatives", "negative closed-form weights",
                 info["closed_form_negatives"], detail=True),
            fact_if("closed_form_optimal", "closed form (Thm. 13) is optimal",
                    info.get("closed_form_optimal"), detail=True)),
        WeightsView.of({r["label"]: r["weight"] for r in records}, key="marginal_weights",
                       title="Weight per marginal", units="weight (unit L-norm overall)",
                       caption=("The share of the privacy budget each table (marginal) gets; "
                                "labels mark each attribute I (kept) or T (summed out). A "
                                "table with no bar is not measured and is worked out from "
                                "the others.")),
        TableView.of(records, key="marginal_table", title="Measured marginals",
                     caption="Every measured marginal: its attributes, weight and cells."),
    ]
    if "start_losses" in info:
        views.append(SeriesView(
            key="start_losses", title="OPT_M restarts", x_label="restart",
            values=np.asarray(info["start_losses"], dtype=float), units=UNIT_ERROR,
            detail=True,
            caption="The error each start of the (non-convex) Laplace problem reached."))
    return tuple(views)


def choice_views(chosen: str, operators: Mapping[str, str], errors: Mapping[str, float],
                 rmse: Mapping[str, float], skipped: Mapping[str, str]) -> tuple[View, ...]:
    """OPT_HDMM: which operator won, every candidate's error, and what was skipped why."""
    views: list[View] = [
        facts("hdmm_choice", "HDMM's choice", "OPT_HDMM runs several operators and keeps "
              "the strategy with the smallest error.",
              [Fact("chosen_operator", "chosen operator", chosen)]),
        TableView.of([{"operator": op, "name": operators[op], "unit error": errors[op],
                       "rmse": rmse[op]} for op in errors],
                     key="candidates", title="Operators compared", units=UNIT_ERROR,
                     detail=True,
                     caption=("Each operator's error at unit noise and its RMSE at the plan's "
                              "privacy level (inf: it cannot answer the queries).")),
    ]
    if skipped:
        views.append(TableView.of(
            [{"operator": op, "reason": why} for op, why in skipped.items()],
            key="skipped", title="Operators not run", detail=True,
            caption="Operators that could not serve this workload, or would repeat another."))
    return tuple(views)
