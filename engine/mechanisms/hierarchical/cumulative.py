"""Cumulative-count mechanisms: M_CDP (local isotonic fit + M_DP) and M_CDP* (the chain DP).

``cum(c)_i = sum_{j <= i} c_j`` has L1 sensitivity 1 per region under the individual unit
(adding someone to a size-i group lowers only ``C_i``), half that of the plain histogram, so
it gets half the noise scale (spec §3.5).

**M_CDP** (spec §3.6, Algorithm 2): per region, fit the noisy cumulative vector with
isotonic regression (PAVA) clipped at 0, round (monotone, so the rounded vector is
still non-decreasing and its differences are non-negative integers), difference back to
counts, then run the M_DP post-processing on them.

**M_CDP*** (spec §3.7): visit T' in post-order (children first, size subtrees 1..k, the
dummy root last); the level-wide prefix sums along that chain turn consistency into
equalities between chain neighbours and non-negativity into ``>=`` links, so the exact
integer optimum is a DP along the chain (Eq. 8). Its noise must be calibrated to the
level-wide prefix sensitivity ``|R_l|`` (spec §3.7.3; see :mod:`.noise`).

The chain problem is an integer isotonic regression with tied blocks. Besides the literal
DP (``solver='dp'``, O(J d) for J chain nodes and window width d) there is an exact O(J)
solver (``solver='isotonic'``): pool tied neighbours into blocks, solve the continuous
problem with PAVA, clip to ``[0, n]`` and round half up. For a separable convex quadratic,
the integer threshold problems ``x >= t`` have the same cut costs as the continuous ones at
``t - 1/2`` (``f(t) - f(t - 1) = f'(t - 1/2)``), so the rounded continuous optimum is an
integer optimum (Hochbaum's threshold theorem); the tests check both solvers against brute
force.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression

from engine.errors import SpecError
from engine.mechanisms.hierarchical.exact_integer_fit import DPResult, dp_postprocess
from engine.mechanisms.hierarchical.model import RegionTree
from engine.progress import Progress, report

CHAIN_SOLVERS = ("auto", "dp", "isotonic")
#: ``auto`` runs the literal chain DP up to this many chain-node x domain-value cells
CHAIN_DP_CELLS = 2_000_000


def cumulate(counts: np.ndarray) -> np.ndarray:
    """Per-row cumulative sums over the size axis: ``C_i = sum_{j <= i} c_j``."""
    return np.cumsum(counts, axis=-1)


def decumulate(cum: np.ndarray) -> np.ndarray:
    """Inverse of :func:`cumulate`: ``c_1 = C_1``, ``c_i = C_i - C_{i-1}``."""
    return np.diff(cum, axis=-1, prepend=0)


def isotonic_fit(noisy_cum: np.ndarray) -> np.ndarray:
    """Row-wise least-squares non-decreasing fit (PAVA), then clipped at 0.

    Clipping the unconstrained isotonic fit is the isotonic fit with the bound ``C_1 >= 0``.
    """
    noisy_cum = np.asarray(noisy_cum, dtype=float)
    out = np.empty_like(noisy_cum)
    for r in range(noisy_cum.shape[0]):
        out[r] = isotonic_regression(noisy_cum[r], increasing=True).x
    return np.maximum(out, 0.0)


def round_half_up(x: np.ndarray) -> np.ndarray:
    """``floor(x + 1/2)`` as int64; monotone, so it keeps a non-decreasing vector so."""
    return np.floor(np.asarray(x, dtype=float) + 0.5).astype(np.int64)


@dataclass(frozen=True)
class CDPResult:
    """M_CDP output: the DP result plus the rounded local fits it started from."""

    dp: DPResult
    fitted: tuple[np.ndarray, ...]
    repaired: tuple[np.ndarray, ...]
    seconds: float


def cdp_postprocess(tree: RegionTree, noisy_cum: Sequence[np.ndarray], total: int,
                    weights: Sequence[float] | None = None,
                    halfwidths: Sequence[int] | None = None,
                    progress: Progress | None = None) -> CDPResult:
    """M_CDP post-processing of noisy per-region cumulative histograms.

    Args:
        tree: the region tree.
        noisy_cum: per level, ``(regions, buckets)`` noisy cumulative vectors.
        total: the public n.
        weights: per-level weights of the final M_DP step.
        halfwidths: per-level M_DP windows in counts (None: full domains).
        progress: passed to the M_DP step.

    Returns:
        The consistent integer hierarchy (``.dp.levels``) and the intermediate vectors.
    """
    start = time.perf_counter()
    fitted = tuple(isotonic_fit(a) for a in noisy_cum)
    repaired = tuple(decumulate(round_half_up(f)) for f in fitted)
    dp = dp_postprocess(tree, repaired, total, weights, halfwidths, progress=progress)
    return CDPResult(dp, fitted, repaired, time.perf_counter() - start)


# ----- the chain (M_CDP*) -------------------------------------------------------------------
@dataclass(frozen=True)
class Chain:
    """The post-order chain of T' (without the dummy root, which comes last).

    Attributes:
        levels, regions, sizes: per chain node, its tree level, region index and bucket.
        tied: per chain node, True when it is internal (it equals its predecessor, its last
            child); False for ``>=`` links. The dummy root (not stored) is always tied.
    """

    levels: np.ndarray
    regions: np.ndarray
    sizes: np.ndarray
    tied: np.ndarray

    @property
    def length(self) -> int:
        """J - 1: chain nodes before the dummy root."""
        return len(self.levels)


def build_chain(tree: RegionTree, k: int) -> Chain:
    """The post-order chain: size subtrees 1..k, each a post-order of the region tree."""
    levs, idxs = tree.postorder
    m = len(levs)
    return Chain(np.tile(levs, k), np.tile(idxs, k), np.repeat(np.arange(k), m),
                 np.tile(levs < tree.depth - 1, k))


def level_prefixes(levels: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per level, the size-major level-wide prefix sums ``(k, regions)``."""
    out = []
    for a in levels:
        a = np.asarray(a)
        out.append(np.cumsum(a.T.reshape(-1)).reshape(a.shape[1], a.shape[0]))
    return out


