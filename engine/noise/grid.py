"""The release grid ``2**-k`` and the sensitivity of answers rounded to it.

Integer-valued strategies (identity, prefix, marginals, hierarchies) are released with spacing
1: nothing is rounded and the sensitivity is unchanged (:func:`is_integral`). Any other
strategy's answers are rounded to ``g = 2**-k``; a coordinate whose exact change is ``c`` then
changes by at most ``g ceil(|c| / g) <= |c| + g``, and only the ``N`` coordinates a record
touches (:func:`column_support`) change at all, so the sensitivities on the grid are bounded by
``D1 + g N`` (L1) and ``sqrt(D2**2 + 2 g D1 + g**2 N)`` (L2) (:func:`grid_sensitivity`).
By default the grid is the coarsest that enlarges the sensitivity by at most
:data:`GRID_INFLATION`, relative (:func:`auto_grid_exponent`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.errors import SpecError
from engine.linalg.marginals import MarginalStrategy
from engine.linalg.matrix import Dense, Identity, Kron, Ones, Scaled, Sparse, VStack
from engine.noise.gaussian import MAX_SIGMA
from engine.noise.laplace import MAX_LAPLACE_SCALE

#: the finest grid 2**-k a release may use
MAX_GRID_EXPONENT = 40
#: the automatic grid is the coarsest whose rounding enlarges the sensitivity by at most this
GRID_INFLATION = 2.0**-10


def check_grid_exponent(k: Any, field: str) -> int:
    """A grid exponent k (spacing 2**-k) in [0, 40], or a one-line SpecError naming ``field``
    (the name the user knows the value by: ``--grid`` on the command line)."""
    text = str(k).strip()
    if isinstance(k, bool) or not (isinstance(k, int) or text.lstrip("-").isdigit()):
        raise SpecError(f"{field}: expected an integer in [0, {MAX_GRID_EXPONENT}], got {k!r}")
    value = int(text)
    if not 0 <= value <= MAX_GRID_EXPONENT:
        raise SpecError(f"{field}: expected an integer in [0, {MAX_GRID_EXPONENT}] (spacing "
                        f"2**-k), got {value}")
    return value


def is_integral(A: Any) -> bool:
    """True when every entry of the implicit strategy is an integer (then A x is exact)."""
    if isinstance(A, Identity | Ones):
        return True
    if isinstance(A, Dense):
        return bool(np.all(np.mod(A.array, 1.0) == 0.0))
    if isinstance(A, Sparse):
        return bool(np.all(np.mod(A.matrix.data, 1.0) == 0.0))
    if isinstance(A, Scaled):
        return float(A.c).is_integer() and is_integral(A.base)
    if isinstance(A, Kron):
        return all(is_integral(f) for f in A.factors)
    if isinstance(A, VStack):
        return (all(float(w).is_integer() for w in A.weights)
                and all(is_integral(b) for b in A.blocks))
    if isinstance(A, MarginalStrategy):
        return bool(np.all(np.mod(A.theta, 1.0) == 0.0))
    return False


def column_support(A: Any) -> int:
    """An upper bound on the nonzeros of any column of the strategy (rows touched by one
    record); exact for the structured types, the number of rows otherwise."""
    if isinstance(A, Identity):
        return 1
    if isinstance(A, Ones):
        return A.shape[0]
    if isinstance(A, Dense):
        return int(np.count_nonzero(A.array, axis=0).max())
    if isinstance(A, Sparse):
        counts = np.diff(A.matrix.tocsc().indptr)
        return int(counts.max()) if counts.size else 0
    if isinstance(A, Scaled):
        return column_support(A.base) if A.c != 0 else 0
    if isinstance(A, Kron):
        return math.prod(column_support(f) for f in A.factors)
    if isinstance(A, VStack):
        return sum(column_support(b) for b, w in zip(A.blocks, A.weights, strict=True) if w)
    if isinstance(A, MarginalStrategy):
        return int(np.count_nonzero(A.theta))
    return int(A.shape[0])


def grid_sensitivity(l1: float, l2: float, support: int, spacing: float
                     ) -> tuple[float, float]:
    """(L1, L2) sensitivities of ``x -> round(A x / g) g`` in answer units (module docstring)."""
    l2_grid = l2 + spacing * math.sqrt(support)  # triangle inequality; needs no finite L1
    if math.isfinite(l1):
        l2_grid = min(l2_grid, math.sqrt(l2**2 + 2.0 * spacing * l1 + spacing**2 * support))
    return l1 + spacing * support, l2_grid


def auto_grid_exponent(laplace: bool, l1: float, l2: float, support: int,
                       unit_scale: float) -> int:
    """The coarsest grid 2**-k (k in 0..40) whose rounding enlarges the sensitivity in the
    noise's norm by at most :data:`GRID_INFLATION` (relative), without the noise scale in grid
    units passing the samplers' int64 limits (then the finest grid within them).

    Args:
        laplace: True for L1 / discrete Laplace, False for L2 / discrete Gaussian.
        l1, l2: the strategy's sensitivities; support: :func:`column_support`.
        unit_scale: noise scale per unit of sensitivity (sigma, or 1 / eps).
    """
    base = l1 if laplace else l2
    limit = MAX_LAPLACE_SCALE if laplace else MAX_SIGMA
    k_max = MAX_GRID_EXPONENT
    if base * unit_scale > 0:
        k_max = min(k_max, max(0, math.floor(math.log2(limit / (2.0 * base * unit_scale)))))
    for k in range(k_max + 1):
        d1, d2 = grid_sensitivity(l1, l2, support, 2.0**-k)
        if (d1 if laplace else d2) <= base * (1.0 + GRID_INFLATION):
            return k
    return k_max
