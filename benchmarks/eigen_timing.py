"""Full Eigen-Design planning time in units of one ``numpy.linalg.eigh`` of the same size.

Run: ``python benchmarks/eigen_timing.py [--cvxpy]``. Goal (issue 4): all-range at n = 2048 in
at most 20 eigh-units (the straightforward cvxpy route took about 100 s). The unit is measured
here and now, on the workload's own Gram (median of 3), so the ratio reads the same on any
machine; a busy machine still shifts it, because BLAS threads contend differently in eigh and
in the many small products of Program 1 (the load average is printed).

Also: Program 1 alone with our dual solver, our interior point and cvxpy/Clarabel on the same
eigen-queries (``--cvxpy`` adds n = 1024 for cvxpy, which takes minutes).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from timing import timed

from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.eigen_design.design import dense_gram, eigen_queries
from engine.mechanisms.eigen_design.program1 import solve_program1
from engine.privacy import Privacy
from engine.workloads import AllRangeBlock, PermutedBlock, PrefixBlock, Workload
from engine.workloads.catalog import build_workload, range_marginals

GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
GOAL_UNITS = 20.0


def workloads(n: int) -> dict[str, Workload]:
    out = {"all-range": Workload.one_dim(AllRangeBlock(n)),
           "prefix": Workload.one_dim(PrefixBlock(n)),
           "permuted range": Workload.one_dim(PermutedBlock(AllRangeBlock(n), 0))}
    if n == 2048:
        census = Domain.from_sizes([8, 16, 16]).to_spec()
        out["2-way range marg."] = build_workload(range_marginals(census, 2))
    return out


def full_algorithm() -> None:
    print("Full Eigen-Design (plan = Gram + eigh + Program 1 + completion + exact error), "
          "median of 3")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    print(f"  {'workload':<18} {'n':>5} {'eigh s':>8} {'plan s':>8} {'units':>7} "
          f"{'goal':>5}  stages (s)                         bound ratio")
    for n in (512, 1024, 2048):
        for name, W in workloads(n).items():
            G = dense_gram(W)
            _, unit = timed(lambda G=G: np.linalg.eigh(G))
            plan, seconds = timed(lambda W=W: get("eigen-design").plan(W, GAUSS))
            t = plan.view("timings")
            stages = ", ".join(f"{k} {v:.2f}" for k, v in zip(t.column("stage"),
                                                                t.column("seconds"),
                                                                strict=True))
            goal = f"{GOAL_UNITS:.0f}" if name == "all-range" and n == 2048 else ""
            print(f"  {name:<18} {n:>5} {unit:>8.3f} {seconds:>8.3f} {seconds / unit:>7.2f} "
                  f"{goal:>5}  {stages:<34} {plan.fact('bound_ratio'):.4f}")


def program1_solvers(with_cvxpy_1024: bool) -> None:
    print("\nProgram 1 alone on the all-range eigen-queries (value, certified gap, seconds)")
    print(f"  {'n':>5} {'method':<7} {'objective':>16} {'gap':>9} {'iters':>6} {'seconds':>8}"
          f" {'x eigh':>7}")
    for n in (512, 1024, 2048):
        eig = eigen_queries(AllRangeBlock(n).gram_array())
        _, unit = timed(lambda n=n: np.linalg.eigh(AllRangeBlock(n).gram_array()))
        methods = ["dual", "ipm"] + (["cvxpy"] if n == 512 or (n == 1024 and with_cvxpy_1024)
                                     else [])
        for method in methods:
            start = time.perf_counter()
            res = solve_program1(eig.values, eig.vectors**2, method=method)
            seconds = time.perf_counter() - start
            gap = f"{res.gap:.1e}" if method != "cvxpy" else "-"
            print(f"  {n:>5} {method:<7} {res.value:>16.6f} {gap:>9} {res.iterations:>6} "
                  f"{seconds:>8.3f} {seconds / unit:>7.2f}")


if __name__ == "__main__":
    full_algorithm()
    program1_solvers("--cvxpy" in sys.argv)
