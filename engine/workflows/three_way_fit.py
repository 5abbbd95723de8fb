"""Agreeing 1- and 2-way tables fitted as the margins of non-negative 3-way tables, by ADMM.

A tighter relaxation than 2-way tables that merely agree: every 3-way table over the
attributes (all ``C(k, 3)`` sets of three) is an unknown, every cell >= 0, every two 3-way
tables agree on the 2-way (hence 1-way) tables they share, and they keep the public total;
the 2-way tables published are their margins. The objective is the variance-weighted least
squares of the measured 1- and 2-way (and 0-way) tables, as in
:mod:`engine.workflows.marginal_fit`, plus (for a Kronecker strategy,
:func:`kronecker_cubes`) that of the 3-way interactions of the least-squares estimate's own
3-way tables -- the part of each that no 2-way table holds -- weighted by ``CUBE_WEIGHT``
over the mean noise variance of its cells: the measured 2-way tables alone leave the 3-way
interactions free, and fitted to them only, the 3-way fit is no more accurate than the 2-way
one; the estimate's 2-way parts are the measured tables again (its 2-way margins), so only
its interactions are fitted (benchmarks/README.md, issue 28).

Solved by ADMM in consensus form, never a dense factorisation: unknowns ``x`` (the 3-way
tables, agreeing by construction), a non-negative copy ``z`` and the measured tables ``y``
(``x = z``, ``margins(x) = y``). The ``x``-step is closed form: tables that agree are the sums
of orthogonal interaction components (a 3-way table is its 2-way, 1-way and total parts
plus a 3-way interaction that is its own), so the nearest agreeing family to the copies
averages each shared component over the tables that hold it, weighted by their sizes, and
each table's own interaction is a weighted average with the estimate's; the ``z``-step
clips at 0, the ``y``-step is a per-cell weighted average with the measured tables. It
starts from the estimate's 3-way tables. The copy and the scaled dual live in one vector
``v`` (the copy its positive part, the dual its negative part), so one iteration is two
sparse products with the 3-way cells (their 2-way sums and the broadcast back) and six
passes over them.

Post-processing of released answers: no privacy cost.

Example:
    >>> shape = (2, 2, 2)
    >>> data = np.arange(8.0).reshape(shape)
    >>> tables = {p: data.sum(axis=3 - sum(p)) for p in [(0, 1), (0, 2), (1, 2)]}
    >>> fit = fit_three_way(shape, {p: (t.reshape(-1), np.ones(4)) for p, t in
    ...                             tables.items()}, total=28)
    >>> np.round(fit.tables[(0, 1)], 6).tolist()
    [1.0, 5.0, 9.0, 13.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from engine.linalg.matrix import Kron, Matrix

#: Most ADMM iterations (the work limit): chosen from the accuracy-time curve of the
#: benchmark (benchmarks/README.md, issue 28): started from the estimate's 3-way tables, an
#: HDMM plan's published counts are as accurate after 4 to 10 iterations on both of its cases;
#: the identity plan's on the 1e6-cell case need 10 to beat the cell fit on every draw.
ITERATIONS = 10
#: Stop earlier when the primal and dual residuals are this small relative to the tables'
#: scale (checked every ``CHECK_EVERY`` iterations).
TOLERANCE = 1e-7
CHECK_EVERY = 10
#: Over-relaxation of the ADMM steps (below 2: the residual check divides by
#: 1 - RELAXATION / 2).
RELAXATION = 1.6
#: The penalty relative to the measured cells' mean weight.
PENALTY = 1.0
#: The weight of the least-squares estimate's 3-way cells relative to the inverse of their
#: noise variance (the benchmark's 1e6-cell case is most accurate near 2, Adult near 0.5).
CUBE_WEIGHT = 1.0
#: The 3-way cells above which the fit is not attempted (memory: about 12 copies of them).
MAX_CELLS = 5_000_000
#: The largest attribute size of a Kronecker factor whose pseudo-inverse is formed.
MAX_FACTOR = 2_048
#: The least reciprocal condition number of a factor's Gram ``A' A`` whose pseudo-inverse
#: is taken through its Cholesky factor (:func:`pseudo_inverse`); below it, the SVD.
GRAM_RCOND = 1e-6
#: The most cells after a summed axis for which :func:`_contract` sums it in one product
#: (its work grows with them; the stacked product's per-row cost is fixed).
FEW_INNER = 4


class Pull(NamedTuple):
    """How the agreement step moves each 3-way table's own interaction towards a
    target's: the weight of ``w``'s 2-way sums (per ``(c, p)`` entry) and of its 1-way
    sums and totals (per row of ``Q``) in the 2-way part taken off, each the share kept
    times the sum's own weight (``1 / the cells it sums``); the target's part and the kept
    share of ``w`` per 3-way cell are added by the caller (:meth:`_System.agree`)."""

    pair: np.ndarray
    sums: np.ndarray


@dataclass(frozen=True)
class ThreeWayFit:
    """Float tables that agree: every 2-way set and every attribute of the fit, and the total
    ``()``, each flattened in C order over its sorted attributes; ``iterations`` run;
    ``converged`` when the residuals met :data:`TOLERANCE`; ``unknowns`` the 3-way cells;
    ``with_estimate`` when the least-squares estimate's 3-way tables were fitted too."""

    tables: dict[tuple[int, ...], np.ndarray]
    iterations: int
    converged: bool
    unknowns: int
    with_estimate: bool


