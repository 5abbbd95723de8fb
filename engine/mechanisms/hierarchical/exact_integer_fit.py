"""M_DP post-processing: the exact integer least-squares hierarchy by dynamic programming.

Given noisy per-level histograms ``c~`` and the public total n, find integers ``c^`` that
minimise ``sum_l w_l sum_{r in R_l, i} (c^r_i - c~r_i)**2`` subject to consistency (every
parent equals the sum of its children, per size), non-negativity and ``sum_i c^root_i = n``
(the spec's Model 1). The size subtrees of the tree T' are independent apart from the root
sum, so one cost table per node ``(i, r)`` suffices (spec §3.3):

    C_x(v) = w_x (v - c~_x)**2 + Phi_x(v),    Phi_x = infimal convolution of the children.

Every table is convex (CPWL), so ``Phi_x`` comes from one sort of the children's upward
slopes (Algorithm 1, "slope merging"): start every child at the low end of its domain and
take unit increments cheapest first. Ties are broken by (slope, child index, value), which
a *stable* sort of the child-major concatenation gives for free, and allocation counts each
child's increments below / at the threshold slope, so equal slopes never make it ambiguous
(spec pitfall P4).

Everything is vectorised over the k size buckets: one merge per internal region handles all
sizes at once. Domains are integer windows ``round(c~_x) +- h_l`` clipped to ``[0, n]``
(``halfwidths=None`` means the whole ``[0, n]``: exact, for small inputs). A window can cut
off the true optimum; the result is *certified* globally optimal when no node's value sits on
an artificial window edge (the problem is a separable convex integer flow on a tree, so an
optimum of the restricted problem with no active artificial bound is optimal for the full
problem). Uncertified results are re-solved with doubled windows (``max_widen`` times).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import SpecError
from engine.mechanisms.hierarchical.model import RegionTree
from engine.progress import Progress, report

_INF = np.inf
#: most slopes merged at once (8 bytes each): larger parents are processed in size-row blocks
CHUNK_CELLS = 16_000_000


@dataclass(frozen=True)
class DPResult:
    """The M_DP optimum.

    Attributes:
        levels: per level, ``(regions, buckets)`` int64 released counts.
        objective: the weighted squared distance to the noisy input (Model 1's objective).
        certified: True when the result is provably the global optimum (no artificial
            window edge is active, or the domains were the full ``[0, n]``).
        widenings: how many times the windows were doubled.
        halfwidths: the final per-level window half-widths (None: full domains).
        seconds: wall-clock time.
    """

    levels: tuple[np.ndarray, ...]
    objective: float
    certified: bool
    widenings: int
    halfwidths: tuple[int, ...] | None
    seconds: float


# ----- one-dimensional tables (the building blocks; also used by the tests and the UI) ------
def leaf_table(noisy: np.ndarray | float, lo: np.ndarray | int, hi: np.ndarray | int,
               weight: float | np.ndarray = 1.0) -> np.ndarray:
    """Cost table ``w (v - c~)**2`` for v in ``[lo, hi]``; entries past hi are +inf.

    Args:
        noisy: noisy values, any shape S.
        lo: lowest domain value, shape S (or broadcastable).
        hi: highest domain value, shape S.
        weight: the least-squares weight.

    Returns:
        Array of shape ``S + (W,)`` with ``W = max(hi - lo) + 1``.
    """
    noisy = np.asarray(noisy, dtype=float)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), noisy.shape)
    hi = np.broadcast_to(np.asarray(hi, dtype=np.int64), noisy.shape)
    W = int(np.max(hi - lo)) + 1 if noisy.size else 1
    v = lo[..., None] + np.arange(W)
    vals = np.asarray(weight, dtype=float)[..., None] * (v - noisy[..., None]) ** 2
    vals[v > hi[..., None]] = _INF
    return vals


def _slopes(values: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Upward slopes ``C(v+1) - C(v)`` inside each table's width; +inf past it."""
    W = values.shape[-1]
    if W == 1:
        return np.empty(values.shape[:-1] + (0,))
    valid = np.arange(W - 1) < (widths - 1)[..., None]
    with np.errstate(invalid="ignore"):  # inf - inf past the width is masked out below
        diff = values[..., 1:] - values[..., :-1]
    return np.where(valid, diff, _INF)


@dataclass
class _Tables:
    """Convex tables in slope form: ``C(lo) = base``, ``C(lo+j+1) - C(lo+j) = slopes[..., j]``.

    Arrays are ``(nodes, k)`` (``slopes``: ``(nodes, k, S)``, +inf past ``width - 1``).
    """

    lo: np.ndarray
    widths: np.ndarray
    base: np.ndarray
    slopes: np.ndarray
    scratch: bool = False  # the slopes may be sorted in place (they are rebuilt on demand)

    def __getitem__(self, sl: slice) -> _Tables:
        return _Tables(self.lo[sl], self.widths[sl], self.base[sl], self.slopes[sl])


def _merge(children: _Tables) -> tuple[np.ndarray, np.ndarray]:
    """Infimal convolution of ``nc`` convex tables per row, by one sort of their slopes.

    Returns:
        ``base`` ``(k,)``: Phi at ``sum(lo)``, and ``ranked`` ``(k, M)``: the merged slopes
        in increasing order, so ``Phi(sum(lo) + t) = base + sum(ranked[:, :t])`` and
        ``ranked[:, t - 1]`` is the threshold slope of the t-th increment.
    """
    nc, k = children.lo.shape
    by_row = children.slopes.transpose(1, 0, 2)
    if children.scratch and by_row.flags.c_contiguous:
        ranked = by_row.reshape(k, -1)  # a view: sorted in place, no copy of the bulk
    else:
        ranked = by_row.reshape(k, -1).copy()
    # stable: equal slopes stay in child-major, value order (the (slope, y, v) tie-break);
    # timsort also exploits that every child's slopes are already sorted runs
    ranked.sort(axis=1, kind="stable")
    return children.base.sum(axis=0), ranked


def _allocate(children: _Tables, t: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Children's values when the parent takes ``sum(lo) + t``: the t cheapest increments.

    Counting each child's increments strictly below the threshold slope, then handing out the
    remaining ones at the threshold in child order, reproduces the stable sort's choice
    exactly, whatever the float values of tied slopes.

    Args:
        children: the child tables (``nc`` nodes, ``k`` rows).
        t: ``(k,)`` increments to hand out.
        threshold: ``(k,)`` slope of the t-th increment (-inf when t = 0).

    Returns:
        ``(nc, k)`` child values.
    """
    s = children.slopes
    thr = threshold[None, :, None]
    below = np.count_nonzero(s < thr, axis=2)
    at = np.count_nonzero(s == thr, axis=2)
    rest = t - below.sum(axis=0)
    before = np.cumsum(at, axis=0) - at
    take = np.clip(rest[None, :] - before, 0, at)
    return children.lo + below + take


def _from_values(values: np.ndarray, widths: np.ndarray, lo: np.ndarray) -> _Tables:
    return _Tables(lo, widths, values[..., 0], _slopes(values, widths))


def infconv(tables: Sequence[tuple[int, Sequence[float]]]) -> tuple[int, np.ndarray]:
    """Min-plus convolution of convex integer tables (Algorithm 1's output).

    Args:
        tables: ``(lo, values)`` per child; ``values[j]`` is the cost at ``lo + j``.

    Returns:
        ``(sum of lo, Phi)`` with ``Phi[t]`` the minimum total cost when the children sum to
        ``sum(lo) + t``.
    """
    children = _stack_tables(tables)
    base, ranked = _merge(children)
    m = int((children.widths - 1).sum())
    phi = base[0] + np.concatenate([[0.0], np.cumsum(ranked[0, :m])])
    return int(children.lo.sum()), phi


def allocate(tables: Sequence[tuple[int, Sequence[float]]], v: int) -> np.ndarray:
    """The optimal children values summing to ``v`` (top-down step of the DP)."""
    children = _stack_tables(tables)
    _, ranked = _merge(children)
    t = int(v) - int(children.lo.sum())
    if not 0 <= t <= int((children.widths - 1).sum()):
        raise SpecError(f"allocate: {v} is outside the children's range")
    thr = np.array([ranked[0, t - 1] if t else -_INF])
    return _allocate(children, np.array([t]), thr)[:, 0]


def _stack_tables(tables: Sequence[tuple[int, Sequence[float]]]) -> _Tables:
    W = max(len(v) for _, v in tables)
    values = np.full((len(tables), 1, W), _INF)
    widths = np.zeros((len(tables), 1), dtype=np.int64)
    lo = np.zeros((len(tables), 1), dtype=np.int64)
    for j, (low, vals) in enumerate(tables):
        values[j, 0, : len(vals)] = vals
        widths[j, 0], lo[j, 0] = len(vals), low
    return _from_values(values, widths, lo)


# ----- the whole tree --------------------------------------------------------------------
@dataclass
class _Level:
    """Tables of the internal nodes of one level (leaf tables are recomputed on demand)."""

    tables: _Tables
    thresholds: np.ndarray  # (n, k, W): merged slope of the increment reaching each value
    child_lo: np.ndarray    # (n, k): sum of the children's lo


def _window(noisy: np.ndarray, h: int | None, total: int) -> tuple[np.ndarray, np.ndarray]:
    if h is None:
        lo = np.zeros(noisy.shape, dtype=np.int64)
        return lo, lo + total
    centre = np.clip(np.rint(noisy), 0, total).astype(np.int64)
    return np.maximum(centre - h, 0), np.minimum(centre + h, total)


def _leaf_tables(noisy: np.ndarray, h: int | None, total: int, weight: float) -> _Tables:
    """Quadratic leaf tables in closed-form slope form (``w (2 (v - c~) + 1)``)."""
    lo, hi = _window(noisy, h, total)
    widths = hi - lo + 1
    S = int(widths.max()) - 1 if widths.size else 0
    # slope leaving lo + j: w (2 (lo + j - c~) + 1), built in place (the bulk of the work),
    # stored size-major so that the merge can sort it where it lies
    rows = np.empty((lo.shape[1], lo.shape[0], S))
    np.add((weight * (2.0 * (lo - noisy) + 1.0)).T[..., None], (2.0 * weight) * np.arange(S),
           out=rows)
    np.copyto(rows, _INF, where=np.arange(S) >= (widths - 1).T[..., None])
    return _Tables(lo, widths, weight * (lo - noisy) ** 2, rows.transpose(1, 0, 2),
                   scratch=True)


def dp_postprocess(tree: RegionTree, noisy: Sequence[np.ndarray], total: int,
                   weights: Sequence[float] | None = None,
                   halfwidths: Sequence[int] | None = None, max_widen: int = 3,
                   progress: Progress | None = None) -> DPResult:
    """Solve Model 1 exactly by dynamic programming with slope-merged cost tables.

    Args:
        tree: the region tree.
        noisy: per level, ``(regions, buckets)`` noisy values (reals or integers).
        total: the public number of groups n.
        weights: least-squares weight per level (default 1: the paper's objective).
        halfwidths: per-level window half-widths in counts (None: full ``[0, n]``).
        max_widen: how often uncertified windows are doubled before giving up.
        progress: reports one step per internal region; cancellable.

    Returns:
        The optimum as a :class:`DPResult`.
    """
    start = time.perf_counter()
    L = tree.depth
    noisy = [np.asarray(a, dtype=float) for a in noisy]
    if len(noisy) != L:
        raise SpecError(f"noisy: expected {L} level arrays, got {len(noisy)}")
    k = noisy[0].shape[1] if noisy[0].ndim == 2 else -1
    for lev, a in enumerate(noisy):
        if a.shape != (tree.level_sizes[lev], k):
            raise SpecError(f"noisy[{lev}]: expected shape {(tree.level_sizes[lev], k)}, "
                            f"got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise SpecError(f"noisy[{lev}]: values must be finite")
    if int(total) != total or total < 0:
        raise SpecError(f"total: must be a non-negative integer, got {total!r}")
    total = int(total)
    w = np.ones(L) if weights is None else np.asarray(weights, dtype=float)
    h = None if halfwidths is None else [max(1, int(np.ceil(x))) for x in halfwidths]
    widenings = 0
    while True:
        if h is not None and all(x >= total for x in h):
            h = None  # the windows already cover [0, n]: use the exact full domains
        solved = _solve(tree, noisy, total, w, h, progress)
        if solved is not None and (solved[2] or h is None or widenings >= max_widen):
            break
        if h is None:
            raise SpecError("dp: no feasible hierarchy (this cannot happen with full domains)")
        h = [2 * x for x in h]
        widenings += 1
    levels, obj, certified = solved
    return DPResult(tuple(levels), obj, certified, widenings,
                    None if h is None else tuple(h), time.perf_counter() - start)


def _solve(tree: RegionTree, noisy: list[np.ndarray], total: int, w: np.ndarray,
           h: list[int] | None, progress: Progress | None
           ) -> tuple[list[np.ndarray], float, bool] | None:
    """One DP pass with fixed windows; None when n is outside the root's feasible range."""
    L = tree.depth
    k = noisy[0].shape[1]
    hw: list[int | None] = [None] * L if h is None else list(h)
    levels_t: list[_Level | None] = [None] * L
    step = 0

    def children_of(lev: int, p: int, rows: slice) -> _Tables:
        """Tables of the children (at level lev + 1) of region p of level lev, some sizes."""
        span = tree.children(lev, p)
        sl = slice(span.start, span.stop)
        if lev + 1 == L - 1:
            return _leaf_tables(noisy[L - 1][sl, rows], hw[L - 1], total, w[L - 1])
        t = levels_t[lev + 1].tables
        return _Tables(t.lo[sl, rows], t.widths[sl, rows], t.base[sl, rows],
                       t.slopes[sl, rows])

    def row_chunks(lev: int, p: int) -> list[slice]:
        """Size rows processed together, so one merge holds at most CHUNK_CELLS slopes."""
        nc = len(tree.children(lev, p))
        if lev + 1 == L - 1:
            width = total + 1 if hw[L - 1] is None else min(2 * hw[L - 1] + 1, total + 1)
        else:
            width = levels_t[lev + 1].tables.slopes.shape[-1] + 1
        step_rows = max(1, CHUNK_CELLS // max(1, nc * width))
        return [slice(a, min(a + step_rows, k)) for a in range(0, k, step_rows)]

    # bottom-up over internal levels
    for lev in range(L - 2, -1, -1):
        n_par = tree.level_sizes[lev]
        own_lo, own_hi = _window(noisy[lev], hw[lev], total)
        parts = []
        for p in range(n_par):
            pieces = [_parent_table(children_of(lev, p, rs), own_lo[p, rs], own_hi[p, rs],
                                    noisy[lev][p, rs], w[lev]) for rs in row_chunks(lev, p)]
            parts.append(_join_rows(pieces))
            step += 1
            report(progress, step, 0.0, f"cost tables of level {lev + 1}")
        S = max(int(x[0].widths.max()) for x in parts) - 1
        tables = _Tables(np.stack([x[0].lo for x in parts]),
                         np.stack([x[0].widths for x in parts]),
                         np.stack([x[0].base for x in parts]),
                         np.stack([_pad(x[0].slopes, S, _INF) for x in parts]))
        thresholds = np.stack([_pad(x[1], S + 1, -_INF) for x in parts])
        child_lo = np.stack([x[2] for x in parts])
        levels_t[lev] = _Level(tables, thresholds, child_lo)

    # the dummy root: the k national tables are its children; only Phi(n) is needed
    top = _leaf_tables(noisy[0], hw[0], total, w[0]) if L == 1 else levels_t[0].tables
    nat = _Tables(top.lo[0][:, None], top.widths[0][:, None], top.base[0][:, None],
                  top.slopes[0][:, None, :])
    base, ranked = _merge(nat)
    t = total - int(nat.lo.sum())
    if t < 0 or t > int((nat.widths - 1).sum()):
        return None
    obj = float(base[0] + ranked[0, :t].sum())
    thr = np.array([ranked[0, t - 1] if t else -_INF])
    levels: list[np.ndarray] = [np.empty(0)] * L
    levels[0] = _allocate(nat, np.array([t]), thr)[:, 0][None, :]

    # top-down
    for lev in range(L - 1):
        out = np.empty((tree.level_sizes[lev + 1], k), dtype=np.int64)
        lt = levels_t[lev]
        for p in range(tree.level_sizes[lev]):
            v = levels[lev][p]
            idx = (v - lt.tables.lo[p])[:, None]
            thr = np.take_along_axis(lt.thresholds[p], idx, axis=1)[:, 0]
            span = tree.children(lev, p)
            t_p = v - lt.child_lo[p]
            for rs in row_chunks(lev, p):
                out[span.start:span.stop, rs] = _allocate(children_of(lev, p, rs), t_p[rs],
                                                          thr[rs])
        levels[lev + 1] = out

    certified = h is None or _certified(tree, noisy, levels, levels_t, hw, total)
    return levels, obj, certified


def _join_rows(pieces: list[tuple[_Tables, np.ndarray, np.ndarray]]
               ) -> tuple[_Tables, np.ndarray, np.ndarray]:
    """Stack per-chunk parent tables (row blocks of the same parent) into one."""
    if len(pieces) == 1:
        return pieces[0]
    S = max(p[0].slopes.shape[-1] for p in pieces)
    tables = _Tables(np.concatenate([p[0].lo for p in pieces]),
                     np.concatenate([p[0].widths for p in pieces]),
                     np.concatenate([p[0].base for p in pieces]),
                     np.concatenate([_pad(p[0].slopes, S, _INF) for p in pieces]))
    thresholds = np.concatenate([_pad(p[1], S + 1, -_INF) for p in pieces])
    return tables, thresholds, np.concatenate([p[2] for p in pieces])


def _pad(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    if a.shape[-1] >= width:
        return a[..., :width]
    out = np.full(a.shape[:-1] + (width,), fill)
    out[..., : a.shape[-1]] = a
    return out


def _parent_table(children: _Tables, own_lo: np.ndarray, own_hi: np.ndarray,
                  noisy: np.ndarray, weight: float
                  ) -> tuple[_Tables, np.ndarray, np.ndarray]:
    """The table of one internal node per size: own term plus the merged children.

    Returns:
        The node's tables (its domain: the own window within the children's range), the
        threshold slope of the increment that reaches each domain value, and sum(lo).
    """
    base_c, ranked = _merge(children)
    s_lo = children.lo.sum(axis=0)
    s_hi = s_lo + (children.widths - 1).sum(axis=0)
    # a window that misses the children's range is moved next to it (spec P3)
    span = own_hi - own_lo
    below, above = own_hi < s_lo, own_lo > s_hi
    a = np.where(below, s_lo, np.where(above, np.maximum(s_hi - span, s_lo),
                                       np.maximum(own_lo, s_lo)))
    b = np.where(below, np.minimum(s_lo + span, s_hi),
                 np.where(above, s_hi, np.minimum(own_hi, s_hi)))
    widths = b - a + 1
    W = int(widths.max())
    ta = a - s_lo
    cols = int((b - s_lo).max())  # ranks ever needed: Phi up to b, slopes up to b - 1
    head = ranked[:, :cols]
    phi_a = base_c + np.where(np.arange(cols) < ta[:, None], head, 0.0).sum(axis=1)
    j = np.arange(W)
    ranks = ta[:, None] + j  # rank of the increment leaving value a + j
    ok = j < (widths - 1)[:, None]
    if cols:
        gathered = np.take_along_axis(head, np.clip(ranks, 0, cols - 1), axis=1)
        before = np.take_along_axis(head, np.clip(ranks - 1, 0, cols - 1), axis=1)
    else:
        gathered = before = np.zeros((len(a), W))
    v = a[:, None] + j
    slopes = np.where(ok, gathered + weight * (2.0 * (v - noisy[:, None]) + 1.0), _INF)
    thresholds = np.where((ranks >= 1) & (j < widths[:, None]), before, -_INF)
    base = phi_a + weight * (a - noisy) ** 2
    return _Tables(a, widths, base, slopes[:, : W - 1]), thresholds, s_lo


def _certified(tree: RegionTree, noisy: list[np.ndarray], levels: list[np.ndarray],
               levels_t: list[_Level | None], hw: list[int | None], total: int) -> bool:
    """True when no value sits on a window edge other than 0 or n."""
    for lev in range(tree.depth):
        if lev == tree.depth - 1:
            lo, hi = _window(noisy[lev], hw[lev], total)
        else:
            lo = levels_t[lev].tables.lo
            hi = lo + levels_t[lev].tables.widths - 1
        v = levels[lev]
        if np.any(((v == lo) & (lo > 0)) | ((v == hi) & (hi < total))):
            return False
    return True


def objective(levels: Sequence[np.ndarray], noisy: Sequence[np.ndarray],
              weights: Sequence[float] | None = None) -> float:
    """Model 1's objective ``sum_l w_l ||c^_l - c~_l||**2`` of a released hierarchy."""
    w = np.ones(len(levels)) if weights is None else np.asarray(weights, dtype=float)
    return float(sum(wl * np.sum((np.asarray(a, float) - np.asarray(b, float)) ** 2)
                     for wl, a, b in zip(w, levels, noisy, strict=True)))
