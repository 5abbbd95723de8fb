"""The HDMM paper's multi-dimensional workloads and its plain baseline (Tables 6 and 7,
section 11.2), shared by the tests and ``benchmarks/hdmm_tables.py`` (which puts ``tests/`` on
its path).

* :data:`WORKLOADS`: the tables' workloads by (dataset, workload) row name; they are defined
  once, in :mod:`engine.workloads.catalog` (CPS, Adult, Loans, census SF1 / SF1+).
* :func:`plain_rmse`: the plain Laplace/Gaussian mechanism, which measures every workload query
  directly. It is the "Laplace" and "Gaussian" baseline of the tables (spec sections 2.2 and
  7.4): no reconstruction, so ``TSE = m sigma**2 ||W||**2`` and the RMSE is ``sigma ||W||``.
  Like the paper, the sensitivity of a union is taken as the *sum of per-product
  sensitivities* ``sum_j w_j prod_i ||W_ij||_1`` (Laplace) or ``(sum_j w_j**2 prod_i
  ||W_ij||_2**2)**(1/2)`` (Gaussian); that is the true sensitivity when all products share a
  maximising column (marginals, prefix-marginals) and an upper bound otherwise (SF1: 50
  against the true 41).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from engine.privacy import Privacy
from engine.workloads import catalog
from engine.workloads.workload import Workload

#: Table row (dataset, workload) -> catalogue key.
TABLE_ROWS: dict[tuple[str, str], str] = {
    ("cps", "marginals"): "cps_marginals",
    ("cps", "prefix"): "cps_prefix",
    ("adult", "marginals"): "adult_marginals",
    ("adult", "prefix"): "adult_prefix",
    ("loans", "marginals"): "loans_marginals",
    ("loans", "prefix"): "loans_prefix",
    ("census", "sf1"): "sf1",
    ("census", "sf1+"): "sf1_plus",
}

#: The paper's multi-dimensional workloads by (dataset, workload) name.
WORKLOADS: dict[tuple[str, str], Callable[[], Workload]] = {
    row: functools.partial(catalog.workload, key) for row, key in TABLE_ROWS.items()
}


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
