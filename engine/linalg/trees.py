"""Tree strategies on one attribute: hierarchical intervals (H2, HB) and the Haar wavelet.

Definitions follow the HDMM spec section 7.3; the baselines measure them (per attribute) and
Eigen-Design's wavelet design set orthonormalises the Haar rows.

Example (the binary hierarchy on 4 cells, root first, then each child's subtree):
    >>> hierarchy(4, 2).astype(int).tolist()[:4]
    [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from engine.linalg.spectral import haar_rows


def hierarchy_intervals(n: int, b: int) -> list[tuple[int, int]]:
    """The rows of ``hier(n, b)`` as half-open cell intervals ``[start, stop)``, in row order:
    the root, then each child's hierarchy (depth first).

    With ``n = m b + r``, the first r children cover m+1 cells and the rest m cells; a single
    cell is a leaf.
    """
    out: list[tuple[int, int]] = []

    def visit(start: int, size: int) -> None:
        out.append((start, start + size))
        if size == 1:
            return
        m, r = divmod(size, b)
        for child in [m + 1] * r + [m] * (b - r):
            if child:
                visit(start, child)
                start += child

    visit(0, n)
    return out


def hierarchy_matrix(n: int, b: int) -> sp.csr_matrix:
    """``hier(n, b)`` as a sparse 0/1 matrix (one row per tree node)."""
    iv = np.array(hierarchy_intervals(n, b), dtype=np.int64)
    lengths = iv[:, 1] - iv[:, 0]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.arange(indptr[-1]) - np.repeat(indptr[:-1] - iv[:, 0], lengths)
    return sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(len(iv), n))


def hierarchy(n: int, b: int) -> np.ndarray:
    """The hierarchical strategy ``hier(n, b)`` as a dense array (see hierarchy_matrix)."""
    return hierarchy_matrix(n, b).toarray()


def levels(n: int, b: int) -> int:
    """Smallest h with ``b**h >= n`` (the height of a b-ary tree over n leaves)."""
    h, cap = 0, 1
    while cap < n:
        cap *= b
        h += 1
    return h


def hb_branching(n: int) -> int:
    """Qardaji et al.'s branching factor: argmin over b of ``(b-1) h^3 - 2 (b+1) h^2 / 3``."""
    if n <= 2:
        return 2
    best, best_b = math.inf, 2
    for b in range(2, n + 1):
        h = levels(n, b)
        cost = (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
        if cost < best:
            best, best_b = cost, b
    return best_b


def haar_matrix(n: int) -> sp.csr_matrix:
    """Sparse unweighted Haar matrix for n cells, ``H_n = [H_{n/2} kron [1,1];
    I_{n/2} kron [1,-1]]``; for n not a power of two, that of the next power of two restricted
    to the first n cells (rows left empty dropped)."""
    size = 1 << max(0, (n - 1).bit_length())
    H = haar_rows(size)[:, :n].tocsr()
    return H[np.diff(H.indptr) > 0]


def haar(n: int) -> np.ndarray:
    """The unweighted Haar matrix as a dense array (see haar_matrix)."""
    return haar_matrix(n).toarray()
