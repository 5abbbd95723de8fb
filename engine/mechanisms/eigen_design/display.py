"""How an Eigen-Design plan is shown: the design's results mapped to typed views
(:mod:`engine.mechanisms.views`), in plain words and units."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.linalg.matrix import DENSE_GUARD
from engine.mechanisms.eigen_design.design import EigenQueries, WeightedDesign
from engine.mechanisms.views import (
    Fact,
    MatrixView,
    SeriesView,
    TableView,
    View,
    facts,
)

#: Largest n whose strategy matrix is shown.
DISPLAY_CELLS = 64
#: Facts shown in plain view; the others describe the computation (folded under "Details").
PLAIN_FACTS = frozenset({"kind", "strategy_rows", "unit_error"})
#: Units of unit-noise errors: squared counts per unit noise variance and unit sensitivity.
UNIT_ERROR = "squared counts at unit noise"

#: Words and units of every scalar a design reports (key -> (label, units)).
FACT_WORDS: dict[str, tuple[str, str]] = {
    "kind": ("strategy kind", ""),
    "structure": ("computation route (dense, partial, closed-form or kronecker)", ""),
    "norm": ("sensitivity norm the weights are optimised for", "L-norm"),
    "noise_handling": ("noise handling", ""),
    "design_set": ("design set", ""),
    "reduction": ("reduction", ""),
    "calibration": ("Gaussian calibration", ""),
    "group_size": ("eigen-separation group size", "eigen-queries"),
    "fraction": ("fraction of principal vectors asked for", ""),
    "principal": ("principal vectors kept", "eigen-queries"),
    "eigenqueries_computed": ("eigen-queries computed by the partial eigensolver",
                              "eigen-queries"),
    "subspace_seconds": ("time for the dominant subspace", "s"),
    "basis_seconds": ("time for the closed-form basis and its squares", "s"),
    "basis": ("basis", ""),
    "exact_eigenbasis": ("the basis is the exact eigenbasis", ""),
    "completed_cells": ("cells added by the completion", "cells"),
    "strategy_rows": ("measurements", "rows"),
    "value_before_completion": ("Program 1 objective before completion", UNIT_ERROR),
    "unit_error": ("expected total squared error at unit noise", UNIT_ERROR),
    "rank": ("rank of the workload Gram", "eigen-queries"),
    "approximation_ratio": ("Theorem 3 approximation factor (root scale)", ""),
    "svd_bound": ("SVD lower bound on the error", UNIT_ERROR),
    "bound_ratio": ("RMSE over the SVD-bound RMSE", ""),
}


def eigen_views(settings: Mapping[str, Any], design: WeightedDesign, eig: EigenQueries | None,
                bound: float | None, names: Sequence[str], shape: Sequence[int],
                timings: Mapping[str, float], candidates: Mapping[str, float]
                ) -> tuple[View, ...]:
    """Every view of an Eigen-Design plan.

    Args:
        settings: the route and knobs (kind, structure, norm, ...), overridden by the
            design's own record where both name a value.
        design: the weighted design that was chosen.
        eig: the eigen-queries (dense route only).
        bound: the SVD lower bound, when known.
        names, shape: the domain's attribute names and sizes.
        timings: seconds per stage.
        candidates: error at unit noise per design set tried (shown when more than one).
    """
    A = design.strategy
    scalars: dict[str, Any] = dict(settings)
    scalars.update({k: v for k, v in design.info.items() if k != "attribute_bases"})
    scalars.update(completed_cells=int(A.cells.size), strategy_rows=int(A.shape[0]),
                   value_before_completion=design.value, unit_error=design.unit_error())
    if eig is not None:
        scalars.update(rank=eig.rank, approximation_ratio=eig.approximation_ratio())
    if bound is not None:
        scalars.update(svd_bound=bound, bound_ratio=math.sqrt(
            design.sensitivity[2] ** 2 * design.trace / bound))
    views: list[View] = [facts(
        "eigen", "Eigen-Design result", "How the design was computed and the error reached "
        "(before scaling by the privacy level).",
        [Fact(k, *_words(k, v), detail=k not in PLAIN_FACTS) for k, v in scalars.items()])]
    views.append(TableView.of(
        [{"stage": k, "seconds": v} for k, v in timings.items()], key="timings",
        title="Time per stage", units="s", caption="Wall-clock time of each planning stage.",
        detail=True))
    views.extend(_series(design, eig))
    if design.program1:
        views.append(TableView.of(
            list(design.program1), key="program1", title="Program 1 solves", units=UNIT_ERROR,
            detail=True,
            caption=("Each solve of Program 1 (the weight optimisation): its value, certified "
                     "lower bound, relative duality gap, iterations, method and time.")))
    if len(candidates) > 1:
        views.append(TableView.of(
            [{"design set": k, "error at unit noise": v} for k, v in candidates.items()],
            key="candidates", title="Design sets compared", units=UNIT_ERROR, detail=True,
            caption="The error of every design set tried; the smallest one is used."))
    bases = design.info.get("attribute_bases")
    if bases is not None and max(shape) <= DISPLAY_CELLS:
        views.extend(MatrixView(
            key=f"basis[{name}]", title=f"Basis for {name}", matrix=b, units="weight",
            row_label="basis query", column_label=f"{name} value",
            caption=(f"The per-attribute basis for {name}; the strategy weighs the Kronecker "
                     "products of these queries.")) for name, b in zip(names, bases,
                                                                       strict=True))
    if A.n <= DISPLAY_CELLS and A.shape[0] * A.n <= DENSE_GUARD:
        views.append(MatrixView(
            key="strategy_matrix", title="Eigen-Design strategy", matrix=A.dense(),
            units="weight", row_label="measurement", column_label="cell",
            caption=("The weighted design queries and the completion rows: each row is one "
                     "noisy measurement, each column one cell.")))
        if isinstance(A.queries, np.ndarray):
            views.append(MatrixView(
                key="design_queries", title="Design queries", matrix=A.queries,
                units="weight", row_label="design query", column_label="cell",
                caption="The unweighted design queries (eigen-queries or a fixed basis)."))
    return tuple(views)


def _words(key: str, value: Any) -> tuple[str, Any, str]:
    label, units = FACT_WORDS.get(key, (key.replace("_", " "), ""))
    return label, value, units


def _series(design: WeightedDesign, eig: EigenQueries | None) -> list[View]:
    """The per-design-query and per-cell arrays, as ordered series."""
    A = design.strategy
    out: list[View] = [
        SeriesView(key="costs", title="Cost of each design query", values=design.costs,
                   x_label="design query", units="squared counts",
                   caption="Program 1's cost c of each design query (its share of the "
                           "workload's Gram)."),
        SeriesView(key="weights", title="Weight of each design query", values=design.weights,
                   x_label="design query",
                   units="u (Gram weight)" if design.norm == 2 else "lambda (row weight)",
                   caption="Program 1's optimal weights: how strongly each design query is "
                           "measured."),
        SeriesView(key="row_weights", title="Weight of each strategy row", values=A.weights,
                   x_label="design query", units="weight",
                   caption="The scale of each design query in the strategy matrix."),
        SeriesView(key="completion", title="Completion per cell", values=A.completion,
                   x_label="cell", units="weight",
                   caption="Single-cell queries added so every column reaches the "
                           "sensitivity (0: the cell needs none)."),
    ]
    if eig is not None:
        out.append(SeriesView(
            key="eigenvalues", title="Eigenvalues of the workload Gram", values=eig.values,
            x_label="eigen-query (largest first)", units="squared counts",
            caption="How much of the workload lies along each eigen-query."))
    return out