def three_way_cells(shape: tuple[int, ...], attributes: list[int]) -> int:
    """How many cells the 3-way tables over ``attributes`` hold (the fit's unknowns)."""
    return sum(math.prod(shape[a] for a in c) for c in combinations(sorted(attributes), 3))


def three_way_applies(shape: tuple[int, ...], attributes: list[int]) -> bool:
    """Whether the 3-way fit runs on tables over ``attributes``: at least three of them, and
    their 3-way tables within :data:`MAX_CELLS` cells."""
    return len(attributes) >= 3 and three_way_cells(shape, attributes) <= MAX_CELLS


def fit_three_way(shape: tuple[int, ...],
                  measured: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]], *,
                  total: int | None, iterations: int = ITERATIONS,
                  tolerance: float = TOLERANCE, cubes: np.ndarray | None = None,
                  cube_weight: np.ndarray | float = 0.0) -> ThreeWayFit:
    """Fit (module docstring).

    Args:
        shape: the domain's attribute sizes.
        measured: sorted attribute set (0, 1 or 2 attributes) -> (targets, weights): the
            raw table flattened in C order (counts) and each cell's weight (inverse noise
            variance, > 0). At least three attributes must appear.
        total: the public total, or None (then fitted).
        iterations: most ADMM iterations.
        tolerance: relative residual at which to stop.
        cubes: the 3-way tables of the least-squares estimate (:func:`kronecker_cubes`),
            whose 3-way interactions are fitted too (and the fit starts from them); None:
            only the measured tables.
        cube_weight: their cells' weight (1 / squared counts), one for all or one per cell;
            each table's interaction is weighted by the mean over its cells. With them, the
            measured tables are taken as margins of that one estimate and every 1-way table
            is weighted by :func:`margin_factors` times its own weights.

    Returns:
        The fitted tables over every pair and every attribute of ``measured``'s attributes.
    """
    if cubes is not None:
        factors = margin_factors(shape, measured)
        measured = {q: (t, w * factors[q[0]]) if len(q) == 1 else (t, w)
                    for q, (t, w) in measured.items()}
    attrs = sorted({a for key in measured for a in key})
    if len(attrs) < 3:
        raise ValueError("measured: the 3-way fit needs tables over at least three attributes")
    system = fit_index(tuple(shape), tuple(attrs),
                       tuple(sorted(measured, key=lambda q: (-len(q), q))))
    targets = np.concatenate([measured[q][0] for q in system.measured]).astype(float)
    weights = np.concatenate([measured[q][1] for q in system.measured]).astype(float)
    scale = max(float(total or 0), float(np.abs(targets).max(initial=0.0)), 1.0)
    rho = PENALTY * float(weights.mean())
    # start: the estimate's own 3-way tables (already near the optimum: the measured tables
    # are their margins for a Kronecker strategy) with the public total, else the additive
    # 3-way tables of the raw tables' consistent fit; clipped
    pull, target = None, None
    w = np.empty(system.PT.shape[0])  # a buffer over the 3-way cells
    if cubes is None:
        start = np.repeat(system.triple_totals(total if total is not None else
                                               _total_guess(measured)), system.triple_sizes)
        x, m = system.consistent(start, targets, 1e6, total)
        # x = PT alpha + |v|: the step's relaxed sum takes RELAXATION / 2 of |v| (below)
        spread_abs: np.ndarray | float = RELAXATION / 2
    else:
        cubes = np.asarray(cubes, dtype=float)
        sums = system.sums(cubes)
        x, m = system.consistent(cubes, targets, 1.0, total, sums=sums)
        # each table's interaction moves to the estimate's by its weight's share
        cells = np.broadcast_to(np.asarray(cube_weight, dtype=float), cubes.shape)
        omega = np.add.reduceat(cells, system.triple_starts) / system.triple_sizes
        share = omega / (omega + rho)
        keep = 1.0 - share
        pull = Pull(np.repeat(keep, system.cp_sizes) * system.cp_inv,
                    np.concatenate([np.repeat(keep, system.ca_sizes), keep]) * system.q_weight)
        # x = PT alpha + keep |v| + target, the target the estimate's interaction times the
        # share taken; both enter the relaxed sum times RELAXATION (below)
        spread_abs = np.repeat(RELAXATION * keep - RELAXATION / 2, system.triple_sizes)
        target = system.pair_part(cubes, sums)
        np.subtract(cubes, target, out=target)
        # RELAXATION * share per cell is RELAXATION / 2 - spread_abs (in w's buffer)
        target *= np.subtract(RELAXATION / 2, spread_abs, out=w)
    # The ADMM state in one vector v = u + the relaxed x-step: the copy is z = max(v, 0) and
    # the scaled dual u = v - z = min(v, 0), so the next x-step's input z - u is |v| (exactly)
    # and the next v = RELAXATION x + (1 - RELAXATION) z + u
    #              = RELAXATION x + (1 - RELAXATION / 2) v - (RELAXATION / 2) |v|;
    # x is affine in |v|, so v's update is one broadcast product and a few passes. It starts
    # at the clipped start (z = that, u = 0).
    v = np.maximum(x, 0.0, out=x)
    y = targets.copy()
    s = np.zeros_like(y)
    converged = False
    done = 0
    # the y-step's constant parts and the balance of the agreement
    weighted, spread = weights * targets, weights + rho
    keep_v = 1.0 - RELAXATION / 2
    balance = system.balance(1.0)
    for done in range(1, iterations + 1):
        check = done % CHECK_EVERY == 0
        np.abs(v, out=w)
        alpha, m = system.agree(w, y - s, 1.0, total, pull, balance=balance)
        alpha *= RELAXATION
        v_next = system.PT @ alpha
        if check:  # the residuals need the copy before the step
            z_old = np.maximum(v, 0.0)
        v_next += np.multiply(w, spread_abs, out=w)
        v *= keep_v
        v_next += v
        if target is not None:
            v_next += target
        mm = m[system.measured_cells]
        mh = RELAXATION * mm + (1 - RELAXATION) * y
        y_old = y
        y = (weighted + rho * (mh + s)) / spread
        s += mh - y
        if check:
            # x from v's update, in w's buffer (v now holds keep_v times the old v:
            # RELAXATION x = v_next - keep_v v_old + RELAXATION / 2 |v_old|), and the new copy
            x = np.abs(v, out=w)
            x *= RELAXATION / 2 / keep_v
            x += v_next
            x -= v
            x /= RELAXATION
            z = np.maximum(v_next, 0.0)
            x -= z
            z_old -= z
            primal = math.sqrt(float(np.dot(x, x)) + float(np.dot(mm - y, mm - y)))
            dual = math.sqrt(float(np.dot(z_old, z_old)) + float(np.dot(y - y_old, y - y_old)))
            if max(primal, dual) <= tolerance * scale * math.sqrt(z.size):
                converged = True
                break
        v = v_next
    return ThreeWayFit(system.tables(m), done, converged, int(v.size), cubes is not None)


