"""One-dimensional workloads at n = 4096: timings of the engine's error machinery and the HDMM
Tables 4/5 baseline columns beside the paper's.

Run: ``python benchmarks/engine_oned.py``. Goal (issue 2): the SVD bound and the identity, H2
and wavelet error of all-range on n = 4096 in under one second each; printed as seconds and as
a ratio to that goal (median of three runs, measured here and now).
"""

from __future__ import annotations

import time

from timing import timed

from engine.analysis.svd_bound import svd_bound
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads import Workload, catalog

N = 4096
GOAL_SECONDS = 1.0
LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
COLUMNS = ("identity", "h2", "wavelet", "hb", "svdb")

#: HDMM Table 4 (Laplace) and Table 5 (Gaussian) at n = 4096: Identity, H2, Wavelet, HB, SVDB.
PAPER = {
    "all-range": ((52.27, 27.90, 26.18, 16.19, 5.82), (156.14, 23.12, 21.69, 27.92, 17.38)),
    "prefix": ((64.01, 21.77, 21.67, 14.91, 4.74), (191.21, 18.03, 17.95, 25.72, 14.15)),
    "width32": ((8.00, 22.45, 19.58, 10.96, 3.38), (23.90, 18.60, 16.22, 18.90, 10.09)),
    "permuted": ((52.27, 374.29, 277.42, 107.83, 5.82),
                 (156.14, 310.11, 229.85, 185.98, 17.38)),
}


def workload(kind: str) -> Workload:
    """The 1-D workload of a Table 4/5 row at n = N (as the catalogue defines it)."""
    return catalog.build_workload(catalog.one_dim(kind, N))


def timings() -> None:
    W = workload("all-range")
    print(f"All-range on n = {N} ({W.num_queries:,} queries), median of 3 runs:")
    print(f"  {'task':<32} {'seconds':>8} {'x 1 s goal':>11}  value (RMSE, Gaussian)")
    bound, seconds = timed(lambda: svd_bound(W))
    print(f"  {'SVD bound':<32} {seconds:>8.3f} {seconds / GOAL_SECONDS:>11.3f}  "
          f"{bound.rmse(W, GAUSS):.2f} ({bound.method})")
    for name in ("identity", "h2", "wavelet"):
        plan, seconds = timed(lambda name=name: get(name).plan(W, GAUSS))
        print(f"  {name + ' plan + expected error':<32} {seconds:>8.3f} "
              f"{seconds / GOAL_SECONDS:>11.3f}  {plan.rmse():.2f}")


def tables() -> None:
    print(f"\nHDMM Tables 4 (Laplace, eps=1) and 5 (Gaussian, eps=1, delta=1e-6) at n = {N}: "
          "ours / paper")
    for noise_index, privacy in enumerate((LAPLACE, GAUSS)):
        print(f"  {privacy.describe()}")
        print(f"  {'workload':<10} " + " ".join(f"{c:>17}" for c in COLUMNS) + "   seconds")
        for kind, paper in PAPER.items():
            W = workload(kind)
            start = time.perf_counter()
            ours = []
            for column in COLUMNS:
                if column == "svdb":
                    ours.append(svd_bound(W).rmse(W, privacy))
                else:
                    ours.append(get(column).plan(W, privacy).rmse())
            seconds = time.perf_counter() - start
            cells = [f"{o:8.2f}/{p:<8.2f}" for o, p in zip(ours, paper[noise_index],
                                                          strict=True)]
            same = all(abs(o - p) <= 0.005 + 1e-9 for o, p in zip(ours, paper[noise_index],
                                                                  strict=True))
            print(f"  {kind:<10} " + " ".join(cells) + f"   {seconds:6.2f}"
                  + ("" if same else "   <- differs"))


if __name__ == "__main__":
    timings()
    tables()
