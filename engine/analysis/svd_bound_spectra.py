"""The nuclear norm (sum of singular values) of one attribute's factor, for the SVD bound.

``SVDB`` of a Kronecker product is the product of its factors' ``(sum sigma)**2 / n``, so each
factor needs only the sum of its singular values. Three routes, cheapest first:

* **closed form**, never forming an n x n matrix, summed in chunks of :data:`CHUNK` values
  (memory independent of n), for every n up to :data:`SPECTRUM_LIMIT`:
  identity (sigma = 1), total and m rows of ones (one sigma, ``sqrt(m n)``), ``[I; T]``
  (``sqrt(n + 1)`` and n - 1 ones), prefix and suffix (``sigma_k = 1 / (2 sin((2k-1) pi /
  (4n+2)))``), all-range (its Gram is the semiseparable ``(n+1) T^-1``, T = tridiag(-1, 2, -1):
  ``sigma_k = sqrt(n+1) / (2 sin(k pi / (2n+2)))``), circular windows of one width w (the
  circulant's ``|sin(pi j w / n) / sin(pi j / n)|``, exactly 0 where ``j w`` is a multiple of
  n), and a permutation of any of these. Every sigma is computed to a relative round-off, so
  none is dropped: the sum is exact to about ``log2(n)`` ulps;
* **structured or dense eigenvalues** of the Gram (banded width-w ranges, the FFT of a
  circulant, any other factor: ``eigvalsh``), only up to :data:`FACTOR_LIMIT` values and when
  three n x n float arrays fit the memory budget (engine.analysis.cost_model). Here an
  eigenvalue below ``10 n eps max(lambda)`` is round-off and dropped, which only lowers the
  sum: the bound stays a lower bound;
* otherwise none: :func:`spectrum_refusal` says why in one line.

Values are cached per factor spec (a few floats), so the certified floor's repeated
sub-bounds cost one spectrum per distinct factor.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from engine.analysis.cost_model import FLOAT, format_bytes, memory_limit
from engine.linalg.matrix import Identity, Matrix, Ones
from engine.workloads.blocks import (
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityTotalBlock,
    PermutedBlock,
    PrefixBlock,
    SuffixBlock,
)

#: Largest attribute whose Gram is eigendecomposed (dense, banded or by FFT).
FACTOR_LIMIT = 16384
#: Largest attribute summed through a closed form (about 0.8 s of CPU at the limit).
SPECTRUM_LIMIT = 2**26
#: Singular values computed at once by a closed form.
CHUNK = 2**16
#: Float arrays of CHUNK values alive at once while a chunk is summed.
CHUNK_ARRAYS = 4
#: Float copies of the n x n Gram alive during a dense eigendecomposition.
DENSE_COPIES = 3
#: Most cached nuclear norms (one float each, keyed by a digest of the factor's spec).
CACHE_SIZE = 256

_cache: dict[tuple, float] = {}


def _base(factor: Matrix) -> Matrix:
    """The factor a permutation was applied to (same singular values)."""
    while isinstance(factor, PermutedBlock):
        factor = factor.base
    return factor


def has_closed_form(factor: Matrix) -> bool:
    """True when the factor's singular values have a closed form (no n x n matrix formed)."""
    base = _base(factor)
    if isinstance(base, CircularRangeBlock):
        return base.width is not None
    return isinstance(base, (Identity, Ones, IdentityTotalBlock, PrefixBlock, SuffixBlock,
                             AllRangeBlock))


def spectrum_refusal(factor: Matrix, attribute: str = "an attribute") -> str:
    """Why the factor's nuclear norm is not computed ('' when it is), in one line."""
    n = factor.shape[1]
    limit = memory_limit()
    if has_closed_form(factor):
        if n > SPECTRUM_LIMIT:
            return (f"{attribute} has {n:,} values; the closed-form spectrum is summed up to "
                    f"{SPECTRUM_LIMIT:,} values")
        need = CHUNK_ARRAYS * FLOAT * min(n, CHUNK)
    else:
        if n > FACTOR_LIMIT:
            return (f"{attribute} has {n:,} values and its factor has no closed-form spectrum "
                    f"(eigenvalues are computed up to {FACTOR_LIMIT:,} values)")
        need = DENSE_COPIES * FLOAT * float(n) ** 2
    if need > limit:
        return (f"the spectrum of {attribute} needs {format_bytes(need)}; the memory limit is "
                f"{format_bytes(limit)}")
    return ""