def margin_factors(shape: tuple[int, ...],
                   measured: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]
                   ) -> dict[int, float]:
    """Per attribute with a measured 1-way table: the sum, over the measured 2-way tables
    holding it, of their cells' variances summed over the other attribute relative to the
    1-way cell's variance (the mean over its cells).

    Per-cell weights treat a 2-way table's errors as independent, so its sums over an
    attribute look that many times noisier than the 1-way table; when every table is a
    margin of one estimate (a reconstruction) the errors are correlated and those sums are
    exactly the 1-way table, known to its variance. Multiplying the 1-way table's weights by
    this factor gives that agreed direction back the weight the independent-error reading
    takes from each 2-way table.

    Example:
        >>> one = (np.zeros(2), np.full(2, 1.0))
        >>> pair = (np.zeros(6), np.full(6, 0.5))  # cells twice the variance, 3 per sum
        >>> margin_factors((2, 3), {(0,): one, (0, 1): pair})
        {0: 6.0}
    """
    factors: dict[int, float] = {}
    for q, (_, weights) in measured.items():
        if len(q) != 2:
            continue
        cells = (1.0 / np.asarray(weights, dtype=float)).reshape([shape[a] for a in q])
        for i, a in enumerate(q):
            if (a,) in measured:
                # the 1-way weights times the cells' sums over the other attribute, summed:
                # one matrix-vector product
                one = np.asarray(measured[(a,)][1], dtype=float)
                ratio = float((one @ cells if i == 0 else cells @ one).sum()) / one.size
                factors[a] = factors.get(a, 0.0) + ratio
    return {q[0]: factors.get(q[0], 1.0) for q in measured if len(q) == 1}


