"""Alternative design sets for Program 1: Wavelet and Fourier bases (paper Figure 5, section 3.5).

Program 1 weighs any orthonormal design set exactly (``c_i = (Q G Q^T)_ii``), so a known
strategy used as design set can only improve on that strategy. Multi-attribute design sets are
Kronecker products of per-attribute bases (numpy C order, attribute 1 slowest). Every basis
here has orthogonal rows and is normalised to orthonormal rows; the row scale is absorbed by
the weights.

* ``wavelet``: the rows of the unweighted Haar matrix (Privelet, spec 8.2). For a size that is
  not a power of two, the Haar rows of the next power of two restricted to the first n cells
  are orthonormalised in order (Gram-Schmidt), keeping the total query first.
* ``fourier``: the Walsh-Hadamard characters for power-of-two sizes (the ±1 Fourier basis of
  Barak et al. on the binary encoding, spec 8.2); otherwise the DCT-II basis, whose first row
  is the constant (spec 11). This is our construction; the paper's for non-binary attributes
  is unknown.
* ``identity``: the unit vectors (Program 1 then returns the identity strategy);
* ``eigen``: the eigenvectors of the workload's Gram (see ``design`` and ``structured``).

Figure 5's finding: on all ranges Wavelet/Fourier designs cost about 20 % more error than the
eigen-queries and the same on 2-way marginals, but on permuted cell orders they are several
times worse, while the eigen-queries are unaffected.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from engine.linalg.trees import haar

DESIGN_SETS = ("eigen", "wavelet", "fourier", "identity")
#: Design sets tried under L1 (eps-DP), where no design set is universally good (section 3.5).
L1_CANDIDATES = ("eigen", "wavelet", "fourier", "identity")


def _orthonormal_rows(M: np.ndarray, n: int) -> np.ndarray:
    """Gram-Schmidt on the rows of M in order, skipping dependent rows, until n rows."""
    out: list[np.ndarray] = []
    for row in M:
        v = row.astype(float)
        for _ in range(2):  # re-orthogonalise once: classical Gram-Schmidt twice is stable
            if out:
                B = np.asarray(out)
                v = v - B.T @ (B @ v)
        norm = float(np.linalg.norm(v))
        if norm > 1e-8 * float(np.linalg.norm(row)):
            out.append(v / norm)
        if len(out) == n:
            return np.asarray(out)
    raise ValueError(f"basis: expected {n} independent rows, found {len(out)}")


def wavelet_basis(n: int) -> np.ndarray:
    """Orthonormal rows of the Haar wavelet basis on n cells (n x n)."""
    H = haar(n)
    if H.shape[0] == n and np.allclose(H @ H.T, np.diag(np.diag(H @ H.T))):
        return H / np.linalg.norm(H, axis=1, keepdims=True)
    return _orthonormal_rows(H, n)


def hadamard(n: int) -> np.ndarray:
    """The Sylvester-Hadamard matrix (±1) of a power-of-two order n."""
    H = np.ones((1, 1))
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return H


def fourier_basis(n: int) -> np.ndarray:
    """Orthonormal Fourier-type rows on n cells: Walsh-Hadamard (n = 2**k) or DCT-II."""
    if n & (n - 1) == 0:
        return hadamard(n) / np.sqrt(n)
    return scipy.fft.dct(np.eye(n), type=2, norm="ortho", axis=0)


def basis(kind: str, n: int) -> np.ndarray:
    """The per-attribute orthonormal basis of a fixed design set (wavelet/fourier/identity)."""
    if kind == "identity":
        return np.eye(n)
    if kind == "wavelet":
        return wavelet_basis(n)
    if kind == "fourier":
        return fourier_basis(n)
    raise ValueError(f"design set: unknown {kind!r}; allowed: wavelet, fourier, identity "
                     "(eigen bases depend on the workload)")


def kron_dense(bases: list[np.ndarray]) -> np.ndarray:
    """The dense Kronecker product of per-attribute bases (small domains only)."""
    out = np.ones((1, 1))
    for Q in bases:
        out = np.kron(out, Q)
    return out
