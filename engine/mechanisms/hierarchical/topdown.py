"""TopDown: the US Census 2018 end-to-end-test style baseline, level by level (spec §4).

Noisy histograms are measured at every level like M_DP. Then, from the top: the national
vector is projected onto ``{x >= 0, sum x = n}`` and rounded with largest-remainder rounding
(which keeps the sum); for every parent region and size, its children's noisy values are
projected onto ``{x >= 0, sum x = parent value}`` and rounded the same way. The output is
consistent and valid, but greedy: a level never sees the noisy data below it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.mechanisms.hierarchical.model import RegionTree
from engine.progress import Progress, report

#: decimals kept before largest-remainder rounding, so float noise cannot reorder ties
SNAP_DECIMALS = 9


def simplex_projection(y: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``y`` onto ``{x >= 0, sum x = target}``.

    Args:
        y: ``(rows, m)`` points.
        targets: ``(rows,)`` non-negative sums.
    """
    y = np.asarray(y, dtype=float)
    targets = np.asarray(targets, dtype=float)
    u = -np.sort(-y, axis=1)
    css = np.cumsum(u, axis=1) - targets[:, None]
    ind = np.arange(1, y.shape[1] + 1)
    cond = u - css / ind > 0
    rho = y.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = css[np.arange(len(y)), rho] / (rho + 1)
    out = np.maximum(y - theta[:, None], 0.0)
    out[targets <= 0] = 0.0
    return out


def largest_remainder(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Round rows of non-negative reals to integers with the given row sums.

    Floors every value, then gives the missing units to the largest remainders (ties to the
    lower index).
    """
    x = np.round(np.asarray(x, dtype=float), SNAP_DECIMALS)
    base = np.floor(x)
    deficit = (np.asarray(targets, dtype=np.int64) - base.sum(axis=1).astype(np.int64))
    order = np.argsort(-(x - base), axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(x.shape[1])[None, :].repeat(len(x), 0), axis=1)
    return (base + (ranks < deficit[:, None])).astype(np.int64)


@dataclass(frozen=True)
class TopDownResult:
    """TopDown output: per-level integer counts and the time taken."""

    levels: tuple[np.ndarray, ...]
    seconds: float


def topdown_postprocess(tree: RegionTree, noisy: Sequence[np.ndarray], total: int,
                        progress: Progress | None = None) -> TopDownResult:
    """Run TopDown on noisy per-level histograms.

    Args:
        tree: the region tree.
        noisy: per level, ``(regions, buckets)`` noisy values.
        total: the public n.
        progress: one report per parent region; cancellable.
    """
    start = time.perf_counter()
    root = np.asarray(noisy[0], dtype=float)
    x = simplex_projection(root, np.array([float(total)]))
    levels = [largest_remainder(x, np.array([total]))]
    step = 0
    for lev in range(tree.depth - 1):
        child_noisy = np.asarray(noisy[lev + 1], dtype=float)
        out = np.empty(child_noisy.shape, dtype=np.int64)
        for p in range(tree.level_sizes[lev]):
            span = tree.children(lev, p)
            rows = child_noisy[span.start:span.stop].T  # (sizes, children)
            target = levels[lev][p]
            proj = simplex_projection(rows, target.astype(float))
            out[span.start:span.stop] = largest_remainder(proj, target).T
            step += 1
            report(progress, step, 0.0, f"TopDown level {lev + 2}")
        levels.append(out)
    return TopDownResult(tuple(levels), time.perf_counter() - start)
