"""Known orthogonal eigenbases of strategy Grams, so error needs no n x n inverse.

Many 1-D strategies have a Gram ``A^T A`` that is diagonal in a fixed orthogonal basis: the
identity in the standard basis, and on n = 2**k cells the Haar wavelet, the binary hierarchy
(H2) and every hierarchy whose intervals are dyadic (e.g. HB with b = 16 on 4096 cells) in the
Haar basis (a Haar vector sums to zero over every interval that contains its support and is
constant on every interval inside one of its halves). With ``A^T A = U diag(lam) U^T``,

    tr[(A^T A)^+ V] = sum_{lam_j > 0} u_j^T V u_j / lam_j,

and the quadratic forms ``u_j^T V u_j = ||W u_j||**2`` of a 1-D workload block cost O(n) per
basis vector, so the trace costs O(n**2) instead of the O(n**3) of a dense pseudo-inverse.

Detection is exact: the candidate basis is applied to the sparse strategy with integer (+-1)
Haar vectors and ``(A H^T)^T (A H^T)`` is checked to be diagonal. It is attempted only while the
sparse products stay within a work budget, so dense strategies fall back at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.linalg.matrix import DENSE_GUARD, Identity, Matrix, Sparse

#: Largest number of scalar multiply-adds spent on detecting a basis (sparse products).
DETECTION_BUDGET = 10_000_000
#: Columns of the basis materialised at once when evaluating quadratic forms.
CHUNK = 512
#: Relative size below which an eigenvalue counts as zero.
RCOND = 1e-10


def haar_rows(n: int) -> sp.csr_matrix:
    """Unnormalised Haar vectors (+-1 entries) of a power-of-two n as the rows of a sparse
    matrix: ``H_n = [H_{n/2} kron [1, 1]; I_{n/2} kron [1, -1]]``; the rows are orthogonal."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"haar_rows: n must be a power of two, got {n}")
    H = sp.csr_matrix(np.ones((1, 1)))
    while H.shape[1] < n:
        half = H.shape[1]
        H = sp.vstack([sp.kron(H, sp.csr_matrix([[1.0, 1.0]])),
                       sp.kron(sp.identity(half), sp.csr_matrix([[1.0, -1.0]]))]).tocsr()
    return H


@dataclass(frozen=True)
class GramSpectrum:
    """``A^T A = U diag(eigenvalues) U^T`` with orthonormal U.

    Attributes:
        eigenvalues: one per basis vector (length n).
        basis: sparse n x n matrix whose columns are the (orthonormal) basis vectors; None
            for the standard basis.
    """

    eigenvalues: np.ndarray
    basis: sp.csc_matrix | None = None

    @property
    def n(self) -> int:
        """Number of cells."""
        return int(self.eigenvalues.shape[0])

    def live(self, rcond: float = RCOND) -> np.ndarray:
        """Mask of the non-zero eigenvalues (the range of the strategy)."""
        lam = self.eigenvalues
        return lam > rcond * max(float(lam.max(initial=0.0)), 1e-300)

    def column_blocks(self, chunk: int = CHUNK) -> Iterator[tuple[slice, np.ndarray]]:
        """The basis as dense column blocks ``(columns, U[:, columns])``."""
        for start in range(0, self.n, chunk):
            cols = slice(start, min(start + chunk, self.n))
            if self.basis is None:
                block = np.zeros((self.n, cols.stop - start))
                block[np.arange(start, cols.stop), np.arange(cols.stop - start)] = 1.0
            else:
                block = self.basis[:, cols].toarray()
            yield cols, block

    def quadratic_forms(self, quad: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``u_j^T V u_j`` for every basis vector, given ``quad(X)`` = column-wise forms."""
        out = np.empty(self.n)
        for cols, block in self.column_blocks():
            out[cols] = quad(block)
        return out

    def trace_with(self, q: np.ndarray, rtol: float = 1e-8) -> float:
        """``tr[G^+ V]`` from the forms ``q_j = u_j^T V u_j``; inf when V has mass on the
        null space of G (the strategy does not support the queries)."""
        live = self.live()
        scale = max(float(np.abs(q).max(initial=0.0)), 1e-300)
        if np.any(np.abs(q[~live]) > rtol * scale):
            return math.inf
        return float((q[live] / self.eigenvalues[live]).sum())

    def total_forms(self) -> np.ndarray:
        """``(1^T u_j)**2`` for every basis vector (the forms of the total query)."""
        if self.basis is None:
            return np.ones(self.n)
        return np.asarray(self.basis.sum(axis=0)).ravel() ** 2

    def pinv(self) -> np.ndarray:
        """The dense pseudo-inverse ``U diag(1/lam) U^T`` (live eigenvalues only)."""
        live = self.live()
        inv = np.where(live, 1.0 / np.where(live, self.eigenvalues, 1.0), 0.0)
        if self.basis is None:
            return np.diag(inv)
        U = self.basis
        return np.asarray((U @ sp.diags(inv) @ U.T).todense())


def _sparse_rows(A: Matrix) -> sp.csr_matrix | None:
    if isinstance(A, Sparse):
        return A.matrix
    if A.size > DENSE_GUARD:
        return None
    return sp.csr_matrix(A.dense())


def _diagonal_gram(B: sp.csr_matrix, rtol: float = 1e-12) -> np.ndarray | None:
    """``diag(B^T B)`` when ``B^T B`` is diagonal (within the budget), else None."""
    row_nnz = np.diff(B.indptr).astype(np.float64)
    if float((row_nnz**2).sum()) > DETECTION_BUDGET:
        return None
    C = (B.T @ B).tocoo()
    diag = np.asarray(B.multiply(B).sum(axis=0)).ravel()
    off = C.row != C.col
    scale = max(float(np.abs(diag).max(initial=0.0)), 1e-300)
    if np.any(np.abs(C.data[off]) > rtol * scale):
        return None
    return diag


def gram_spectrum(A: Matrix) -> GramSpectrum | None:
    """The eigen-decomposition of ``A^T A`` in the standard or the Haar basis, if it is
    diagonal in one of them (and detection fits the work budget); otherwise None."""
    n = A.shape[1]
    if isinstance(A, Identity):
        return GramSpectrum(np.ones(n))
    S = _sparse_rows(A)
    if S is None:
        return None
    diag = _diagonal_gram(S)
    if diag is not None:
        return GramSpectrum(diag)
    if n < 2 or n & (n - 1) or S.nnz * (math.log2(n) + 1) > DETECTION_BUDGET:
        return None
    H = haar_rows(n)
    diag = _diagonal_gram((S @ H.T).tocsr())
    if diag is None:
        return None
    norms2 = np.asarray(H.multiply(H).sum(axis=1)).ravel()
    U = (sp.diags(1.0 / np.sqrt(norms2)) @ H).T.tocsc()
    return GramSpectrum(diag / norms2, U)
