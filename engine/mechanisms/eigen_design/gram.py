"""The workload Gram ``W^T W`` as an implicit operator with fast products.

The randomized principal-vectors reduction only needs products ``G X`` with a few hundred
columns and the diagonal of G. For the 1-D blocks these cost O(n) per column instead of the
O(n**2) of a dense Gram:

* all ranges: ``G_ij = (min(i,j) + 1)(n - max(i,j))``, so ``(G x)_i = (n - i) S_i + (i+1) T_i``
  with running sums ``S_i = sum_{j <= i} (j+1) x_j`` and ``T_i = sum_{j > i} (n - j) x_j``;
* blocks with about n rows and O(n) products (prefix, suffix, fixed-width and circular
  ranges): ``W^T (W x)``;
* a permuted block: the base block's operator between the permutation and its inverse;
* identity and total: trivial.

Multi-attribute product terms are Kronecker products of these (``kmatvec``); a workload with
other terms falls back to the dense Gram.
"""

from __future__ import annotations

import numpy as np

from engine.linalg.matrix import Matrix, Ones, kmatvec
from engine.workloads.blocks import (
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    SuffixBlock,
    WidthRangeBlock,
)
from engine.workloads.workload import Workload

#: Blocks whose Gram product is W^T (W x) at O(n) cost (about n rows, cumulative-sum products).
_THROUGH_ROWS = (PrefixBlock, SuffixBlock, WidthRangeBlock, CircularRangeBlock)


class FactorGram(Matrix):
    """The Gram ``W^T W`` of one 1-D factor (a block or Total) as a fast implicit matrix."""

    def __init__(self, factor: Matrix) -> None:
        self.factor = factor
        self.n = int(factor.shape[1])
        self._dense: np.ndarray | None = None
        self.kind = self._kind(factor)
        if self.kind == "dense":
            self._dense = (factor.gram_array() if isinstance(factor, Block)
                           else factor.gram().dense())

    @staticmethod
    def _kind(f: Matrix) -> str:
        if isinstance(f, IdentityBlock) or f.is_identity():
            return "identity"
        if isinstance(f, Ones) and f.shape[0] == 1:
            return "total"
        if isinstance(f, AllRangeBlock):
            return "all_range"
        if isinstance(f, PermutedBlock):
            return "permuted"
        if isinstance(f, _THROUGH_ROWS) and f.shape[0] <= 4 * f.shape[1]:
            return "rows"
        return "dense"

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.kind == "identity":
            return x.copy()
        if self.kind == "total":
            return np.broadcast_to(x.sum(axis=0), x.shape).copy()
        if self.kind == "all_range":
            return _all_range_gram_apply(x)
        if self.kind == "permuted":
            f: PermutedBlock = self.factor  # type: ignore[assignment]
            z = np.empty_like(x)
            z[f.perm] = x
            return FactorGram(f.base).matvec(z)[f.perm]
        if self.kind == "rows":
            return self.factor.rmatvec(self.factor.matvec(x))
        return self._dense @ x

    rmatvec = matvec

    def diagonal(self) -> np.ndarray:
        """``diag(W^T W)``: the squared column norms (closed form for every block)."""
        if self.kind == "total":
            return np.ones(self.n)
        return self.factor.column_norms(2) ** 2

    def dense(self) -> np.ndarray:
        if self._dense is not None:
            return self._dense
        return self.matvec(np.eye(self.n))


def _all_range_gram_apply(x: np.ndarray) -> np.ndarray:
    """``G x`` for all ranges on n cells in O(n) per column (see the module docstring)."""
    n = x.shape[0]
    shape = (n,) + (1,) * (x.ndim - 1)
    ones_based = np.arange(1.0, n + 1.0).reshape(shape)     # j + 1
    remaining = np.arange(float(n), 0.0, -1.0).reshape(shape)  # n - j
    S = np.cumsum(x * ones_based, axis=0)                     # sum_{j <= i} (j+1) x_j
    right = x * remaining
    T = np.cumsum(right[::-1], axis=0)[::-1]
    T -= right                                                # sum_{j > i} (n-j) x_j
    S *= remaining
    T *= ones_based
    S += T
    return S


class GramOperator(Matrix):
    """``W^T W = sum_t w_t**2 kron_i V_i^t`` with fast per-factor products."""

    def __init__(self, workload: Workload) -> None:
        if not workload.is_product_union:
            raise ValueError("GramOperator: every term must be a Kronecker product")
        self.n = workload.domain.size
        self.terms = [(t.weight**2, [FactorGram(f) for f in t.full_factors()])
                      for t in workload.terms]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        out = None
        for w2, factors in self.terms:
            # one attribute: apply the factor directly (kmatvec would transpose the batch)
            part = factors[0].matvec(x) if len(factors) == 1 else kmatvec(factors, x)
            if w2 != 1.0:
                part *= w2
            out = part if out is None else out + part
        return out

    rmatvec = matvec

    def diagonal(self) -> np.ndarray:
        """``diag(W^T W)`` as a vector of n entries."""
        out = np.zeros(self.n)
        for w2, factors in self.terms:
            d = np.ones(1)
            for f in factors:
                d = np.kron(d, f.diagonal())
            out += w2 * d
        return out

    def trace(self) -> float:
        return float(self.diagonal().sum())


def gram_product(G: np.ndarray | Matrix, X: np.ndarray) -> np.ndarray:
    """``G @ X`` for a dense Gram or an implicit operator."""
    return G @ X if isinstance(G, np.ndarray) else G.matvec(X)


def gram_diagonal(G: np.ndarray | Matrix) -> np.ndarray:
    """``diag(G)`` for a dense Gram or a :class:`GramOperator`."""
    return np.diag(G).copy() if isinstance(G, np.ndarray) else G.diagonal()
