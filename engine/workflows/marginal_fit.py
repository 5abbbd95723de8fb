"""Consistent whole counts fitted in the space of the released marginals, not of the data: for
workloads of 1- and 2-way marginal tables, whatever the domain's size.

The unknowns are the 2-way tables themselves (plus the 1-way table of an attribute in no
pair): a few thousand numbers where the data vector has millions. One quadratic programme
(Clarabel, interior point) finds non-negative tables that agree on every attribute they share
and keep the total, closest to the raw answers in least squares, each cell weighted by the
inverse of its noise variance (a 1-way or 0-way table enters as the sums of a 2-way table
holding it). The fitted tables are then rounded so that they still agree: each attribute's
1-way table to the total by largest remainders, each 2-way table cell by cell up or down to
its two whole 1-way tables (:func:`engine.workflows.table_rounding.controlled_round_many`).

The tables agree and share one total; unlike one estimate of the data, two-way tables that
agree on their shared attributes need not be the marginals of any one data set (cycles of
pairs). Post-processing of the released answers: no privacy cost.

Raw tables that already agree (every one a margin of one estimate, as GReM-MLE's are) need no
programme: :func:`rake_marginals` sets their negative cells to 0, scales each attribute's
1-way table to the total and each 2-way table to its two 1-way tables by iterative
proportional fitting (raking), and rounds them as above -- a few passes over the tables'
cells. On AIM+GReM's Adult release its counts are closer to the truth than the programme's
or one count per cell fitted (``benchmarks/release_postprocess.py --adaptive-only --compare``;
tests/engine/workflows/test_raked_tables.py; issue 28).

Example:
    >>> from engine.domain import Domain
    >>> from engine.workloads.workload import Workload
    >>> w = Workload.marginals(Domain.from_sizes([2, 2]), upto=2)
    >>> raw = np.array([13.3, 10.0, 3.0, 5.0, 7.8, 6.0, -0.4, 4.2, 2.9])  # total, a1, a2, a1 x a2
    >>> fitted = fit_marginals(w, raw, np.ones(9), total=13)
    >>> fitted.tables[(0, 1)].tolist(), fitted.tables[(0,)].tolist()
    ([[6, 3], [1, 3]], [9, 4])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sp

from engine.workflows.table_rounding import controlled_round_many, round_within_groups
from engine.workflows.three_way_fit import (
    CUBE_WEIGHT,
    ThreeWayFit,
    fit_three_way,
    three_way_applies,
)
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: Two raw tables agree on an attribute when their sums over it differ by at most this
#: share of the total (round-off of one estimate's margins).
AGREEMENT = 1e-9
#: How the fitted tables become whole counts, in words (a release's method).
ROUNDING = ("then each attribute's 1-way table rounded to the total by largest remainders and "
            "each 2-way table rounded cell by cell up or down keeping its two 1-way tables "
            "(controlled rounding; where a table's zeros cannot carry those totals, the nearest "
            "whole table that keeps them), so tables agree and share one total")

@dataclass(frozen=True)
class MarginalFit:
    """Whole counts fitted in the marginals' space.

    Attributes:
        tables: attribute set (indices in domain order) -> int64 counts over it: every 2-way
            set of the workload and every attribute's 1-way table; they agree on every
            attribute they share.
        total: the one total every table sums to.
        unknowns: how many numbers were fitted.
        three_way: the 3-way fit's run, when the tables are the margins of 3-way tables.
        raked: the tables were raked (:func:`rake_marginals`), not fitted.
    """

    tables: dict[tuple[int, ...], np.ndarray]
    total: int
    unknowns: int
    three_way: ThreeWayFit | None = None
    raked: bool = False

    def over(self, attrs: tuple[int, ...]) -> np.ndarray:
        """The whole counts over ``attrs`` (in that order: a table is transposed to it; ``()``
        the total), an int64 array over their sizes.

        Raises:
            KeyError: no table over those attributes.
        """
        if not attrs:
            return np.array([self.total], dtype=np.int64)
        key = tuple(sorted(attrs))
        return np.transpose(self.tables[key], [key.index(a) for a in attrs])

    def describe(self, fitted: str, kept: str) -> str:
        """The route in words, for a release's method."""
        if self.raked:
            return (f"whole counts fitted to {fitted} by raking, not least squares: those "
                    f"tables already agree (every one a margin of one estimate), so their "
                    f"negative cells are set to 0, each attribute's 1-way table is scaled to "
                    f"the total, {kept} ({self.total:,}), and each 2-way table to its two "
                    f"1-way tables by iterative proportional fitting ({self.unknowns:,} cells, "
                    f"not one per cell of the domain); {ROUNDING}")
        if self.three_way is not None:
            run = self.three_way
            state = ("converged" if run.converged
                     else "stopped at its iteration limit: close to, not at, the optimum")
            also = (" and to the 3-way interactions of the least-squares estimate's own "
                    "3-way tables (the part of them no 2-way table holds; from them the fit "
                    "starts)" if run.with_estimate else "")
            return (f"1- and 2-way tables fitted as the margins of non-negative 3-way tables "
                    f"over every three attributes ({run.unknowns:,} unknowns, not one per "
                    f"cell of the domain) that agree on every 2-way table they share and "
                    f"{kept} ({self.total:,}), to {fitted}{also} by variance-weighted least "
                    f"squares (each answer weighted by its own variance; ADMM, "
                    f"{run.iterations} iterations, {state}); {ROUNDING}")
        metric = ("by variance-weighted least squares (each answer weighted by its own "
                  "variance, their correlations ignored; a quadratic programme solved to its "
                  "optimum)")
        return (f"non-negative 1- and 2-way tables ({self.unknowns:,} unknowns, "
                f"not one per cell of the domain) fitted to {fitted} {metric}, agreeing on "
                f"every attribute they share and {kept} ({self.total:,}); {ROUNDING} "
                "(two-way tables that agree need not be the marginals of one data set)")


