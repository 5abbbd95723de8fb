"""The workload Gram ``V = W^T W`` as OPT_0's p-Identity objective uses it: its diagonal and
the product ``X V`` for a p x n array X, with the structure that makes that product cheap.

The objective's only product with an n x n matrix is ``X V`` (spec section 3.3, with
Woodbury's p x p solve for the rest), so with a structured V one evaluation costs
O(p n + p**2 n) instead of O(p n**2). The structures, each exact (the dense product's numbers
up to round-off):

* :class:`SemiseparableGram`: the lower triangle has rank one, ``V_ij = a_i b_j`` for
  ``i >= j``. Prefixes (``V_ij = n - max(i, j)``), all ranges (``V_ij = (min(i, j) + 1) (n -
  max(i, j))``), the total and weighted sums of them are; row k of ``X V`` is ``a_i sum_{j <
  i} b_j x_j + b_i sum_{j >= i} a_j x_j``: two running sums, O(p n).
* :class:`WindowGram`: width-w ranges, ``V = W^T W`` with W the (n - w + 1) x n banded
  Toeplitz matrix of sliding windows; ``X W^T`` and ``(X W^T) W`` are window sums, each a
  difference of running sums: O(p n) (exact where an FFT would be O(p n log n)).
* :class:`PermutedGram`: another Gram with its cells reordered, ``V_ij = B_{q_i q_j}``;
  the permutation carries through: ``X V = (Y B)[:, q]`` with ``Y[:, q] = X``.
* :class:`KroneckerGram`: a weighted sum of Kronecker products ``sum_t w_t G_t1 x ... x
  G_td`` (a union of product workloads), applied one attribute at a time: O(p n sum_i n_i).
* :class:`DiagonalGram`: identity queries; :class:`SumGram`: a weighted sum of Grams (e.g.
  a 1-D union of ranges, windows and identity).

:class:`WorkloadGram` itself is the explicit dense path for Grams without structure.
:func:`workload_gram` builds the structured Gram of a workload from its blocks, without
forming V (so OPT_0's loss runs on domains where V would not fit in memory);
:meth:`WorkloadGram.of` detects a semiseparable V from its entries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from engine.mechanisms.hdmm.structure import ProductUnion
from engine.workloads.blocks import (
    AllRangeBlock,
    Block,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    TotalBlock,
    WidthRangeBlock,
)
from engine.workloads.workload import Workload

#: Multiply-adds of one p-Identity evaluation besides ``X V``, in units of ``p**2 n``: the
#: products ``Theta Theta^T`` (half), ``R Theta``, ``(Theta C) Theta^T``, ``(.) R Theta`` and
#: ``R (.)`` (see :func:`~engine.mechanisms.hdmm.laplace_opt0.pidentity_loss_grad`).
WOODBURY_PRODUCTS = 4.5


class WorkloadGram:
    """An explicit n x n workload Gram: its diagonal and the dense product ``X V``.

    Args:
        V: the n x n workload Gram (symmetric).
    """

    def __init__(self, V: np.ndarray) -> None:
        self.dense = np.asarray(V, dtype=float)
        self.n = int(self.dense.shape[0])
        self.diag = np.diag(self.dense).copy()

    @classmethod
    def of(cls, V: np.ndarray) -> WorkloadGram:
        """V with its semiseparable generators when it has them (checked exactly, O(n**2));
        otherwise the dense path."""
        generators = semiseparable_generators(V)
        if generators is None:
            return cls(V)
        return SemiseparableGram(*generators)

    @classmethod
    def of_union(cls, V: np.ndarray, union: ProductUnion) -> WorkloadGram:
        """V of a union of products, with its Kronecker terms where they are cheaper than a
        dense product (more than one attribute, fewer summed factor sizes than cells)."""
        sizes = sum(sum(g.shape[0] for g in union.product_grams(j)) for j in range(union.k))
        if union.d < 2 or sizes >= V.shape[0]:
            return cls.of(V)
        terms = [(float(union.weights2[j]), union.product_grams(j)) for j in range(union.k)]
        return KroneckerGram(terms)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        """``X V`` for a p x n array X."""
        return X @ self.dense

    def cell_order(self) -> np.ndarray | None:
        """The cells in the order along which the workload is one-dimensional (neighbouring
        cells are asked about together), or None when that is not known (a dense Gram, a
        product of several attributes). It places the blocks of
        :func:`~engine.mechanisms.hdmm.laplace_opt0.hierarchical_start`."""
        return None

    def product_work(self, p: int) -> float:
        """Multiply-adds of one ``X V`` with X p x n."""
        return float(p) * self.n * self.n

    def evaluation_work(self, p: int) -> float:
        """Multiply-adds of one p-Identity loss and gradient with p extra queries.

        For the dense path this is the ``p n**2`` of ``X V`` alone (the unit in which the
        restart rule's budgets are calibrated); structured Grams add the Woodbury products.
        """
        return self.product_work(p)


class StructuredGram(WorkloadGram, ABC):
    """Base of the structured Grams: V is never stored; products cost O(p n) or so."""

    def __init__(self, n: int, diag: np.ndarray) -> None:
        self.n = int(n)
        self.diag = np.asarray(diag, dtype=float)

    @abstractmethod
    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        """``X V`` for a p x n array X."""

    def product_work(self, p: int) -> float:
        return 4.0 * p * self.n

    def evaluation_work(self, p: int) -> float:
        return self.product_work(p) + WOODBURY_PRODUCTS * p * p * self.n


class DiagonalGram(StructuredGram):
    """``V = diag(d)`` (identity queries, weighted): ``X V`` scales the columns.

    Args:
        d: the diagonal (length n).
    """

    def __init__(self, d: np.ndarray) -> None:
        super().__init__(np.asarray(d).size, d)

    def cell_order(self) -> np.ndarray:
        return np.arange(self.n)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        return X * self.diag

    def product_work(self, p: int) -> float:
        return float(p) * self.n


class SemiseparableGram(StructuredGram):
    """``V_ij = a_i b_j`` for ``i >= j`` (and symmetric): two running sums per product.

    Args:
        a, b: the generators (length n).
    """

    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        super().__init__(a.size, a * b)
        self.generators = (a, b)

    def cell_order(self) -> np.ndarray:
        return np.arange(self.n)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        a, b = self.generators
        below = np.zeros_like(X)  # sum_{j < i} b_j x_j
        np.cumsum((X * b)[:, :-1], axis=1, out=below[:, 1:])
        above = np.cumsum((X * a)[:, ::-1], axis=1)[:, ::-1]  # sum_{j >= i} a_j x_j
        return a * below + b * above


class WindowGram(StructuredGram):
    """``V = W^T W`` for the sliding windows of ``width`` cells (HDMM's width-k ranges).

    Args:
        n: cells.
        width: cells per window (1 <= width <= n).
    """

    def __init__(self, n: int, width: int) -> None:
        if not 1 <= width <= n:
            raise ValueError(f"WindowGram: width must be in [1, {n}], got {width}")
        i = np.arange(n)
        # windows start at r = 0 .. n - width; cell i lies in those with i - width < r <= i
        super().__init__(n, (np.minimum(i, n - width) - np.maximum(0, i - width + 1) + 1
                             ).astype(float))
        self.width = int(width)

    def cell_order(self) -> np.ndarray:
        return np.arange(self.n)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        n, w = self.n, self.width
        p = X.shape[0]
        C = np.zeros((p, n + 1))
        np.cumsum(X, axis=1, out=C[:, 1:])
        Z = C[:, w:] - C[:, :n - w + 1]  # X W^T: the window sums, p x (n - w + 1)
        D = np.zeros((p, n - w + 2))
        np.cumsum(Z, axis=1, out=D[:, 1:])
        i = np.arange(n)
        # (Z W)_i = sum of Z_r over the windows r = max(0, i - w + 1) .. min(i, n - w)
        return D[:, np.minimum(i, n - w) + 1] - D[:, np.maximum(0, i - w + 1)]

    def product_work(self, p: int) -> float:
        return 6.0 * p * self.n


class PermutedGram(StructuredGram):
    """``V_ij = B_{q_i q_j}``: the Gram ``base`` with its cells reordered by ``perm = q``.

    Args:
        base: the Gram B of the unpermuted workload.
        perm: the permutation q (``V = B[ix_(q, q)]``, as :class:`PermutedBlock` defines it).
    """

    def __init__(self, base: WorkloadGram, perm: np.ndarray) -> None:
        q = np.asarray(perm, dtype=np.intp)
        if sorted(q.tolist()) != list(range(base.n)):
            raise ValueError("PermutedGram: perm must be a permutation of the cells")
        super().__init__(base.n, base.diag[q])
        self.base, self.perm = base, q

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        Y = np.empty_like(X)
        Y[:, self.perm] = X
        return self.base.right_multiply(Y)[:, self.perm]

    def cell_order(self) -> np.ndarray | None:
        base = self.base.cell_order()
        if base is None:
            return None
        where = np.empty_like(self.perm)  # where[c]: the cell of V that is base cell c
        where[self.perm] = np.arange(self.n)
        return where[base]

    def product_work(self, p: int) -> float:
        return self.base.product_work(p) + 2.0 * p * self.n


class KroneckerGram(StructuredGram):
    """``V = sum_t w_t kron(G_t1, ..., G_td)`` (symmetric factors), one attribute at a time.

    Args:
        terms: ``[(w_t, [G_t1, ..., G_td])]``.
    """

    def __init__(self, terms: list[tuple[float, list[np.ndarray]]]) -> None:
        diag = sum(w * _kron_diag(factors) for w, factors in terms)
        super().__init__(int(np.asarray(diag).size), diag)
        self.terms = terms

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        return sum((w * _kron_right(X, factors) for w, factors in self.terms),
                   np.zeros_like(X))

    def product_work(self, p: int) -> float:
        return float(sum(p * self.n * sum(g.shape[0] for g in factors)
                         for _, factors in self.terms))


class SumGram(StructuredGram):
    """``V = sum_t w_t V_t`` of other Grams (structured or not).

    Args:
        terms: ``[(w_t, V_t)]`` with every ``V_t`` on the same n cells.
    """

    def __init__(self, terms: list[tuple[float, WorkloadGram]]) -> None:
        n = terms[0][1].n
        if any(g.n != n for _, g in terms):
            raise ValueError("SumGram: every term must have the same number of cells")
        super().__init__(n, sum(w * g.diag for w, g in terms))
        self.terms = terms

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        return sum((w * g.right_multiply(X) for w, g in self.terms), np.zeros_like(X))

    def cell_order(self) -> np.ndarray | None:
        """The terms' common order (None when two terms order the cells differently)."""
        orders = [g.cell_order() for _, g in self.terms]
        first = orders[0]
        if first is None or any(o is None or not np.array_equal(o, first) for o in orders):
            return None
        return first

    def product_work(self, p: int) -> float:
        return float(sum(g.product_work(p) for _, g in self.terms))


def _kron_diag(factors: list[np.ndarray]) -> np.ndarray:
    out = np.ones(1)
    for g in factors:
        out = np.kron(out, np.diag(g))
    return out


def _kron_right(X: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """``X kron(G_1, ..., G_d)`` (symmetric factors), one attribute axis at a time."""
    p = X.shape[0]
    T = X.reshape((p, *(g.shape[0] for g in factors)))
    for axis, g in enumerate(factors, start=1):
        T = np.moveaxis(np.tensordot(T, g, axes=([axis], [0])), -1, axis)
    return T.reshape(p, -1)


def block_gram(block: Block) -> WorkloadGram | None:
    """The structured Gram of a one-attribute block, or None when it has none here
    (explicit rows, circular ranges...: the dense path)."""
    n = block.shape[1]
    i = np.arange(n, dtype=float)
    if isinstance(block, IdentityBlock):
        return DiagonalGram(np.ones(n))
    if isinstance(block, PrefixBlock):  # V_ij = n - max(i, j)
        return SemiseparableGram(n - i, np.ones(n))
    if isinstance(block, AllRangeBlock):  # V_ij = (min(i, j) + 1) (n - max(i, j))
        return SemiseparableGram(n - i, i + 1.0)
    if isinstance(block, TotalBlock):  # V = 1 1^T
        return SemiseparableGram(np.ones(n), np.ones(n))
    if isinstance(block, WidthRangeBlock):
        return WindowGram(n, block.width)
    if isinstance(block, PermutedBlock):
        base = block_gram(block.base)
        return None if base is None else PermutedGram(base, block.perm)
    return None


def workload_gram(workload: Workload) -> WorkloadGram | None:
    """The structured Gram of a one-attribute workload whose every term is a block with a
    structure (prefixes, all ranges, width-w ranges, the total, permutations of them), or
    None. V is not formed."""
    if len(workload.domain) != 1 or not workload.is_product_union:
        return None
    terms: list[tuple[float, WorkloadGram]] = []
    for weight, factors in workload.products():
        (block,) = factors
        gram = block_gram(block) if isinstance(block, Block) else None
        if gram is None:
            return None
        terms.append((float(weight) ** 2, gram))
    if len(terms) == 1 and terms[0][0] == 1.0:
        return terms[0][1]
    return SumGram(terms)


def semiseparable_generators(V: np.ndarray, rtol: float = 1e-12
                             ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` with ``V_ij = a_i b_j`` for every ``i >= j`` (to ``rtol`` of max |V|), or None.

    With ``b_0 = 1`` the generators are fixed by the first column and the diagonal:
    ``a = V[:, 0]``, ``b = diag V / a``; every lower-triangle entry is then compared, in
    blocks of rows so that no second n x n array is formed.
    """
    n = V.shape[0]
    a = V[:, 0].astype(float)
    if n < 2 or np.any(a == 0.0) or not np.all(np.isfinite(a)):
        return None
    b = np.diag(V) / a
    tol = rtol * float(np.abs(V).max())
    rows = max(1, 2**20 // n)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = V[start:stop, :stop] - a[start:stop, None] * b[None, :stop]
        # only j <= i counts: entries right of the diagonal belong to V's upper triangle
        block[np.triu_indices(stop - start, k=start + 1, m=stop)] = 0.0
        if float(np.abs(block).max()) > tol:
            return None
    return a, b
