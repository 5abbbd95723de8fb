"""Li & Miklau Figure 4: the workload reductions at n = 8192 (error over the SVD bound, time).

Run: ``python benchmarks/eigen_reductions.py [n] [--marginals-dense]`` (default n = 8192), or
``python benchmarks/eigen_reductions.py [n] --separation`` for issue 19's separation goal alone
(the full algorithm and separation without eigh on all ranges, iterative and closed-form,
CPU seconds of this process; n = 8192 takes about 2.5 minutes of CPU, most of it the full
algorithm's eigh, which runs explicitly; ``--quick`` is n = 2048, 15 s).
On a shared, busy machine prefix ``OPENBLAS_NUM_THREADS=1``: OpenBLAS threads that wait for a
busy core spin, which inflates the many mid-size products of the reductions far more than the
one large eigh (the thread setting and the load average are printed).
Goal (issue 4): reductions within 12 % of the bound and at least 50x faster than the full
algorithm. Paper: separation with groups of 16 costs +5 % (all ranges) / +11 % (2-way
marginals); principal vectors with 6 % of the eigenvectors +10 % / +0 %; both cut the time by
about two orders of magnitude.

What is timed: the Gram is built once; the full algorithm is eigh + Program 1 + completion +
exact error; separation and the eigh-based principal vectors reuse that eigh, so their time is
eigh + their own stage; the *partial* principal vectors never compute the eigendecomposition
nor a dense Gram (randomized dominant subspace on the O(n)-per-product Gram operator), which
is where the factor of 50 comes from now that Program 1 itself is fast (our dual solver) and
the O(n**3) eigh dominates the full algorithm.
"""

from __future__ import annotations

import math
import os
import sys
import time

from engine.domain import Domain
from engine.mechanisms.eigen_design.design import dense_gram, eigen_design, eigen_queries
from engine.mechanisms.eigen_design.gram import GramOperator
from engine.mechanisms.eigen_design.reductions import (
    default_group_size,
    eigen_separation,
    principal_vectors,
    principal_vectors_partial,
    separation_partial,
)
from engine.mechanisms.eigen_design.sines import all_range_separation
from engine.mechanisms.eigen_design.structured import kron_design
from engine.workloads import AllRangeBlock, Workload

#: Issue 4's goal for a reduction: at most this far over the bound (root scale) ...
GOAL_OVER_BOUND = 1.12
#: ... and at least this many times faster than the full algorithm.
GOAL_SPEEDUP = 50.0
#: Issue 19's goal for separation at n = 8192: at least this many times faster than the full
#: algorithm ...
SEPARATION_SPEEDUP = 20.0
#: ... with an error within this factor of the full algorithm's, both ways (root scale).
SEPARATION_ERROR = 1.02
#: Fractions of the eigen-queries the partial eigensolver computes for separation.
SEPARATION_FRACTIONS = (0.20, 0.25)


def row(label: str, error: float, bound: float, seconds: float, full: float | None,
        extra: str = "") -> bool:
    """Print one method; True when it meets the goal (within 12 % and >= 50x faster)."""
    ratio = math.sqrt(error / bound)
    speed = f"{full / seconds:>8.1f}" if full else f"{'-':>8}"
    print(f"  {label:<34} {ratio:>8.4f} {100 * (ratio - 1):>7.1f}% {seconds:>9.2f} {speed}  "
          f"{extra}")
    return full is not None and ratio <= GOAL_OVER_BOUND and full / seconds >= GOAL_SPEEDUP


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"  {'method':<34} {'E/bound':>8} {'over':>8} {'seconds':>9} {'speedup':>8}  notes")


