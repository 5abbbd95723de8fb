"""Li & Miklau Figure 4: the workload reductions at n = 8192 (error over the SVD bound, time).

Run: ``python benchmarks/eigen_reductions.py [n] [--marginals-dense]`` (default n = 8192).
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
    eigen_separation,
    principal_vectors,
    principal_vectors_partial,
)
from engine.mechanisms.eigen_design.structured import kron_design
from engine.workloads import AllRangeBlock, Workload

#: Issue 4's goal for a reduction: at most this far over the bound (root scale) ...
GOAL_OVER_BOUND = 1.12
#: ... and at least this many times faster than the full algorithm.
GOAL_SPEEDUP = 50.0


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
    print("  paper (Fig. 4a, n = 8192): separation(16) +5 %, principal(6 %) +10 %, both "
          "< 12 %; time ~100x below the full algorithm")
    print(f"  goal (within {GOAL_OVER_BOUND - 1:.0%} of the bound and >= {GOAL_SPEEDUP:.0f}x "
          f"faster than the full algorithm): {', '.join(met) if met else 'met by none'}; "
          "the separation and full-eigh rows cannot reach it once Program 1 is fast, since "
          "they keep the full algorithm's O(n**3) eigh")


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
    n = int(args[0]) if args else 8192
    all_range(n)
    side = round(math.sqrt(n / 8))
    marginals((8, side, side), "--marginals-dense" in sys.argv)