def fits_marginals(workload: Workload) -> bool:
    """Every table is a plain marginal (identity blocks) of at most two attributes, and at
    least one is over an attribute."""
    return (all(_plain(t) and len(t.attrs) <= 2 for t in workload.terms)
            and any(t.attrs for t in workload.terms))


def fit_marginals(workload: Workload, raw: np.ndarray, variances: np.ndarray, *,
                  total: int | None, three_way: bool = False,
                  cubes: tuple[np.ndarray, np.ndarray] | None = None) -> MarginalFit:
    """Fit and round (module docstring).

    The unknowns are every 2-way table of the workload, every attribute's 1-way table and the
    total, each table weighted only by its own answers' variances (a diagonal objective); the
    agreement is linear equalities (a 2-way table's sums are its 1-way tables, a 1-way
    table's sum the total): a sparse programme whatever the tables' sizes.

    Args:
        workload: 1- and 2-way marginal tables (:func:`fits_marginals`).
        raw: the raw (weighted) answers of every query, counts.
        variances: the noise variance of every (weighted) answer, squared counts.
        total: the public number of records, or None (fitted, then rounded).
        three_way: fit the tables as the margins of agreeing non-negative 3-way tables
            (:mod:`engine.workflows.three_way_fit`; a tighter fit) where
            :func:`~engine.workflows.three_way_fit.three_way_applies`; the 2-way fit
            otherwise.
        cubes: for ``three_way``, the least-squares estimate's 3-way tables over every three
            attributes and the inverse of their mean noise variance
            (:func:`engine.workflows.three_way_fit.kronecker_cubes`), fitted too.

    Raises:
        ValueError: a variance that is not positive and finite.
    """
    shape = workload.domain.shape
    pairs = list(dict.fromkeys(tuple(sorted(t.attrs)) for t in workload.terms
                               if len(t.attrs) == 2))
    attributes = sorted({a for t in workload.terms for a in t.attrs})
    cube = None
    if three_way and three_way_applies(shape, attributes):
        cube = fit_three_way(shape, weighted_tables(workload, raw, variances), total=total,
                             cubes=None if cubes is None else cubes[0],
                             cube_weight=0.0 if cubes is None else CUBE_WEIGHT * cubes[1])
        fitted = {t: np.clip(v, 0.0, None) for t, v in cube.tables.items()}
        unknowns = cube.unknowns
    else:
        fitted, unknowns = _fit_variance_weighted(workload, raw, variances, total, pairs,
                                                  attributes)
    whole = int(total) if total is not None else max(int(round(float(fitted[()][0]))), 0)
    tables: dict[tuple[int, ...], np.ndarray] = {}
    for a in attributes:
        tables[(a,)] = round_within_groups(fitted[(a,)][None, :], np.array([whole]))[0]
    rounded = controlled_round_many(
        [fitted[pair].reshape([shape[a] for a in pair]) for pair in pairs],
        [tables[(pair[0],)] for pair in pairs], [tables[(pair[1],)] for pair in pairs])
    tables.update(zip(pairs, rounded, strict=True))
    return MarginalFit(tables, whole, unknowns, cube)


