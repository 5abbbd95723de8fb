"""Consistent whole counts fitted in the space of the released marginals, not of the data: for
workloads of 1- and 2-way marginal tables, whatever the domain's size.

The unknowns are the 2-way tables themselves (plus the 1-way table of an attribute in no
pair): a few thousand numbers where the data vector has millions. One quadratic programme
(Clarabel, interior point) finds non-negative tables that agree on every attribute they share
and keep the total, closest to the raw answers in least squares, each cell weighted by the
inverse of its noise variance (a 1-way or 0-way table enters as the sums of a 2-way table
holding it). The fitted tables are then rounded so that they still agree: each attribute's
1-way table to the total by largest remainders, each 2-way table cell by cell up or down to
its two whole 1-way tables (:func:`engine.workflows.table_rounding.controlled_round`).

The tables agree and share one total; unlike one estimate of the data, two-way tables that
agree on their shared attributes need not be the marginals of any one data set (cycles of
pairs). Post-processing of the released answers: no privacy cost.

Example:
    >>> from engine.domain import Domain
    >>> from engine.workloads.workload import Workload
    >>> w = Workload.marginals(Domain.from_sizes([2, 2]), upto=2)
    >>> raw = np.array([13.3, 10.0, 3.0, 5.0, 7.8, 6.0, -0.4, 4.2, 2.9])  # total, a1, a2, a1 x a2
    >>> fitted = fit_marginals(w, raw, np.ones(9), total=13)
    >>> fitted.tables[(0, 1)].tolist(), fitted.tables[(0,)].tolist()
    ([[7, 2], [0, 4]], [9, 4])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sp

from engine.workflows.table_rounding import controlled_round, round_within_groups
from engine.workloads.term import Term
from engine.workloads.workload import Workload


@dataclass(frozen=True)
class MarginalFit:
    """Whole counts fitted in the marginals' space.

    Attributes:
        tables: attribute set (indices in domain order) -> int64 counts over it: every 2-way
            set of the workload and every attribute's 1-way table; they agree on every
            attribute they share.
        total: the one total every table sums to.
        unknowns: how many numbers were fitted.
    """

    tables: dict[tuple[int, ...], np.ndarray]
    total: int
    unknowns: int

    def describe(self, fitted: str, kept: str) -> str:
        """The route in words, for a release's method."""
        return (f"non-negative 1- and 2-way tables ({self.unknowns:,} unknowns, "
                "not one per cell of the domain) fitted to "
                f"{fitted} by variance-weighted least squares (a quadratic programme solved "
                f"to its optimum), agreeing on every attribute they share and {kept} "
                f"({self.total:,}); then each attribute's 1-way table rounded to the total by "
                "largest remainders and each 2-way table rounded cell by cell up or down "
                "keeping its two 1-way tables (controlled rounding), so tables agree and "
                "share one total (two-way tables that agree need not be the marginals of one "
                "data set)")


def fits_marginals(workload: Workload) -> bool:
    """Every table is a plain marginal (identity blocks) of at most two attributes, and at
    least one is over an attribute."""
    return (all(_plain(t) and len(t.attrs) <= 2 for t in workload.terms)
            and any(t.attrs for t in workload.terms))


def fit_marginals(workload: Workload, raw: np.ndarray, variances: np.ndarray, *,
                  total: int | None) -> MarginalFit:
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

    Raises:
        ValueError: a variance that is not positive and finite.
    """
    shape = workload.domain.shape
    terms = workload.terms
    pairs = list(dict.fromkeys(tuple(sorted(t.attrs)) for t in terms if len(t.attrs) == 2))
    attributes = sorted({a for t in terms for a in t.attrs})
    blocks: list[tuple[int, ...]] = [*pairs, *((a,) for a in attributes), ()]
    sizes = [math.prod(shape[a] for a in b) for b in blocks]
    offsets = dict(zip(blocks, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int),
                       strict=True))
    n = int(sum(sizes))
    # objective: sum over tables of (mu_table - raw)^2 / variance (tables of one set add up)
    weights, targets = np.zeros(n), np.zeros(n)
    start = 0
    for term in terms:
        stop = start + term.num_queries
        weight = term.weight if term.weight else 1.0
        attrs = tuple(term.attrs)
        answers = raw[start:stop] / weight
        if attrs != tuple(sorted(attrs)):
            answers = answers.reshape([shape[a] for a in attrs]).T.reshape(-1)
        w = weight**2 / np.asarray(variances[start:stop], dtype=float)
        if not np.all(np.isfinite(w) & (w > 0)):
            raise ValueError("variances: every answer needs a positive finite noise variance")
        cells = slice(offsets[tuple(sorted(attrs))], offsets[tuple(sorted(attrs))] + stop - start)
        targets[cells] = (weights[cells] * targets[cells] + w * answers) / (weights[cells] + w)
        weights[cells] += w
        start = stop
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
    whole = int(total) if total is not None else max(int(round(float(mu[offsets[()]]))), 0)
    tables: dict[tuple[int, ...], np.ndarray] = {}
    for a in attributes:
        values_a = mu[offsets[(a,)]:offsets[(a,)] + shape[a]]
        tables[(a,)] = round_within_groups(values_a[None, :], np.array([whole]))[0]
    for pair in pairs:
        table = mu[offsets[pair]:offsets[pair] + sizes[blocks.index(pair)]]
        tables[pair] = controlled_round(table.reshape([shape[a] for a in pair]),
                                        tables[(pair[0],)], tables[(pair[1],)])
    return MarginalFit(tables, whole, n)


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
