"""The implicit-matrix base class and its generic compositions.

Conventions: a matrix maps a data vector ``x`` (length ``shape[1]``) to answers
(length ``shape[0]``). ``matvec`` also accepts a 2-D array whose columns are vectors.
Kronecker products use numpy C order: factor 1 varies slowest, as ``np.kron``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from engine.linalg.pinv import psd_pinv

#: Largest number of entries ``dense()`` will materialise (8 bytes each: 400 MB).
DENSE_GUARD = 50_000_000


class Matrix:
    """An implicit real matrix.

    Subclasses implement ``shape``, ``matvec`` and ``rmatvec``; the generic defaults of the
    other methods go through ``dense()`` and are overridden where a closed form exists.
    """

    #: numpy must not try to broadcast over us with ``ndarray @ Matrix``.
    __array_ufunc__ = None

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) as exact Python ints (may exceed 2**63 for implicit products)."""
        raise NotImplementedError(type(self).__name__ + " must define shape")

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``self @ x`` for a vector or a 2-D array of column vectors."""
        raise NotImplementedError(type(self).__name__ + " must define matvec")

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        """``self.T @ y`` for a vector or a 2-D array of column vectors."""
        raise NotImplementedError(type(self).__name__ + " must define rmatvec")

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return self.matvec(np.asarray(x))

    @property
    def size(self) -> int:
        """Number of entries (rows times columns)."""
        return self.shape[0] * self.shape[1]

    def check_dense(self, what: str = "matrix") -> None:
        """Raise a ValueError naming the size when ``dense()`` would exceed the guard."""
        if self.size > DENSE_GUARD:
            m, n = self.shape
            raise ValueError(
                f"refusing to materialise a {m:,} x {n:,} {what} ({self.size:,} entries > "
                f"guard {DENSE_GUARD:,}); use the implicit operations instead"
            )

    def dense(self) -> np.ndarray:
        """The explicit matrix, only below ``DENSE_GUARD`` entries."""
        self.check_dense()
        return self.matvec(np.eye(self.shape[1]))

    def gram(self) -> Matrix:
        """``self.T @ self`` as an (implicit) n x n matrix."""
        self.check_dense("Gram")
        n = self.shape[1]
        if n * n > DENSE_GUARD:
            raise ValueError(f"refusing to form a {n:,} x {n:,} Gram matrix explicitly")
        d = self.dense()
        return PsdDense(d.T @ d)

    def column_norms(self, p: int) -> np.ndarray:
        """Per-column L1 (p=1) or L2 (p=2) norms."""
        d = self.dense()
        return np.abs(d).sum(axis=0) if p == 1 else np.sqrt((d * d).sum(axis=0))

    def sensitivity(self, p: int) -> float:
        """Largest column norm: the L1 (p=1) or L2 (p=2) sensitivity of ``x -> A x``."""
        return float(self.column_norms(p).max())

    def fro2(self) -> float:
        """Squared Frobenius norm."""
        d = self.dense()
        return float((d * d).sum())

    def trace(self) -> float:
        """Trace of a square matrix."""
        return float(np.trace(self.dense()))

    def is_total(self) -> bool:
        """True for the single all-ones row (the 'total' query)."""
        return False

    def is_identity(self) -> bool:
        """True for an identity matrix."""
        return False

    @property
    def T(self) -> Matrix:
        """The transpose (structured where the subclass knows how, else a wrapper)."""
        return Transpose(self)

    def pinv(self) -> Matrix:
        """The Moore-Penrose pseudo-inverse ``A^+`` (columns x rows).

        Structured subclasses return a structured (implicit) pseudo-inverse; the default
        computes it explicitly, as least squares with numpy's default cutoff, and raises a
        ValueError naming the size above ``DENSE_GUARD`` entries.
        """
        self.check_dense("matrix to pseudo-invert")
        m = self.shape[0]
        return Dense(np.linalg.lstsq(self.dense(), np.eye(m), rcond=None)[0])


class Dense(Matrix):
    """An explicit numpy matrix."""

    def __init__(self, array: np.ndarray) -> None:
        a = np.asarray(array, dtype=float)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2:
            raise ValueError(f"Dense: expected a 2-D array, got shape {a.shape}")
        self.array = a

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.array.shape[0]), int(self.array.shape[1]))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.array @ x

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self.array.T @ y

    def dense(self) -> np.ndarray:
        return self.array

    def gram(self) -> Matrix:
        return PsdDense(self.array.T @ self.array)

    @property
    def T(self) -> Matrix:
        return Dense(self.array.T)

    def trace(self) -> float:
        return float(np.trace(self.array))

    def is_total(self) -> bool:
        a = self.array
        return a.shape[0] == 1 and bool(np.all(a == 1.0))

    def is_identity(self) -> bool:
        a = self.array
        return a.shape[0] == a.shape[1] and bool(np.array_equal(a, np.eye(a.shape[0])))

    def __repr__(self) -> str:
        return f"Dense({self.shape[0]}x{self.shape[1]})"


class PsdDense(Dense):
    """An explicit symmetric positive semi-definite matrix, typically a Gram ``A^T A``.

    Its pseudo-inverse drops eigenvalues below ``engine.linalg.pinv.RCOND`` relative, or is
    computed by ``inverse`` when the caller knows an exact route (a triangular solve, a
    Woodbury identity) that avoids an n x n eigendecomposition.
    """

    def __init__(self, array: np.ndarray,
                 inverse: Callable[[], np.ndarray] | None = None) -> None:
        super().__init__(array)
        if self.array.shape[0] != self.array.shape[1]:
            raise ValueError(f"PsdDense: expected a square array, got shape {self.array.shape}")
        self.inverse = inverse

    @property
    def T(self) -> Matrix:
        return self

    def pinv(self) -> Matrix:
        return PsdDense(self.inverse() if self.inverse is not None else psd_pinv(self.array))


class UpperTriangular(Dense):
    """A square upper-triangular matrix of full rank (e.g. a Cholesky factor ``L^T``):
    its pseudo-inverse is the inverse, by one triangular solve."""

    def __init__(self, array: np.ndarray) -> None:
        super().__init__(array)
        a = self.array
        if a.shape[0] != a.shape[1] or np.any(np.tril(a, -1)):
            raise ValueError(f"UpperTriangular: expected a square upper-triangular array, "
                             f"got shape {a.shape}")
        if not np.all(np.diag(a)):
            raise ValueError("UpperTriangular: a zero on the diagonal (the matrix is singular)")

    @cached_property
    def inverse(self) -> np.ndarray:
        """``A^-1`` by one triangular solve (computed once: the Gram's inverse reuses it)."""
        n = self.shape[0]
        return sla.solve_triangular(self.array, np.eye(n), lower=False, check_finite=False)

    def pinv(self) -> Matrix:
        return Dense(self.inverse)

    def gram(self) -> Matrix:
        """``A^T A``, whose inverse is ``A^-1 A^-T`` (exact, no eigendecomposition)."""
        return ImplicitGram(self)


class ImplicitGram(Matrix):
    """``A^T A`` kept as its factor A: products go through A, the explicit matrix is formed
    only when asked for, and the pseudo-inverse is ``A^+ (A^+)^T`` from A's own ``pinv()``
    (exact where A's is, e.g. a triangular solve)."""

    def __init__(self, factor: Matrix) -> None:
        self.factor = factor

    @property
    def shape(self) -> tuple[int, int]:
        n = self.factor.shape[1]
        return (n, n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.factor.rmatvec(self.factor.matvec(x))

    rmatvec = matvec

    def dense(self) -> np.ndarray:
        self.check_dense()
        d = self.factor.dense()
        return d.T @ d

    @property
    def T(self) -> Matrix:
        return self

    def pinv(self) -> Matrix:
        P = self.factor.pinv().dense()
        return PsdDense(P @ P.T)


class Sparse(Matrix):
    """An explicit sparse matrix (stored as scipy CSR), e.g. a hierarchy or Haar strategy:
    products, norms and Grams cost O(non-zeros) instead of O(rows x columns)."""

    def __init__(self, matrix: sp.spmatrix | sp.sparray | np.ndarray) -> None:
        m = sp.csr_matrix(matrix, dtype=float)
        if m.ndim != 2:
            raise ValueError(f"Sparse: expected a 2-D matrix, got shape {m.shape}")
        self.matrix = m

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.matrix.shape[0]), int(self.matrix.shape[1]))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix @ np.asarray(x, dtype=float))

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix.T @ np.asarray(y, dtype=float))

    def dense(self) -> np.ndarray:
        self.check_dense()
        return self.matrix.toarray()

    @property
    def T(self) -> Matrix:
        return Sparse(self.matrix.T)

    def gram(self) -> Matrix:
        n = self.shape[1]
        if n * n > DENSE_GUARD:
            raise ValueError(f"refusing to form a {n:,} x {n:,} Gram matrix explicitly")
        return PsdDense((self.matrix.T @ self.matrix).toarray())

    def column_norms(self, p: int) -> np.ndarray:
        m = abs(self.matrix) if p == 1 else self.matrix.multiply(self.matrix)
        c = np.asarray(m.sum(axis=0)).ravel()
        return c if p == 1 else np.sqrt(c)

    def fro2(self) -> float:
        return float((self.matrix.data**2).sum())

    def trace(self) -> float:
        return float(self.matrix.diagonal().sum())

    def is_total(self) -> bool:
        m = self.matrix
        return m.shape[0] == 1 and m.nnz == m.shape[1] and bool(np.all(m.data == 1.0))

    def is_identity(self) -> bool:
        m = self.matrix
        return (m.shape[0] == m.shape[1] and m.nnz == m.shape[0]
                and bool(np.all(m.diagonal() == 1.0)))

    def __repr__(self) -> str:
        return f"Sparse({self.shape[0]}x{self.shape[1]}, nnz={self.matrix.nnz})"


