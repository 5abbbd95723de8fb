"""Continual release (issue 33): the online mechanisms beside each other, the offline optimum
and the published constants.

Prints, per unit noise (unit total squared error ``sensitivity**2 ||B||_F**2``, so the rows
read the same at any privacy level):

1. a million-step ``online-blt``: plan, then release (measure with exact discrete Gaussian
   noise and reconstruct, ``plan.run``) on synthetic daily counts; CPU and wall seconds (goal:
   under 60 s), the peak traced memory, and the noise state per step (goal: O(buffers));
2. BLT against the optimal causal factorization (``online-optimal``, dense: run up to
   ``--optimal-max``) and against the square-root factorization at n = 2^10 .. 2^20;
3. the square-root factorization's constants (Fichtenberger, Henzinger & Upadhyay, ICML
   2023): its squared sensitivity ``sum_{k<n} c_k**2`` against the leading term ``ln(n) / pi``
   of their Theorem 1 (the ratio tends to 1 from above as n grows), and the tree's
   ``floor(log2 n) + 1`` levels;
4. the price of publishing every period: each online mechanism's RMSE over the offline
   optimum (HDMM OPT_0) at n = 1,024.

Run: ``python benchmarks/continual_release.py [--quick]`` (quick: 2^16 steps for item 1, BLT
to 2^16, no OPT_0 row).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import tracemalloc

import numpy as np

from engine.linalg.causal import sqrt_coefficients
from engine.mechanisms import get
from engine.mechanisms.online_blt import fit_blt
from engine.mechanisms.online_sqrt import sqrt_closed_form_tse
from engine.privacy import Privacy
from engine.workloads import PrefixBlock, Workload

ZCDP = Privacy(noise="zcdp", rho=0.5)  # sigma = 1 per unit sensitivity


def million_steps(n: int) -> None:
    print(f"\n== {n:,}-step online-blt: plan and release ==")
    W = Workload.one_dim(PrefixBlock(n), name="day")
    counts = np.random.default_rng(0).poisson(5.0, n).astype(float)
    tracemalloc.start()
    cpu, wall = time.process_time(), time.perf_counter()
    plan = get("online-blt").plan(W, ZCDP)
    plan_cpu, plan_wall = time.process_time() - cpu, time.perf_counter() - wall
    published = plan.run(counts)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    error = published - np.cumsum(counts)
    print(f"plan {plan_cpu:.2f} CPU s ({plan_wall:.2f} wall s); plan + release {cpu:.2f} CPU s "
          f"({wall:.2f} wall s; goal < 60 s); load average {os.getloadavg()[0]:.1f}")
    print(f"peak traced memory {peak / 2**20:.0f} MiB for {n:,} steps "
          f"({peak / n:.0f} bytes per step: the data, the answers and a few work arrays); "
          f"noise state kept per step: {plan.fact('memory')} numbers "
          f"({plan.fact('buffers')} buffers and the running total)")
    print(f"RMSE analytic {plan.rmse():.3f}, this release {math.sqrt(np.mean(error**2)):.3f} "
          f"(exact noise; ratio {math.sqrt(np.mean(error**2)) / plan.rmse():.3f})")


def blt_against_optimal(exponents: range, optimal_max: int) -> None:
    print("\n== BLT (5 buffers) against the optimal causal factorization and the square "
          "root (unit total squared error) ==")
    print(f"{'n':>9} {'BLT':>14} {'optimal':>14} {'BLT/opt':>8} {'sqrt':>14} "
          f"{'BLT/sqrt':>8} {'fit CPU s':>9}")
    for e in exponents:
        n = 2**e
        cpu = time.process_time()
        blt = fit_blt(n).unit_tse
        fit_cpu = time.process_time() - cpu
        sqrt = sqrt_closed_form_tse(n)
        if n <= optimal_max:
            plan = get("online-optimal").plan(Workload.one_dim(PrefixBlock(n)), ZCDP)
            optimal = f"{plan.unit_tse():14.1f}"
            ratio = f"{blt / plan.unit_tse():8.4f}"
        else:
            optimal, ratio = f"{'(dense)':>14}", f"{'':>8}"
        print(f"{n:>9,} {blt:14.1f} {optimal} {ratio} {sqrt:14.1f} {blt / sqrt:8.4f} "
              f"{fit_cpu:9.2f}")


def sqrt_constants() -> None:
    print("\n== square-root factorization: squared sensitivity against ln(n)/pi ==")
    print(f"{'n':>9} {'sum c_k^2':>10} {'ln(n)/pi':>9} {'ratio':>6} {'tree levels':>11}")
    for e in (4, 10, 16, 20):
        n = 2**e
        s = float((sqrt_coefficients(n) ** 2).sum())
        print(f"{n:>9,} {s:10.4f} {math.log(n) / math.pi:9.4f} "
              f"{s / (math.log(n) / math.pi):6.3f} {n.bit_length():>11}")


def price_of_publishing(n: int) -> None:
    print(f"\n== price of publishing every period: RMSE at rho = 0.5, n = {n:,} ==")
    W = Workload.one_dim(PrefixBlock(n))
    offline = get("hdmm-opt0").plan(W, ZCDP)
    print(f"{'mechanism':>15} {'RMSE':>8} {'/ OPT_0':>8} {'plan CPU s':>10}")
    print(f"{'hdmm-opt0':>15} {offline.rmse():8.4f} {1.0:8.4f} {'':>10}")
    for name in ("online-tree", "online-sqrt", "online-blt", "online-optimal"):
        cpu = time.process_time()
        plan = get(name).plan(W, ZCDP)
        cpu = time.process_time() - cpu
        print(f"{name:>15} {plan.rmse():8.4f} {plan.rmse() / offline.rmse():8.4f} {cpu:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--optimal-max", type=int, default=2048,
                        help="longest horizon for the dense online-optimal (default 2048)")
    args = parser.parse_args()
    million_steps(2**16 if args.quick else 2**20)
    blt_against_optimal(range(10, 17 if args.quick else 21), args.optimal_max)
    sqrt_constants()
    if not args.quick:
        price_of_publishing(1024)


if __name__ == "__main__":
    main()