def all_range(n: int) -> None:
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    header(f"All 1-D ranges, n = {n} (load average {os.getloadavg()[0]:.1f}, "
           f"OPENBLAS_NUM_THREADS={threads})")
    start = time.perf_counter()
    G = AllRangeBlock(n).gram_array()
    gram = time.perf_counter() - start
    start = time.perf_counter()
    eig = eigen_queries(G)
    eigh = time.perf_counter() - start
    start = time.perf_counter()
    full = eigen_design(eig)
    full_seconds = gram + eigh + time.perf_counter() - start
    bound = eig.svd_bound
    program1 = full.program1[0]
    row("full Eigen-Design", full.unit_error(), bound, full_seconds, None,
        f"eigh {eigh:.1f} s, Program 1 {program1['seconds']:.1f} s (gap "
        f"{program1['gap']:.0e}), completion + exact error "
        f"{full_seconds - gram - eigh - program1['seconds']:.1f} s")
    met = []
    for g in (8, 16):
        start = time.perf_counter()
        design = eigen_separation(eig, g)
        seconds = gram + eigh + time.perf_counter() - start
        label = f"separation, groups of {g}"
        if row(label, design.unit_error(), bound, seconds, full_seconds,
               f"(needs the full eigh; its own stage {seconds - gram - eigh:.1f} s)"):
            met.append(label)
    for fraction in (0.06, 0.10, 0.25):
        start = time.perf_counter()
        design = principal_vectors(eig, fraction)
        seconds = gram + eigh + time.perf_counter() - start
        label = f"principal {fraction:.0%}, full eigh"
        if row(label, design.unit_error(), bound, seconds, full_seconds,
               f"(own stage {seconds - gram - eigh:.1f} s)"):
            met.append(label)
    for fraction in (0.06, 0.10, 0.25):
        start = time.perf_counter()
        design = principal_vectors_partial(GramOperator(Workload.one_dim(AllRangeBlock(n))),
                                           fraction)
        seconds = time.perf_counter() - start
        label = f"principal {fraction:.0%}, no eigh (partial)"
        if row(label, design.unit_error(), bound, seconds, full_seconds,
               f"k = {design.info['principal']}, implicit O(n) Gram"):
            met.append(label)
    for fraction in SEPARATION_FRACTIONS:
        start = time.perf_counter()
        design = separation_partial(GramOperator(Workload.one_dim(AllRangeBlock(n))),
                                    fraction)
        seconds = time.perf_counter() - start
        label = f"separation {fraction:.0%}, iterative"
        if row(label, design.unit_error(), bound, seconds, full_seconds,
               f"error {math.sqrt(design.unit_error() / full.unit_error()):.4f}x the full "
               f"algorithm's, groups of {design.info['group_size']}"):
            met.append(label)
    start = time.perf_counter()
    design = all_range_separation(n)
    seconds = time.perf_counter() - start
    if row("separation, closed-form sines", design.unit_error(), bound, seconds, full_seconds,
           f"error {math.sqrt(design.unit_error() / full.unit_error()):.4f}x the full "
           f"algorithm's, {design.strategy.cells.size} completed cells"):
        met.append("separation, closed-form sines")
    print("  paper (Fig. 4a, n = 8192): separation(16) +5 %, principal(6 %) +10 %, both "
          "< 12 %; time ~100x below the full algorithm")
    print(f"  goal (within {GOAL_OVER_BOUND - 1:.0%} of the bound and >= {GOAL_SPEEDUP:.0f}x "
          f"faster than the full algorithm): {', '.join(met) if met else 'met by none'}; "
          "the separation and full-eigh rows cannot reach it once Program 1 is fast, since "
          "they keep the full algorithm's O(n**3) eigh")


