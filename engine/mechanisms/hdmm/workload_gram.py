"""The workload Gram ``V = W^T W`` as OPT_0's p-Identity objective uses it: its diagonal and
the product ``X V`` for a p x n array X, with the structure that makes that product cheap
(semiseparable, Kronecker), detected exactly from V or known from the workload.
"""

from __future__ import annotations

import numpy as np

from engine.mechanisms.hdmm.structure import ProductUnion


class WorkloadGram:
    """The workload Gram V as the p-Identity objective uses it: its diagonal and ``X V``.

    ``X V`` (X: p x n) is a dense product, O(p n**2), unless V has one of two structures:

    * *semiseparable*: its lower triangle has rank one, ``V_ij = a_i b_j`` for ``i >= j``.
      Prefixes (``V_ij = n - max(i, j)``) and all ranges (``V_ij = (min(i, j) + 1) (n -
      max(i, j))``) are, and so is any sum of them with weights; there row k of ``X V`` is
      ``a_i sum_{j < i} b_j x_j + b_i sum_{j >= i} a_j x_j``: two running sums, O(p n);
    * a weighted sum of Kronecker products ``sum_t w_t G_t1 x ... x G_td`` (a union of
      product workloads): each term is applied one attribute at a time, O(p n sum_i n_i).

    Either way the numbers are the dense product's up to round-off.

    Args:
        V: the n x n workload Gram (symmetric).
        generators: ``(a, b)`` of a semiseparable V.
        kronecker: ``[(w_t, [G_t1, ..., G_td])]`` with ``V = sum_t w_t kron(G_t1, ...)``.
    """

    def __init__(self, V: np.ndarray,
                 generators: tuple[np.ndarray, np.ndarray] | None = None,
                 kronecker: list[tuple[float, list[np.ndarray]]] | None = None) -> None:
        self.dense = V
        self.n = int(V.shape[0])
        self.diag = np.diag(V).copy()
        self.generators = generators
        self.kronecker = kronecker

    @classmethod
    def of(cls, V: np.ndarray) -> WorkloadGram:
        """V with its semiseparable generators when it has them (checked exactly, O(n**2))."""
        return cls(V, semiseparable_generators(V))

    @classmethod
    def of_union(cls, V: np.ndarray, union: ProductUnion) -> WorkloadGram:
        """V of a union of products, with its Kronecker terms where they are cheaper than a
        dense product (more than one attribute, fewer summed factor sizes than cells)."""
        sizes = sum(sum(g.shape[0] for g in union.product_grams(j)) for j in range(union.k))
        if union.d < 2 or sizes >= V.shape[0]:
            return cls.of(V)
        terms = [(float(union.weights2[j]), union.product_grams(j)) for j in range(union.k)]
        return cls(V, kronecker=terms)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        """``X V`` for a p x n array X."""
        if self.kronecker is not None:
            return sum((w * _kron_right(X, factors) for w, factors in self.kronecker),
                       np.zeros_like(X))
        if self.generators is None:
            return X @ self.dense
        a, b = self.generators
        below = np.zeros_like(X)  # sum_{j < i} b_j x_j
        np.cumsum((X * b)[:, :-1], axis=1, out=below[:, 1:])
        above = np.cumsum((X * a)[:, ::-1], axis=1)[:, ::-1]  # sum_{j >= i} a_j x_j
        return a * below + b * above


def _kron_right(X: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """``X kron(G_1, ..., G_d)`` (symmetric factors), one attribute axis at a time."""
    p = X.shape[0]
    T = X.reshape((p, *(g.shape[0] for g in factors)))
    for axis, g in enumerate(factors, start=1):
        T = np.moveaxis(np.tensordot(T, g, axes=([axis], [0])), -1, axis)
    return T.reshape(p, -1)


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

