"""The plain Laplace/Gaussian mechanism: measure every workload query directly.

This is the "Laplace" and "Gaussian" baseline of HDMM Tables 6 and 7 (spec sections 2.2 and
7.4): no reconstruction, so ``TSE = m sigma**2 ||W||**2`` and the RMSE is ``sigma ||W||``.
Like the paper, the sensitivity of a union is taken as the *sum of per-product sensitivities*
``sum_j w_j prod_i ||W_ij||_1`` (Laplace) or ``(sum_j w_j**2 prod_i ||W_ij||_2**2)**(1/2)``
(Gaussian); that is the true sensitivity when all products share a maximising column
(marginals, prefix-marginals) and an upper bound otherwise (SF1: 50 against the true 41).
"""

from __future__ import annotations

import math

from engine.privacy import Privacy
from engine.workloads.workload import Workload


def summed_sensitivity(workload: Workload, norm: int) -> float:
    """Sum of the products' sensitivities (L1), or the root of the sum of their squares (L2)."""
    if norm == 1:
        return float(sum(abs(w) * math.prod(f.sensitivity(1) for f in fs)
                         for w, fs in workload.products()))
    return math.sqrt(sum(w * w * math.prod(f.sensitivity(2) ** 2 for f in fs)
                         for w, fs in workload.products()))


def plain_rmse(workload: Workload, privacy: Privacy) -> float:
    """RMSE per query of the plain mechanism at ``privacy`` (``sigma * sensitivity``)."""
    return privacy.sigma() * summed_sensitivity(workload, privacy.norm)