def _fit_variance_weighted(workload: Workload, raw: np.ndarray, variances: np.ndarray,
                           total: int | None, pairs: list[tuple[int, int]],
                           attributes: list[int]
                           ) -> tuple[dict[tuple[int, ...], np.ndarray], int]:
    """The variance-weighted programme (:func:`fit_marginals`): float tables for every pair,
    every attribute and the total ``()``, and the number of unknowns."""
    shape = workload.domain.shape
    blocks: list[tuple[int, ...]] = [*pairs, *((a,) for a in attributes), ()]
    sizes = [math.prod(shape[a] for a in b) for b in blocks]
    offsets = dict(zip(blocks, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int),
                       strict=True))
    n = int(sum(sizes))
    # objective: sum over tables of (mu_table - raw)^2 / variance
    weights, targets = np.zeros(n), np.zeros(n)
    for key, (answers, w) in weighted_tables(workload, raw, variances).items():
        targets[offsets[key]:offsets[key] + answers.size] = answers
        weights[offsets[key]:offsets[key] + answers.size] = w
    # agreement: a pair's sums over each attribute are that attribute's 1-way table, and every
    # 1-way table sums to the total
    rows, columns, values = [], [], []
    height = 0

    def sums(source: tuple[int, ...], onto: tuple[int, ...]) -> None:
        nonlocal height
        dims = [shape[a] for a in source]
        cells = np.arange(math.prod(dims))
        coords = np.unravel_index(cells, dims)
        target = (np.ravel_multi_index([coords[source.index(a)] for a in onto],
                                       [shape[a] for a in onto]) if onto
                  else np.zeros(cells.size, dtype=int))
        size = math.prod(shape[a] for a in onto)
        rows.extend([height + target, height + np.arange(size)])
        columns.extend([offsets[source] + cells, offsets[onto] + np.arange(size)])
        values.extend([np.ones(cells.size), -np.ones(size)])
        height += size

    for pair in pairs:
        sums(pair, (pair[0],))
        sums(pair, (pair[1],))
    for a in attributes:
        sums((a,), ())
    rhs = np.zeros(height)
    if total is not None:
        rows.append(np.array([height]))
        columns.append(np.array([offsets[()]]))
        values.append(np.ones(1))
        height += 1
        rhs = np.append(rhs, float(total))
    equal = sp.csc_array((np.concatenate(values), (np.concatenate(rows),
                                                   np.concatenate(columns))), shape=(height, n))
    # unmeasured cells (weight 0) get a tiny weight towards zero: the programme stays strictly
    # convex and they follow the tables that are measured
    floor = 1e-9 * max(float(weights.max()), 1.0)
    mu = _solve(np.maximum(weights, floor), -(weights * targets), equal, rhs)
    return {b: mu[offsets[b]:offsets[b] + size] for b, size in zip(blocks, sizes, strict=True)
            }, n


def tables_agree(tables: dict[tuple[int, ...], np.ndarray]) -> bool:
    """Whether raw tables (attribute set -> array over those attributes, in that order) agree:
    every 2-way table's sums over each attribute equal every other table's sums over it, and
    every table has one total, within :data:`AGREEMENT` of the total."""
    totals = [float(np.sum(t)) for t in tables.values()]
    if not totals:
        return True
    slack = AGREEMENT * max(max(abs(t) for t in totals), 1.0)
    sums = _one_way_sums(tables)
    return (max(totals) - min(totals) <= slack
            and all(float(np.ptp(np.stack(s), axis=0).max()) <= slack for s in sums.values()))


