"""The multi-dimensional workloads of the HDMM paper's Tables 6 and 7 (section 11.2), by
(dataset, workload) row name.

The workloads are defined once, in :mod:`engine.workloads.catalog` (CPS, Adult, Loans, census
SF1 / SF1+); the tests and ``benchmarks/hdmm_tables.py`` reproduce the tables from them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

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