def separation_goal(n: int) -> None:
    """Issue 19: separation without eigh against the full algorithm, CPU time, one run.

    The full algorithm runs explicitly at n (dense Gram, eigh, Program 1, completion, exact
    error; ``max_dense_cells`` is the mechanism's default routing cap, not a limit of
    ``eigen_design``, which takes n up to the dense Gram's 16,384). CPU seconds of this
    process with one BLAS thread are what a busy machine does not inflate; wall seconds beside.
    """
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"Separation without eigh vs the full algorithm, all ranges, n = {n} (load average "
          f"{os.getloadavg()[0]:.1f}, OPENBLAS_NUM_THREADS={threads})")
    cpu, wall = time.process_time(), time.perf_counter()
    eig = eigen_queries(AllRangeBlock(n).gram_array())
    full = eigen_design(eig)
    full_cpu, full_wall = time.process_time() - cpu, time.perf_counter() - wall
    bound = eig.svd_bound
    print(f"  {'method':<30} {'E/full':>7} {'E/bound':>8} {'CPU s':>8} {'wall s':>8} "
          f"{'speedup':>8}  goal (>= {SEPARATION_SPEEDUP:.0f}x, within "
          f"{SEPARATION_ERROR - 1:.0%} both ways)")
    print(f"  {'full Eigen-Design':<30} {1.0:>7.4f} {math.sqrt(full.unit_error() / bound):>8.4f}"
          f" {full_cpu:>8.2f} {full_wall:>8.2f} {'-':>8}  eigh {eig.seconds:.1f} s wall")
    W = Workload.one_dim(AllRangeBlock(n))
    runs = [(f"separation {fraction:.0%}, iterative",
             lambda fraction=fraction: separation_partial(GramOperator(W), fraction))
            for fraction in SEPARATION_FRACTIONS]
    runs.append(("separation, closed-form sines", lambda: all_range_separation(n)))
    for label, build in runs:
        cpu, wall = time.process_time(), time.perf_counter()
        design = build()
        sep_cpu, sep_wall = time.process_time() - cpu, time.perf_counter() - wall
        error = math.sqrt(design.unit_error() / full.unit_error())
        speedup = full_cpu / sep_cpu
        met = (speedup >= SEPARATION_SPEEDUP
               and 1.0 / SEPARATION_ERROR <= error <= SEPARATION_ERROR)
        print(f"  {label:<30} {error:>7.4f} {math.sqrt(design.unit_error() / bound):>8.4f} "
              f"{sep_cpu:>8.2f} {sep_wall:>8.2f} {speedup:>7.1f}x  "
              f"{'met' if met else 'NOT met'} (groups of {default_group_size(n)}, "
              f"{design.strategy.cells.size} completed cells)")
    print("  iterative: randomized dominant subspace of the O(n) Gram operator, the rest one "
          "shared weight (any Gram with fast products; O(fraction**2 n**3), so its speed-up "
          "does not grow with n); closed-form: the all-range Gram's eigen-queries are the "
          "DST-I sines (all ranges only), completion on the n / 8 neediest cells")


def marginals(n_shape: tuple[int, ...], dense: bool) -> None:
    dom = Domain.from_sizes(list(n_shape))
    W = Workload.marginals(dom, k=2)
    header(f"All 2-way marginals on {' x '.join(map(str, n_shape))} = {dom.size} cells")
    start = time.perf_counter()
    kron = kron_design(W)
    kron_seconds = time.perf_counter() - start
    bound = kron.info["svd_bound"]
    row("Kronecker eigenbasis (exact)", kron.unit_error(), bound, kron_seconds, None,
        kron.program1[0]["method"])
    if not dense:
        print("  (--marginals-dense adds the dense full algorithm and its reductions)")
        return
    start = time.perf_counter()
    G = dense_gram(W)
    eig = eigen_queries(G)
    eigh = time.perf_counter() - start
    start = time.perf_counter()
    full = eigen_design(eig)
    full_seconds = eigh + time.perf_counter() - start
    row("full Eigen-Design (dense)", full.unit_error(), bound, full_seconds, None,
        f"rank {eig.rank}")
    for label, build in (("separation, groups of 16", lambda: eigen_separation(eig, 16)),
                         ("principal 6 %, full eigh", lambda: principal_vectors(eig, 0.06))):
        start = time.perf_counter()
        design = build()
        seconds = eigh + time.perf_counter() - start
        row(label, design.unit_error(), bound, seconds, full_seconds)
    print("  paper (Fig. 4b): separation(16) +11 %, principal(6 %) +0 %")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else (2048 if "--quick" in sys.argv else 8192)
    if "--separation" in sys.argv or "--quick" in sys.argv:
        separation_goal(n)
        sys.exit(0)
    all_range(n)
    side = round(math.sqrt(n / 8))
    marginals((8, side, side), "--marginals-dense" in sys.argv)