class Identity(Matrix):
    """The n x n identity."""

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, dtype=float, copy=True)

    rmatvec = matvec

    def dense(self) -> np.ndarray:
        return np.eye(self.n)

    def gram(self) -> Matrix:
        return self

    @property
    def T(self) -> Matrix:
        return self

    def pinv(self) -> Matrix:
        return self

    def column_norms(self, p: int) -> np.ndarray:
        return np.ones(self.n)

    def fro2(self) -> float:
        return float(self.n)

    def trace(self) -> float:
        return float(self.n)

    def is_identity(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Identity({self.n})"


class Ones(Matrix):
    """The m x n all-ones matrix; ``Ones(1, n)`` is the total query."""

    def __init__(self, m: int, n: int) -> None:
        self.m, self.n = int(m), int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.m, self.n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        s = np.asarray(x, dtype=float).sum(axis=0)
        return np.broadcast_to(s, (self.m,) + np.shape(s)).copy()

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        s = np.asarray(y, dtype=float).sum(axis=0)
        return np.broadcast_to(s, (self.n,) + np.shape(s)).copy()

    def dense(self) -> np.ndarray:
        self.check_dense()
        return np.ones((self.m, self.n))

    def gram(self) -> Matrix:
        return Scaled(Ones(self.n, self.n), float(self.m)) if self.m != 1 else Ones(self.n,
                                                                                    self.n)

    @property
    def T(self) -> Matrix:
        return Ones(self.n, self.m)

    def pinv(self) -> Matrix:
        """``1 1^T / (m n)``: the all-ones matrix has rank one."""
        return Scaled(Ones(self.n, self.m), 1.0 / (self.m * self.n))

    def column_norms(self, p: int) -> np.ndarray:
        return np.full(self.n, float(self.m) if p == 1 else math.sqrt(self.m))

    def fro2(self) -> float:
        return float(self.m * self.n)

    def trace(self) -> float:
        return float(min(self.m, self.n))

    def is_total(self) -> bool:
        return self.m == 1

    def __repr__(self) -> str:
        return f"Total({self.n})" if self.m == 1 else f"Ones({self.m}x{self.n})"


class Scaled(Matrix):
    """``c * A`` for a scalar c."""

    def __init__(self, base: Matrix, c: float) -> None:
        self.base, self.c = base, float(c)

    @property
    def shape(self) -> tuple[int, int]:
        return self.base.shape

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.c * self.base.matvec(x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self.c * self.base.rmatvec(y)

    def dense(self) -> np.ndarray:
        return self.c * self.base.dense()

    def gram(self) -> Matrix:
        return Scaled(self.base.gram(), self.c**2)

    @property
    def T(self) -> Matrix:
        return Scaled(self.base.T, self.c)

    def pinv(self) -> Matrix:
        if self.c == 0.0:  # the zero matrix is its own pseudo-inverse (transposed)
            return Scaled(self.base.T, 0.0)
        return Scaled(self.base.pinv(), 1.0 / self.c)

    def column_norms(self, p: int) -> np.ndarray:
        return abs(self.c) * self.base.column_norms(p)

    def fro2(self) -> float:
        return self.c**2 * self.base.fro2()

    def trace(self) -> float:
        return self.c * self.base.trace()


def kmatvec(factors: Sequence[Matrix | np.ndarray], x: np.ndarray) -> np.ndarray:
    """``(A_1 kron ... kron A_d) @ x`` without forming the product (HDMM Thm. 14).

    ``x`` may be a vector or a 2-D array of column vectors. Factors are processed from last
    to first; each step views the vector as (n_i x rest) over the fastest axis.
    """
    x = np.asarray(x, dtype=float)
    cols = x.shape[1] if x.ndim == 2 else None
    f = x.reshape(-1) if cols is None else x.T.reshape(-1)  # batch axis slowest
    for A in reversed(factors):
        n = A.shape[1]
        z = f.reshape(-1, n).T
        out = A.matvec(z) if isinstance(A, Matrix) else A @ z
        f = np.asarray(out).reshape(-1)
    if cols is None:
        return f
    # the batch axis was carried as the slowest "factor"; it is now fastest
    return f.reshape(-1, cols)


class Kron(Matrix):
    """A Kronecker product ``A_1 kron ... kron A_d`` of implicit factors."""

    def __init__(self, factors: Sequence[Matrix]) -> None:
        if not factors:
            raise ValueError("Kron: needs at least one factor")
        self.factors = tuple(factors)

    @property
    def shape(self) -> tuple[int, int]:
        return (math.prod(f.shape[0] for f in self.factors),
                math.prod(f.shape[1] for f in self.factors))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return kmatvec(self.factors, x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return kmatvec([Transpose(f) for f in self.factors], y)

    def dense(self) -> np.ndarray:
        self.check_dense()
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f.dense())
        return out

    def gram(self) -> Matrix:
        return Kron([f.gram() for f in self.factors])

    @property
    def T(self) -> Matrix:
        return Kron([f.T for f in self.factors])

    def pinv(self) -> Matrix:
        """``A_1^+ kron ... kron A_d^+`` (the pseudo-inverse of a Kronecker product)."""
        return Kron([f.pinv() for f in self.factors])

    def column_norms(self, p: int) -> np.ndarray:
        n = self.shape[1]
        if n > DENSE_GUARD:
            raise ValueError(f"refusing to list {n:,} column norms; use sensitivity()")
        out = np.ones(1)
        for f in self.factors:
            out = np.kron(out, f.column_norms(p))
        return out

    def sensitivity(self, p: int) -> float:
        return math.prod(f.sensitivity(p) for f in self.factors)

    def fro2(self) -> float:
        return math.prod(f.fro2() for f in self.factors)

    def trace(self) -> float:
        return math.prod(f.trace() for f in self.factors)

    def is_total(self) -> bool:
        return all(f.is_total() for f in self.factors)

    def is_identity(self) -> bool:
        return all(f.is_identity() for f in self.factors)

    def __repr__(self) -> str:
        return " kron ".join(repr(f) for f in self.factors)


class Transpose(Matrix):
    """The transpose of an implicit matrix."""

    def __init__(self, base: Matrix) -> None:
        self.base = base

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.base.shape
        return (n, m)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.base.rmatvec(x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self.base.matvec(y)

    def dense(self) -> np.ndarray:
        return self.base.dense().T

    @property
    def T(self) -> Matrix:
        return self.base

    def pinv(self) -> Matrix:
        return self.base.pinv().T


class Product(Matrix):
    """The product ``A B`` of two implicit matrices, applied factor by factor."""

    def __init__(self, left: Matrix, right: Matrix) -> None:
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"Product: {left.shape} and {right.shape} do not chain")
        self.left, self.right = left, right

    @property
    def shape(self) -> tuple[int, int]:
        return (self.left.shape[0], self.right.shape[1])

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.left.matvec(self.right.matvec(x))

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self.right.rmatvec(self.left.rmatvec(y))

    @property
    def T(self) -> Matrix:
        return Product(self.right.T, self.left.T)


class VStack(Matrix):
    """A weighted vertical stack ``[w_1 B_1; ...; w_k B_k]`` (a union of query groups)."""

    def __init__(self, blocks: Sequence[Matrix], weights: Sequence[float] | None = None) -> None:
        if not blocks:
            raise ValueError("VStack: needs at least one block")
        n = blocks[0].shape[1]
        if any(b.shape[1] != n for b in blocks):
            raise ValueError("VStack: blocks must have the same number of columns")
        self.blocks = tuple(blocks)
        self.weights = np.ones(len(blocks)) if weights is None else np.asarray(weights, float)
        if self.weights.shape != (len(self.blocks),):
            raise ValueError("VStack: one weight per block")

    @property
    def shape(self) -> tuple[int, int]:
        return (sum(b.shape[0] for b in self.blocks), self.blocks[0].shape[1])

    @cached_property
    def offsets(self) -> np.ndarray:
        """Row offset of each block (length k + 1)."""
        return np.concatenate([[0], np.cumsum([b.shape[0] for b in self.blocks])]).astype(
            np.int64)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([w * b.matvec(x) for w, b in zip(self.weights, self.blocks,
                                                                 strict=True)])

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        out = None
        for i, (w, b) in enumerate(zip(self.weights, self.blocks, strict=True)):
            part = w * b.rmatvec(y[self.offsets[i]:self.offsets[i + 1]])
            out = part if out is None else out + part
        return out

    def split(self, y: np.ndarray) -> list[np.ndarray]:
        """Cut a stacked answer vector into per-block pieces."""
        return [y[self.offsets[i]:self.offsets[i + 1]] for i in range(len(self.blocks))]

    def dense(self) -> np.ndarray:
        self.check_dense()
        return np.vstack([w * b.dense() for w, b in zip(self.weights, self.blocks, strict=True)])

    def gram(self) -> Matrix:
        return Sum([b.gram() for b in self.blocks], self.weights**2)

    def column_norms(self, p: int) -> np.ndarray:
        if p == 1:
            return sum(abs(w) * b.column_norms(1) for w, b in zip(self.weights, self.blocks,
                                                                  strict=True))
        return np.sqrt(sum(w**2 * b.column_norms(2) ** 2 for w, b in zip(self.weights,
                                                                          self.blocks,
                                                                          strict=True)))

    def sensitivity(self, p: int) -> float:
        """Exact when the domain is small enough to list column norms, else an upper bound
        (the sum of the blocks' sensitivities, exact when they share a maximising column)."""
        if self.shape[1] <= DENSE_GUARD:
            return float(self.column_norms(p).max())
        return self.sensitivity_bound(p)

    def sensitivity_bound(self, p: int) -> float:
        """Sum of block sensitivities (L1), or the root of the sum of squares (L2)."""
        sens = np.array([abs(w) * b.sensitivity(p) for w, b in zip(self.weights, self.blocks,
                                                                   strict=True)])
        return float(sens.sum()) if p == 1 else float(np.sqrt((sens**2).sum()))

    def fro2(self) -> float:
        return float(sum(w**2 * b.fro2() for w, b in zip(self.weights, self.blocks,
                                                        strict=True)))


class Sum(Matrix):
    """A weighted sum ``sum_j c_j T_j`` of same-shape matrices (typically Gram operators)."""

    def __init__(self, terms: Sequence[Matrix], coefs: Sequence[float] | None = None) -> None:
        if not terms:
            raise ValueError("Sum: needs at least one term")
        shape = terms[0].shape
        if any(t.shape != shape for t in terms):
            raise ValueError("Sum: terms must have the same shape")
        self.terms = tuple(terms)
        self.coefs = np.ones(len(terms)) if coefs is None else np.asarray(coefs, float)

    @property
    def shape(self) -> tuple[int, int]:
        return self.terms[0].shape

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return sum(c * t.matvec(x) for c, t in zip(self.coefs, self.terms, strict=True))

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        return sum(c * t.rmatvec(y) for c, t in zip(self.coefs, self.terms, strict=True))

    def dense(self) -> np.ndarray:
        self.check_dense()
        return sum(c * t.dense() for c, t in zip(self.coefs, self.terms, strict=True))

    @property
    def T(self) -> Matrix:
        return Sum([t.T for t in self.terms], self.coefs)

    def trace(self) -> float:
        return float(sum(c * t.trace() for c, t in zip(self.coefs, self.terms, strict=True)))