def chain_values(chain: Chain, prefixes: Sequence[np.ndarray]) -> np.ndarray:
    """The prefix value of every chain node (float), from per-level ``(k, regions)`` prefixes."""
    out = np.empty(chain.length)
    for lev, p in enumerate(prefixes):
        sel = chain.levels == lev
        out[sel] = np.asarray(p, dtype=float)[chain.sizes[sel], chain.regions[sel]]
    return out


def prefixes_from_cumulative(noisy_cum: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Level-wide prefixes formed from per-region cumulative vectors (post-processing).

    ``P(i, r) = sum_{r' <= r} C^{r'}_i + sum_{r' > r} C^{r'}_{i-1}``: each prefix sums one
    cumulative entry per region, so its noise variance is ``|R_l|`` times a region's.
    """
    return level_prefixes([decumulate(np.asarray(a, dtype=float)) for a in noisy_cum])


def decode_chain(tree: RegionTree, k: int, chain: Chain, prefix: np.ndarray
                 ) -> list[np.ndarray]:
    """Counts from an integer chain solution: a leaf is its prefix minus its predecessor's.

    Args:
        prefix: ``(J - 1,)`` chain values (the dummy root's n is implied).
    """
    prev = np.concatenate([[0], prefix[:-1]])
    leaf = chain.levels == tree.depth - 1
    counts = np.zeros((tree.num_leaves, k), dtype=np.int64)
    counts[chain.regions[leaf], chain.sizes[leaf]] = (prefix - prev)[leaf]
    levels = [counts]
    for lev in range(tree.depth - 2, -1, -1):
        levels.append(tree.aggregate(levels[-1], lev))
    return levels[::-1]


@dataclass(frozen=True)
class ChainResult:
    """The M_CDP* optimum: chain values, decoded counts, objective, solver facts."""

    prefix: np.ndarray
    levels: tuple[np.ndarray, ...]
    objective: float
    solver: str
    certified: bool
    seconds: float


def chain_objective(prefix: np.ndarray, noisy: np.ndarray, weights: np.ndarray) -> float:
    """Weighted squared distance ``sum_j w_j (P^_j - P~_j)**2`` (Eq. C6)."""
    return float(np.sum(weights * (np.asarray(prefix, float) - noisy) ** 2))


def chain_postprocess(tree: RegionTree, k: int, noisy_prefix: np.ndarray, total: int,
                      weights: np.ndarray | None = None, solver: str = "auto",
                      halfwidths: np.ndarray | None = None, max_widen: int = 3,
                      progress: Progress | None = None) -> ChainResult:
    """Solve Model 3 (C6-C10) exactly along the post-order chain.

    Args:
        tree: the region tree (leaves at equal depth).
        k: size buckets.
        noisy_prefix: ``(J - 1,)`` noisy level-wide prefixes in chain order.
        total: the public n (the dummy root's value).
        weights: ``(J - 1,)`` least-squares weights (default 1).
        solver: ``dp`` (Eq. 8), ``isotonic`` (exact O(J)) or ``auto`` (dp when the
            windows are small enough, see :data:`CHAIN_DP_CELLS`).
        halfwidths: ``(J - 1,)`` DP window half-widths in counts (None: ``[0, n]``).
        max_widen: how often the DP doubles uncertified windows.
        progress: reports chain progress; cancellable.
    """
    start = time.perf_counter()
    chain = build_chain(tree, k)
    y = np.asarray(noisy_prefix, dtype=float)
    if y.shape != (chain.length,):
        raise SpecError(f"noisy_prefix: expected {chain.length} chain values, got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise SpecError("noisy_prefix: values must be finite")
    w = np.ones(chain.length) if weights is None else np.asarray(weights, dtype=float)
    if solver not in CHAIN_SOLVERS:
        raise SpecError(f"chain solver: unknown {solver!r}; allowed: {', '.join(CHAIN_SOLVERS)}")
    if solver == "auto":
        width = total + 1 if halfwidths is None else 2 * float(np.max(halfwidths)) + 1
        solver = "dp" if chain.length * min(width, total + 1) <= CHAIN_DP_CELLS else "isotonic"
    if solver == "dp":
        prefix, certified = _chain_dp(y, chain.tied, w, int(total), halfwidths, max_widen,
                                      progress)
    else:
        prefix, certified = _chain_isotonic(y, chain.tied, w, int(total)), True
    levels = decode_chain(tree, k, chain, prefix)
    return ChainResult(prefix, tuple(levels), chain_objective(prefix, y, w), solver,
                       certified, time.perf_counter() - start)


def _chain_isotonic(y: np.ndarray, tied: np.ndarray, w: np.ndarray, total: int
                    ) -> np.ndarray:
    """Exact integer optimum: pool ties, weighted PAVA, clip to [0, n], round half up."""
    block = np.cumsum(~tied)  # a new block starts at every '>=' link
    block -= block[0]
    nb = int(block[-1]) + 1
    bw = np.bincount(block, weights=w, minlength=nb)
    by = np.bincount(block, weights=w * y, minlength=nb)
    # the dummy root (value n) is tied to the last chain node: the last block is pinned
    free = nb - 1
    fit = np.full(nb, float(total))
    if free:
        fit[:free] = isotonic_regression(by[:free] / bw[:free], weights=bw[:free],
                                         increasing=True).x
    values = round_half_up(np.clip(fit, 0.0, total))
    return values[block]


def _chain_dp(y: np.ndarray, tied: np.ndarray, w: np.ndarray, total: int,
              halfwidths: np.ndarray | None, max_widen: int, progress: Progress | None
              ) -> tuple[np.ndarray, bool]:
    """Eq. 8 along the chain with windows; doubles uncertified windows."""
    h = None if halfwidths is None else np.maximum(np.ceil(halfwidths), 1).astype(np.int64)
    for attempt in range(max_widen + 1):
        if h is not None and np.all(h >= total):
            h = None
        out = _chain_dp_pass(y, tied, w, total, h, progress)
        if out is not None and (out[1] or h is None or attempt == max_widen):
            return out
        if h is None:
            raise SpecError("chain: no feasible hierarchy (cannot happen with full domains)")
        h = 2 * h
    raise AssertionError("unreachable")


def _chain_dp_pass(y: np.ndarray, tied: np.ndarray, w: np.ndarray, total: int,
                   h: np.ndarray | None, progress: Progress | None
                   ) -> tuple[np.ndarray, bool] | None:
    J1 = len(y)
    if h is None:
        own_lo = np.zeros(J1, dtype=np.int64)
        own_hi = np.full(J1, total, dtype=np.int64)
    else:
        centre = np.clip(np.rint(y), 0, total).astype(np.int64)
        own_lo, own_hi = np.maximum(centre - h, 0), np.minimum(centre + h, total)
    lo = np.empty(J1, dtype=np.int64)
    hi = np.empty(J1, dtype=np.int64)
    argmin = np.empty(J1, dtype=np.int64)
    prev: np.ndarray | None = None
    for j in range(J1):
        a, b = int(own_lo[j]), int(own_hi[j])
        if j == 0:
            a, b = max(a, 0), b
        elif tied[j]:
            pa, pb = int(lo[j - 1]), int(hi[j - 1])
            if b < pa or a > pb:  # the window misses the predecessor's: take its domain
                a, b = pa, pb
            else:
                a, b = max(a, pa), min(b, pb)
        else:
            pa = int(lo[j - 1])
            if b < pa:  # the window lies below everything reachable: move it up
                a, b = pa, min(pa + (b - a), total)
            else:
                a = max(a, pa)
        v = np.arange(a, b + 1)
        own = w[j] * (v - y[j]) ** 2
        if j == 0:
            table = own
        elif tied[j]:
            table = own + prev[v - lo[j - 1]]
        else:
            m = int(argmin[j - 1])
            table = own + prev[np.minimum(v, m) - lo[j - 1]]
        lo[j], hi[j] = a, b
        argmin[j] = a + int(np.argmin(table))  # smallest minimiser (P4 tie-break)
        prev = table
        if progress is not None and j % 4096 == 0:
            report(progress, j, 0.0, "chain DP")
    if not lo[J1 - 1] <= total <= hi[J1 - 1]:  # the dummy root equals the last node: n
        return None
    prefix = np.empty(J1, dtype=np.int64)
    prefix[J1 - 1] = total
    for j in range(J1 - 1, 0, -1):
        prefix[j - 1] = prefix[j] if tied[j] else min(prefix[j], argmin[j - 1])
    if h is None:
        return prefix, True
    edge = ((prefix == own_lo) & (own_lo > 0)) | ((prefix == own_hi) & (own_hi < total))
    return prefix, not bool(np.any(edge))