def kronecker_cubes(strategy: Matrix | None, y: np.ndarray,
                    noise_variances: float | np.ndarray, attributes: list[int]
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """The 3-way tables of the least-squares estimate ``x^ = A^+ y`` of a Kronecker strategy
    (every three of ``attributes``, concatenated in the fit's order), and the inverse of
    each of their cells' noise variance (1 / squared counts); None where it does not
    apply (not a Kronecker product of small factors, or noise of differing variances).

    Never forms ``x^``: each 3-way table is ``y`` summed along ``1' A_i^+`` over the other
    attributes and mapped by ``A_i^+`` on its own, the sums shared through a lattice of
    partial tables (the first level a few passes over ``y``).
    """
    v = np.asarray(noise_variances, dtype=float).reshape(-1)
    if (not isinstance(strategy, Kron) or v.size == 0 or not np.all(v == v[0])
            or not (np.isfinite(v[0]) and v[0] > 0)
            or any(f.shape[1] > MAX_FACTOR for f in strategy.factors)):
        return None
    dense = [np.ascontiguousarray(f.dense(), dtype=float) for f in strategy.factors]
    inverses, rows, unit_variances, identities = _kronecker_parts(
        tuple((*d.shape, d.tobytes()) for d in dense), tuple(sorted(attributes)))
    k = len(inverses)
    partial: dict[tuple[int, ...], np.ndarray] = {
        tuple(range(k)): np.asarray(y, dtype=float).reshape([p.shape[1] for p in inverses])}

    def summed(keep: tuple[int, ...]) -> np.ndarray:
        # through the parent that adds the innermost missing axis: going down from ``y``,
        # the outer axes are summed away first (a product with long contiguous rows; an
        # inner axis of few values is a slow strided sum), on the largest tables; leading
        # axes kept, the rest summed away at once (one product with their sums' Kronecker
        # product, where summing one axis at a time would take an inner one first)
        if keep not in partial:
            missing = [a for a in range(k) if a not in keep]
            if missing[0] > keep[-1]:
                weights = rows[missing[0]]
                for a in missing[1:]:
                    weights = np.multiply.outer(weights, rows[a]).reshape(-1)
                top = partial[tuple(range(k))]
                partial[keep] = (top.reshape(-1, weights.size) @ weights.reshape(-1, 1)
                                 ).reshape(top.shape[:len(keep)])
            else:
                drop = missing[-1]
                parent = tuple(sorted((*keep, drop)))
                partial[keep] = _contract(summed(parent), parent.index(drop), rows[drop])
        return partial[keep]

    cubes = np.empty(unit_variances.size)
    start = 0
    for a, b, c in combinations(sorted(attributes), 3):  # A^+ along each kept axis
        table = summed((a, b, c))
        r_a, r_b, r_c = table.shape  # the factors' rows; their columns: the cube's sizes
        n_a, n_b, n_c = (inverses[i].shape[0] for i in (a, b, c))
        # the last axis in one product, the middle one stacked, the first one into place
        # (an identity factor's axis as it is)
        if not identities[c]:
            table = (table.reshape(r_a * r_b, r_c) @ inverses[c].T).reshape(r_a, r_b, n_c)
        if not identities[b]:
            table = np.matmul(inverses[b], table)
        size = n_a * n_b * n_c
        out = cubes[start:start + size].reshape(n_a, n_b * n_c)
        if identities[a]:
            out[...] = table.reshape(r_a, n_b * n_c)
        else:
            np.matmul(inverses[a], table.reshape(r_a, n_b * n_c), out=out)
        start += size
    weights = float(v[0]) * unit_variances
    return cubes, np.divide(1.0, weights, out=weights)


@lru_cache(maxsize=8)
def _kronecker_parts(factors: tuple[tuple[int, int, bytes], ...], attributes: tuple[int, ...]
                     ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, list[bool]]:
    """What :func:`kronecker_cubes` needs of a Kronecker strategy alone (each factor as its
    rows, columns and float64 bytes): the factors' pseudo-inverses ``A_i^+``, their column
    sums ``1' A_i^+``, every 3-way cell's noise variance at unit noise (a Kronecker
    product of the diagonals of ``(A_i' A_i)^+`` times the other factors' sums of it), and
    which factors are identities (their axes need no product). Cached: every release of a
    plan reuses them."""
    inverses, identities = [], []
    for n_rows, n_columns, entries in factors:
        factor = np.frombuffer(entries, dtype=float).reshape(n_rows, n_columns)
        identities.append(n_rows == n_columns and np.array_equal(factor, np.eye(n_rows)))
        inverses.append(pseudo_inverse(factor))
    grams = [p @ p.T for p in inverses]  # (A_i' A_i)^+
    sums = [float(g.sum()) for g in grams]
    diagonals = [np.diag(g) for g in grams]
    triples = list(combinations(attributes, 3))
    variances = np.empty(sum(math.prod(diagonals[i].size for i in c) for c in triples))
    start = 0
    for c in triples:  # each triple's cells written in place
        sizes = [diagonals[i].size for i in c]
        cells = variances[start:start + math.prod(sizes)].reshape(sizes[0] * sizes[1], -1)
        np.multiply.outer(np.multiply.outer(diagonals[c[0]], diagonals[c[1]]).reshape(-1),
                          diagonals[c[2]], out=cells)
        cells *= math.prod(sums[i] for i in range(len(grams)) if i not in c)
        start += cells.size
    return inverses, [p.sum(axis=0) for p in inverses], variances, identities


def pseudo_inverse(factor: np.ndarray) -> np.ndarray:
    """``factor``'s pseudo-inverse: ``(A' A)^-1 A'`` by a Cholesky factorisation of the
    Gram when it is well conditioned (its reciprocal condition number, LAPACK's estimate,
    at least :data:`GRAM_RCOND`: the result then within about ``1 / GRAM_RCOND`` machine
    epsilons of the SVD's, a third of its time on an 85 x 85 factor), else by the SVD
    (``np.linalg.pinv``: rank-deficient or ill-conditioned factors, fewer rows than
    columns)."""
    rows, columns = factor.shape
    if rows >= columns > 0:
        gram = factor.T @ factor
        upper, failed = lapack.dpotrf(gram, lower=0)
        if not failed:
            rcond, failed = lapack.dpocon(upper, float(np.abs(gram).sum(axis=0).max()))
            if not failed and rcond >= GRAM_RCOND:
                inverse, failed = lapack.dpotrs(upper, factor.T, lower=0)
                if not failed:
                    return np.ascontiguousarray(inverse)
    return np.linalg.pinv(factor)


@lru_cache(maxsize=8)
def fit_index(shape: tuple[int, ...], attrs: tuple[int, ...],
              measured: tuple[tuple[int, ...], ...]) -> _System:
    """The fit's index structure for 3-way tables over ``attrs`` (sorted) of a domain of
    ``shape`` and the measured tables ``measured`` (sorted attribute sets, 2-way first): it
    depends on the workload alone, so a second release of the same workload reuses it."""
    return _System(shape, attrs, measured)


def clear_cache() -> None:
    """Forget every cached index structure and factor pseudo-inverse (to time a first
    release; a release never needs it)."""
    fit_index.cache_clear()
    _kronecker_parts.cache_clear()


def _contract(table: np.ndarray, axis: int, weights: np.ndarray) -> np.ndarray:
    """``table`` summed along ``axis`` with ``weights``, as one product where the cells
    after ``axis`` are few (at most :data:`FEW_INNER`: the table's rows times the weights
    spread over those cells, ``weights (x) I``; a stacked product there is thousands of tiny
    ones, a plain matrix-vector product on rows of two a slow loop), else as a stacked
    product (no transposed copy)."""
    dims = table.shape
    outer, inner = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
    if inner <= FEW_INNER:
        spread = (weights[:, None, None] * np.eye(inner)).reshape(-1, inner)
        return (table.reshape(outer, dims[axis] * inner) @ spread).reshape(
            dims[:axis] + dims[axis + 1:])
    stacked = table.reshape(outer, dims[axis], inner)
    return np.matmul(weights, stacked).reshape(dims[:axis] + dims[axis + 1:])


def _total_guess(measured: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]) -> float:
    """The weighted mean of the measured tables' sums (a start only)."""
    sums = [(float(t.sum()), 1.0 / float(np.sum(1.0 / w))) for t, w in measured.values()]
    return sum(s * w for s, w in sums) / sum(w for _, w in sums)