def rake_marginals(tables: dict[tuple[int, ...], np.ndarray]) -> MarginalFit:
    """Whole counts from raw 0-, 1- and 2-way tables that agree (:func:`tables_agree`):
    module docstring.

    Args:
        tables: attribute set (a term's attributes, in its order) -> raw counts over them
            (fractional, possibly negative), e.g. AIM+GReM's GReM-MLE marginals.

    Returns:
        Every 2-way set (sorted) and every attribute's 1-way table as whole non-negative
        counts that agree, all summing to the raw total rounded (at least 0).

    Raises:
        ValueError: a table over more than two attributes.
    """
    if any(len(attrs) > 2 for attrs in tables):
        raise ValueError("tables: raking takes 0-, 1- and 2-way tables only")
    total = max(int(round(float(np.mean([np.sum(t) for t in tables.values()])))), 0)
    whole: dict[tuple[int, ...], np.ndarray] = {}
    for a, sums in sorted(_one_way_sums(tables).items()):
        whole[(a,)] = round_within_groups(np.mean(sums, axis=0)[None, :], np.array([total]))[0]
    pairs: dict[tuple[int, ...], np.ndarray] = {}
    for attrs, table in tables.items():
        if len(attrs) == 2:
            key = tuple(sorted(attrs))
            pairs.setdefault(key, np.transpose(np.asarray(table, dtype=float),
                                               [attrs.index(a) for a in key]))
    rounded = controlled_round_many([np.clip(t, 0.0, None) for t in pairs.values()],
                                    [whole[(p[0],)] for p in pairs],
                                    [whole[(p[1],)] for p in pairs])
    whole.update(zip(pairs, rounded, strict=True))
    cells = sum(int(t.size) for t in whole.values())
    return MarginalFit(whole, total, cells, raked=True)


def _one_way_sums(tables: dict[tuple[int, ...], np.ndarray]) -> dict[int, list[np.ndarray]]:
    """Per attribute, its 1-way table from every table over it (its own, or a 2-way table's
    sums over the other attribute)."""
    sums: dict[int, list[np.ndarray]] = {}
    for attrs, table in tables.items():
        values = np.asarray(table, dtype=float)
        for i, a in enumerate(attrs):
            other = tuple(j for j in range(len(attrs)) if j != i)
            sums.setdefault(a, []).append(values.sum(axis=other).reshape(-1))
    return sums


def weighted_tables(workload: Workload, raw: np.ndarray, variances: np.ndarray
                    ) -> dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]:
    """The raw answers as tables over sorted attribute sets, each cell with its weight (the
    inverse of its noise variance; tables of one set merged by those weights): flattened in
    C order, counts and 1 / squared counts.

    Raises:
        ValueError: a variance that is not positive and finite.
    """
    shape = workload.domain.shape
    tables: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    start = 0
    for term in workload.terms:
        stop = start + term.num_queries
        weight = term.weight if term.weight else 1.0
        attrs = tuple(term.attrs)
        key = tuple(sorted(attrs))
        answers = raw[start:stop] / weight
        w = weight**2 / np.asarray(variances[start:stop], dtype=float)
        if not np.all(np.isfinite(w) & (w > 0)):
            raise ValueError("variances: every answer needs a positive finite noise variance")
        if attrs != key:
            dims = [shape[a] for a in attrs]
            answers = answers.reshape(dims).T.reshape(-1)
            w = w.reshape(dims).T.reshape(-1)
        if key in tables:
            before, held = tables[key]
            answers = (held * before + w * answers) / (held + w)
            w = held + w
        tables[key] = (answers, w)
        start = stop
    return tables


def _plain(term: Term) -> bool:
    return term.is_product and all(f.is_identity() for f in term.factors or ())


def _solve(weights: np.ndarray, q: np.ndarray, equal: sp.csc_array, rhs: np.ndarray
           ) -> np.ndarray:
    """argmin 1/2 sum(weights x**2) + q'x subject to equal x = rhs and x >= 0 (Clarabel)."""
    n = weights.size
    A = sp.vstack([equal, -sp.eye_array(n, format="csc")]).tocsc()
    b = np.concatenate([rhs, np.zeros(n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    cones = [clarabel.ZeroConeT(int(equal.shape[0])), clarabel.NonnegativeConeT(n)]
    solution = clarabel.DefaultSolver(sp.csc_matrix(sp.diags_array(weights)), q,
                                      sp.csc_matrix(A), b, cones, settings).solve()
    return np.clip(np.asarray(solution.x, dtype=float), 0.0, None)