def _chunked_sum(n: int, sigma) -> float:
    """``sum_{k=1..n} sigma(k)`` for a vectorised ``sigma`` of an index array, chunk by chunk
    (pairwise sums within a chunk, ``math.fsum`` over chunks)."""
    return math.fsum(float(sigma(np.arange(lo, min(lo + CHUNK, n + 1), dtype=float)).sum())
                     for lo in range(1, n + 1, CHUNK))


def _closed_form_nuclear(factor: Matrix) -> float:
    base = _base(factor)
    n = base.shape[1]
    if isinstance(base, Identity):
        return float(n)
    if isinstance(base, Ones):
        return math.sqrt(float(base.shape[0]) * n)
    if isinstance(base, IdentityTotalBlock):
        return math.sqrt(n + 1.0) + (n - 1.0)
    if isinstance(base, (PrefixBlock, SuffixBlock)):
        return _chunked_sum(n, lambda k: 0.5 / np.sin((2.0 * k - 1.0) * np.pi / (4.0 * n + 2.0)))
    if isinstance(base, AllRangeBlock):
        root = math.sqrt(n + 1.0)
        return _chunked_sum(n, lambda k: 0.5 * root / np.sin(k * np.pi / (2.0 * n + 2.0)))
    if isinstance(base, CircularRangeBlock) and base.width is not None:
        w = base.width

        def circulant(j: np.ndarray) -> np.ndarray:  # frequencies j = 1..n-1
            turns = (j.astype(np.int64) * w) % n  # sin(pi j w / n) is exactly 0 at turns 0
            return np.abs(np.sin(np.pi * turns / n) / np.sin(np.pi * j / n)) * (turns != 0)

        return float(w) + _chunked_sum(n - 1, circulant)
    raise ValueError(f"no closed form for {type(base).__name__}")


def _eigen_nuclear(factor: Matrix) -> float:
    """From the Gram's eigenvalues (structured where the block has a route, else dense)."""
    n = factor.shape[1]
    if isinstance(factor, Block):
        lam = factor.gram_eigenvalues()
    else:
        lam = np.linalg.eigvalsh(factor.gram().dense())
    # round-off "zeros" would add sqrt(eps) each to an SVD *lower* bound: drop them
    tol = 10.0 * n * np.finfo(float).eps * max(float(lam.max(initial=0.0)), 0.0)
    return float(np.sqrt(np.where(lam > tol, lam, 0.0)).sum())


def _cache_key(factor: Matrix) -> tuple | None:
    if isinstance(factor, Block):  # a digest: an explicit block's spec holds all its rows
        spec = hashlib.sha256(repr(factor.spec()).encode()).hexdigest()
        return (type(factor).__name__, factor.shape, spec)
    if isinstance(factor, (Identity, Ones)):
        return (type(factor).__name__, factor.shape)
    return None  # an arbitrary matrix: no spec to key on


def nuclear_norm(factor: Matrix) -> float:
    """``sum sigma_i`` of the factor (``tr (F^T F)^(1/2)``): closed form where one exists,
    else from the Gram's eigenvalues.

    Raises:
        ValueError: when :func:`spectrum_refusal` refuses (the one-line reason).
    """
    refusal = spectrum_refusal(factor)
    if refusal:
        raise ValueError(refusal)
    key = _cache_key(factor)
    if key is not None and key in _cache:
        return _cache[key]
    value = _closed_form_nuclear(factor) if has_closed_form(factor) else _eigen_nuclear(factor)
    if key is not None:
        if len(_cache) >= CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = value
    return value