def _starts(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of ``counts`` entries starts, and the end: a CSR
    ``indptr`` when the runs are its rows."""
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _runs(starts: list[int] | np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``arange(s, s + n)`` for every ``s, n`` of ``starts, counts``, concatenated."""
    first = _starts(counts)
    return np.arange(int(first[-1])) + np.repeat(np.asarray(starts, dtype=np.int64)
                                                 - first[:-1], counts)


def _arithmetic_runs(first: np.ndarray, length: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``first + step * arange(length)`` for every entry of the (broadcast) arguments in C
    order, concatenated: one cumulative sum of the steps, each run's first entry stepping
    from the previous run's last (no division, no loop)."""
    first, length, step = (np.asarray(v, dtype=np.int64).reshape(-1)
                           for v in np.broadcast_arrays(first, length, step))
    steps = np.repeat(step, length)
    live = length > 0
    first, length, step = first[live], length[live], step[live]
    last = first + (length - 1) * step
    steps[_starts(length)[:-1]] = first - np.concatenate([[0], last[:-1]])
    return np.cumsum(steps)


def _strided_runs(start: np.ndarray, outer: np.ndarray, inner: np.ndarray,
                  outer_step: np.ndarray, inner_step: np.ndarray) -> np.ndarray:
    """``start + o * outer_step + i * inner_step`` for ``o < outer``, ``i < inner`` (``i``
    fastest), for every entry of the (broadcast) arguments in C order, concatenated: blocks
    of a table read row by row (``inner_step`` 1) or column by column."""
    start, outer, inner, outer_step, inner_step = (
        np.asarray(v, dtype=np.int64).reshape(-1)
        for v in np.broadcast_arrays(start, outer, inner, outer_step, inner_step))
    return _arithmetic_runs(_arithmetic_runs(start, outer, outer_step),
                            np.repeat(inner, outer), np.repeat(inner_step, outer))


def _csr(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """A 0/1 matrix of rows ``indices[indptr[r]:indptr[r + 1]]`` (ascending); 32-bit
    indices (the fit's sizes are far below 2**31: :data:`MAX_CELLS`), which scipy then
    takes as they are."""
    return sp.csr_array((np.ones(indices.size), indices.astype(np.int32, copy=False),
                         indptr.astype(np.int32, copy=False)), shape=shape)


class _System:
    """The index structure of one fit: 3-way cells ``x`` (the triples concatenated), their
    2-way sums per triple (the ``(c, p)`` space), 1-way sums per triple (``(c, a)``), and the
    consistent tables ``m`` (every pair, every attribute, the total)."""

    def __init__(self, shape: tuple[int, ...], attrs: tuple[int, ...],
                 measured: tuple[tuple[int, ...], ...]) -> None:
        self.shape = shape
        triples = list(combinations(attrs, 3))
        pairs = list(combinations(attrs, 2))
        attrs = list(attrs)
        size = {u: math.prod(shape[a] for a in u) for u in [*triples, *pairs,
                                                              *((a,) for a in attrs), ()]}
        self.pairs, self.attrs = pairs, attrs
        self.triple_sizes = np.array([size[c] for c in triples])
        # the consistent tables' layout: pairs, then attributes, then the total
        blocks = [*pairs, *((a,) for a in attrs), ()]
        self.offset = dict(zip(blocks, np.concatenate([[0], np.cumsum(
            [size[b] for b in blocks])]).astype(int), strict=False))
        self.size = size
        n_pairs = sum(size[p] for p in pairs)
        n_single = sum(size[(a,)] for a in attrs)
        self.n_pairs, self.n_single = n_pairs, n_single
        x_start = np.concatenate([[0], np.cumsum(self.triple_sizes)]).astype(int)
        self.triple_starts = x_start[:-1]
        # each triple's (c, p) entries: its three 2-way tables (a, b), (a, c), (b, c)
        self.cp_sizes = np.array([sum(size[p] for p in combinations(c, 2)) for c in triples])
        # and its (c, a) entries: its three 1-way tables
        self.ca_sizes = np.array([sum(shape[a] for a in c) for c in triples])
        n_x, cp, ca = int(x_start[-1]), int(self.cp_sizes.sum()), int(self.ca_sizes.sum())
        dims = np.array([[shape[a] for a in c] for c in triples], dtype=np.int64).reshape(-1, 3)
        cp_blocks = [p for c in triples for p in combinations(c, 2)]
        cp_counts = np.array([size[p] for p in cp_blocks], dtype=np.int64)
        ca_counts = dims.reshape(-1)
        # (c, p) cell -> its pair cell, 1 / N(c \ p); (c, a) cell -> its attribute's cell
        self.cp_to_pair = _runs([self.offset[p] for p in cp_blocks], cp_counts)
        self.cp_inv = 1.0 / np.repeat(np.repeat(self.triple_sizes, 3) / cp_counts, cp_counts)
        self.ca_to_single = _runs([self.offset[(a,)] - n_pairs for c in triples for a in c],
                                  ca_counts)
        self.ca_inv = 1.0 / np.repeat(np.repeat(self.triple_sizes, 3) / ca_counts, ca_counts)
        # P (a (c, p) cell's 3-way cells, ascending), a triple at a time: its three 2-way
        # tables' cells are its cells, transposed; P' its CSC view (a 3-way cell's three
        # (c, p) cells, summed in ascending order as a CSR copy would)
        p_columns = np.empty(3 * n_x, dtype=np.int32)
        cp_start = _starts(self.cp_sizes)
        for x0, (n_a, n_b, n_c) in zip(x_start[:-1].tolist(), dims.tolist(), strict=True):
            n = n_a * n_b * n_c
            cells = np.arange(x0, x0 + n, dtype=np.int32).reshape(n_a, n_b, n_c)
            mine = p_columns[3 * x0:3 * (x0 + n)]
            mine[:n] = cells.reshape(-1)
            mine[n:2 * n].reshape(n_a, n_c, n_b)[...] = cells.transpose(0, 2, 1)
            mine[2 * n:].reshape(n_b, n_c, n_a)[...] = cells.transpose(1, 2, 0)
        self.P = _csr(_starts(np.repeat(dims[:, ::-1].reshape(-1), cp_counts)), p_columns,
                      (cp, n_x))
        self.PT = self.P.T
        # Q: (c, p) -> (c, a) sums through the first pair holding a: a's rows of (a, b)
        # (n_b entries each), b's columns of (a, b), c's columns of (a, c) (n_a entries each);
        # then (c, p) -> triple total (the first pair): rows of one CSR matrix, the (c, a)
        # entries' sums then the triples'
        size_a, size_b, size_c = dims.T
        ab_start = cp_start[:-1]
        ones = np.ones_like(size_a)
        rows = dims[:, [1, 0, 0]]
        first = cp_counts[0::3]
        self.n_ca = ca
        self.Q = _csr(
            _starts(np.concatenate([np.repeat(rows.reshape(-1), ca_counts), first])),
            np.concatenate([
                _strided_runs(np.stack([ab_start, ab_start, ab_start + size_a * size_b], 1),
                              dims, rows, np.stack([size_b, ones, ones], 1),
                              np.stack([ones, size_b, size_c], 1)),
                _runs(ab_start, first)]),
            (ca + len(triples), cp))
        self.QT = self.Q.T  # a CSC view: each row sums its entries in ascending columns
        self.c_inv = 1.0 / self.triple_sizes.astype(float)
        # Q's rows' weights (1 / the cells each sums), and their signs in the 2-way part's
        # coefficients (inclusion-exclusion)
        self.q_weight = np.concatenate([self.ca_inv, self.c_inv])
        self.q_sign = np.concatenate([-np.ones(ca), np.ones(len(triples))])
        # G: every (c, p) entry, (c, a) entry and triple onto its pair cell, attribute cell or
        # the total, weighted by 1 / the cells it sums -- one entry a column (CSC as it is);
        # G' (a CSR view) spreads the consistent tables back, each entry times its weight
        self.G = sp.csc_array(
            (np.concatenate([self.cp_inv, self.q_weight]),
             np.concatenate([self.cp_to_pair, n_pairs + self.ca_to_single,
                             np.full(len(triples), n_pairs + n_single)]).astype(np.int32),
             np.arange(cp + ca + len(triples) + 1, dtype=np.int32)),
            shape=(n_pairs + n_single + 1, cp + ca + len(triples)))
        self.GT = self.G.T
        # the measured tables: which consistent cells, and their sums onto components
        self.measured = measured
        m_counts = np.array([size[q] for q in measured], dtype=np.int64)
        self.measured_cells = _runs([self.offset[q] for q in measured], m_counts)
        # per pair / attribute / total: the summed weight of the copies holding each
        # component, and the measured cells' sums onto them (a 2-way table's 1-way sums and
        # total, each over the cells it sums)
        self.copies_weight = np.concatenate([
            np.bincount(self.cp_to_pair, weights=self.cp_inv, minlength=n_pairs),
            np.bincount(self.ca_to_single, weights=self.ca_inv, minlength=n_single),
            [self.c_inv.sum()]])
        self.lift = self._lift(m_counts)
        # a component's weight from one table is 1 / (the cells it sums): the squares of
        # its coefficients summed
        self.lift_weight = np.bincount(self.lift.indices, weights=self.lift.data ** 2,
                                       minlength=self.lift.shape[0])
        # centring: each pair's sums over either attribute (its ends: rows of n_b entries,
        # then columns of n_a entries), and its grand sum
        pair_counts = np.array([size[p] for p in pairs], dtype=np.int64)
        pair_dims = np.array([[shape[a] for a in p] for p in pairs], dtype=np.int64)
        end_counts = pair_dims.reshape(-1)
        p_start = np.array([self.offset[p] for p in pairs], dtype=np.int64)
        ones = np.ones(len(pairs), dtype=np.int64)
        self.ends = _csr(_starts(np.repeat(pair_dims[:, ::-1].reshape(-1), end_counts)),
                         _strided_runs(np.stack([p_start, p_start], 1), pair_dims,
                                       pair_dims[:, ::-1], np.stack([pair_dims[:, 1], ones], 1),
                                       np.stack([ones, pair_dims[:, 1]], 1)),
                         (int(end_counts.sum()), n_pairs))
        self.endsT = self.ends.T
        self.end_inv = np.repeat(end_counts / np.repeat(pair_counts, 2), end_counts)
        # an end (a pair's 1-way sums over one attribute) -> that attribute's table
        self.end_single = _runs([self.offset[(a,)] - n_pairs for p in pairs for a in p],
                                end_counts)
        self.grand = np.repeat(np.arange(len(pairs)), pair_counts)
        self.pair_sizes = pair_counts.astype(float)
        self.pair_starts = p_start
        self.single_starts = np.array([self.offset[(a,)] - n_pairs for a in attrs])
        self.single_counts = np.array([shape[a] for a in attrs])

    def _lift(self, counts: np.ndarray) -> sp.csc_array:
        """The measured cells' sums onto the consistent tables' components: every cell onto
        its own, a 2-way table's onto its two 1-way tables and every table's onto the total,
        each as a mean over the cells it sums (``counts``: the measured tables' cells).

        Written column by column (a measured cell's components ascending: its own, its two
        1-way cells, the total; the 2-way tables first, as :func:`fit_index` has them), so
        scipy takes the arrays as they are; every row then adds its entries in ascending
        columns, as a CSR matrix would."""
        shape, n_cells = self.shape, int(counts.sum())
        widths = np.array([len(q) for q in self.measured])
        table = np.repeat(np.arange(len(self.measured)), counts)
        local = np.arange(n_cells) - np.repeat(_starts(counts)[:-1], counts)
        n_two, n_one = (int(counts[widths == n].sum()) for n in (2, 1))
        two = slice(0, n_two)
        one = slice(n_two, n_two + n_one)
        rest = slice(n_two + n_one, n_cells)
        pairs = [q if len(q) == 2 else (self.attrs[0],) * 2 for q in self.measured]
        n_first, n_second = (np.array([shape[q[i]] for q in pairs])[table[two]] for i in (0, 1))
        first, second = (np.array([self.offset[(q[i],)] for q in pairs])[table[two]]
                         for i in (0, 1))
        total = self.offset[()]
        own = self.measured_cells
        # each 2-way cell onto itself, its cell of either 1-way table and the total
        indices = np.concatenate([
            np.stack([own[two], first + local[two] // n_second, second + local[two] % n_second,
                      np.full(n_two, total)], 1).reshape(-1),
            np.stack([own[one], np.full(n_one, total)], 1).reshape(-1), own[rest]])
        data = np.concatenate([
            np.stack([np.ones(n_two), 1.0 / n_second, 1.0 / n_first,
                      1.0 / counts[table[two]]], 1).reshape(-1),
            np.stack([np.ones(n_one), 1.0 / counts[table[one]]], 1).reshape(-1),
            np.ones(n_cells - n_two - n_one)])
        indptr = _starts(np.repeat([4, 2, 1], [n_two, n_one, n_cells - n_two - n_one]))
        return sp.csc_array((data, indices.astype(np.int32), indptr.astype(np.int32)),
                            shape=(self.n_pairs + self.n_single + 1, n_cells))

    def triple_totals(self, total: float) -> np.ndarray:
        """Each triple's cell value when ``total`` is spread evenly."""
        return float(total) / self.triple_sizes

    def sums(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The 2-way sums of every 3-way table of ``w`` (the ``(c, p)`` entries) and their
        ``Q`` sums (the ``(c, a)`` entries, then one total per triple)."""
        d1 = self.P @ w
        return d1, self.Q @ d1

    def balance(self, sigma2: float) -> np.ndarray:
        """Every component's summed weight in the agreement step (:meth:`agree`) when the
        measured tables are weighted by ``sigma2``."""
        return self.copies_weight + sigma2 * self.lift_weight

    def consistent(self, w: np.ndarray, t: np.ndarray, sigma2: float, total: int | None,
                   sums: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The agreeing 3-way tables nearest to ``w`` (3-way cells) and, weighted by
        ``sigma2``, to ``t`` (the measured tables' cells): ``x`` and its consistent 2-way,
        1-way and total tables ``m``. ``sums``: ``w``'s :meth:`sums`, when at hand."""
        alpha, m = self.agree(w, t, sigma2, total, sums=sums)
        x = self.PT @ alpha
        x += w
        return x, m

    def agree(self, w: np.ndarray, t: np.ndarray, sigma2: float, total: int | None,
              pull: Pull | None = None,
              sums: tuple[np.ndarray, np.ndarray] | None = None,
              balance: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`consistent`'s step in the ``(c, p)`` space: the coefficients ``alpha``
        with ``x = PT alpha + w`` and the consistent tables ``m``; ``balance``:
        :meth:`balance` of ``sigma2``, when at hand. With ``pull`` (:class:`Pull`), each
        table's own 3-way interaction keeps only its share of ``w``'s: then
        ``x = PT alpha + keep w + (the target's part)``, the caller adding the last two."""
        d1, q = self.sums(w) if sums is None else sums
        n_pairs, n_single = self.n_pairs, self.n_single
        if balance is None:
            balance = self.balance(sigma2)
        # each component's weighted sum over the copies holding it and over the measured
        # tables holding it (a pair's 1-way sums, a table's total), then its mean
        m = self.G @ np.concatenate([d1, q])
        lifted = self.lift @ t
        if sigma2 != 1.0:
            lifted *= sigma2
        m += lifted
        m /= balance
        pairs, singles = m[:n_pairs], m[n_pairs:n_pairs + n_single]
        grand = float(m[-1]) if total is None else float(total)
        m[-1] = grand
        # centre each attribute's table, then give it the total
        starts, counts = self.single_starts, self.single_counts
        means = np.add.reduceat(singles, starts) / counts
        singles += np.repeat(grand / counts - means, counts)
        # double-centre each pair (its 1-way sums removed), then add the agreed 1-way tables
        ends = (self.ends @ pairs) * self.end_inv
        grand_means = np.add.reduceat(pairs, self.pair_starts) / self.pair_sizes
        pairs += (self.endsT @ (singles[self.end_single] * self.end_inv - ends)
                  + (grand_means - grand / self.pair_sizes)[self.grand])
        # move each 3-way table by the difference of its sums from the agreed ones
        # (with a pull, by the difference from the kept share of w's 2-way parts)
        pair_weight, sum_weight = ((self.cp_inv, self.q_weight) if pull is None
                                   else (pull.pair, pull.sums))
        spread = self.GT @ m
        alpha = spread[:d1.size] - pair_weight * d1
        inner = spread[d1.size:] - sum_weight * q
        inner *= self.q_sign
        alpha += self.QT @ inner
        return alpha, m

    def pair_coefficients(self, d1: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The ``(c, p)`` coefficients whose broadcast (``PT``) is the 2-way part of 3-way
        cells with 2-way sums ``d1`` and their ``Q`` sums ``q`` (1-way sums and totals):
        inclusion-exclusion of their means."""
        return self.cp_inv * d1 + self.QT @ (self.q_sign * self.q_weight * q)

    def pair_part(self, w: np.ndarray,
                  sums: tuple[np.ndarray, np.ndarray] | None = None
                  ) -> np.ndarray:
        """The part of every 3-way table of ``w`` that its 2-way tables hold (the
        orthogonal projection onto sums of 2-way terms); ``w`` less it is its 3-way
        interaction. ``sums``: ``w``'s :meth:`sums`, when at hand."""
        return self.PT @ self.pair_coefficients(*(self.sums(w) if sums is None else sums))

    def tables(self, m: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
        out = {p: m[self.offset[p]:self.offset[p] + self.size[p]] for p in self.pairs}
        out.update({(a,): m[self.offset[(a,)]:self.offset[(a,)] + self.shape[a]]
                    for a in self.attrs})
        out[()] = m[-1:]
        return out
