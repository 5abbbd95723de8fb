"""The dyadic tree of a stream and its causal efficient estimate.

Level h holds the intervals ``[k 2**h, (k+1) 2**h)`` that lie inside the n steps; a node is
measured when its last step ends. After step t the intervals of t's binary expansion cover
steps 1..t, and every node completed by then lies inside one of them. Honaker's bottom-up pass
gives, inside each such complete subtree, the minimum-variance unbiased estimate of its total
from all of its nodes (variance ``v_h = 1 / (1 + 1 / (2 v_{h-1}))``, ``v_0 = 1`` per unit
noise); the subtrees are disjoint, so the sum of their estimates is the best linear unbiased
estimate of the running total from the nodes completed by step t (Honaker 2015, section 3).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp


class DyadicTree:
    """The complete dyadic intervals of n steps, level by level (leaves first)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"DyadicTree: needs at least one step, got {n}")
        self.n = int(n)
        #: levels 0 .. floor(log2 n)
        self.levels = self.n.bit_length()
        self.counts = [self.n >> h for h in range(self.levels)]
        self.offsets = np.concatenate(([0], np.cumsum(self.counts))).astype(int)

    @property
    def nodes(self) -> int:
        """Number of measured intervals."""
        return int(self.offsets[-1])

    def matrix(self) -> sp.csr_array:
        """Nodes x steps 0/1 matrix, level 0 (single steps) first."""
        rows, cols = [], []
        for h, count in enumerate(self.counts):
            width = 1 << h
            node = np.repeat(np.arange(count), width)
            rows.append(self.offsets[h] + node)
            cols.append(np.arange(count * width))
        r, c = np.concatenate(rows), np.concatenate(cols)
        return sp.csr_array((np.ones(r.size), (r, c)), shape=(self.nodes, self.n))

    @cached_property
    def level_variances(self) -> np.ndarray:
        """Unit variance of the efficient estimate of a level-h subtree total."""
        v = np.ones(self.levels)
        for h in range(1, self.levels):
            v[h] = 1.0 / (1.0 + 1.0 / (2.0 * v[h - 1]))
        return v

    def _bits(self) -> tuple[np.ndarray, list[np.ndarray]]:
        t = np.arange(1, self.n + 1)
        return t, [((t >> h) & 1).astype(bool) for h in range(self.levels)]

    def step_variances(self) -> np.ndarray:
        """Unit variance of the causal estimate of each running total (steps 1..n)."""
        _, bits = self._bits()
        return sum(b * v for b, v in zip(bits, self.level_variances, strict=True))

    def estimate(self, y: np.ndarray) -> np.ndarray:
        """The causal efficient estimates of the running totals from the noisy node answers
        ``y`` (one per node, in :meth:`matrix` row order)."""
        y = np.asarray(y, dtype=float)
        weights = 1.0 / (2.0 * self.level_variances)
        estimates = [y[: self.counts[0]]]
        for h in range(1, self.levels):
            count = self.counts[h]
            children = estimates[-1][: 2 * count].reshape(count, 2).sum(axis=1)
            own = y[self.offsets[h]: self.offsets[h + 1]]
            estimates.append((own + weights[h - 1] * children) / (1.0 + weights[h - 1]))
        t, bits = self._bits()
        out = np.zeros(self.n)
        for h, bit in enumerate(bits):
            index = (t[bit] >> h) - 1
            out[bit] += estimates[h][index]
        return out
