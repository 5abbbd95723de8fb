"""Exact noise at numpy speed? Draws per second of our samplers against numpy and OpenDP.

For sigma in {0.5, 4.2, 1e3} (the discrete Laplace at the same scale b): our exact discrete
Gaussian and discrete Laplace (``engine.noise``: the Laplace by certified inversion of one
64-bit draw, the Gaussian by CKS 2020's rejection from it) against numpy's float ``normal`` /
``laplace`` (fast, not private: Mironov 2012) and OpenDP's exact integer samplers
(``make_gaussian`` / ``make_laplace`` on an integer *vector*, one call for the whole vector, as
a user releasing many answers calls them; measured at two vector lengths to show its rate per
draw does not depend on the length). Goals of issue 14: ours within 10x of numpy, at least
100x faster than OpenDP, memory O(batch): the peak traced allocation of one call of 4e6 draws
is printed beside the batch size.

Run: ``python benchmarks/noise.py [--quick]`` (quick: 2e5 draws each, 2e3 and 2e4 for OpenDP).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from engine.noise import BATCH, discrete_gaussian, discrete_laplace, release_rng

SIGMAS = (0.5, 4.2, 1e3)


def rate(draw, n: int) -> float:
    """Draws per second of ``draw(n)`` (best of two runs)."""
    return rates([draw], n, 2)[0]


def rates(draws: list, n: int, rounds: int = 3) -> list[float]:
    """Draws per CPU second of each ``draw(n)``, best of ``rounds`` interleaved runs.

    CPU time of this process (``time.process_time``), not wall-clock: on a shared machine
    the wall-clock rate of the same call varies several-fold with the load, the CPU time by a
    few per cent. Every sampler here runs on one thread, so the two agree on an idle machine.
    """
    best = [float("inf")] * len(draws)
    for _ in range(rounds):
        for i, draw in enumerate(draws):
            start = time.process_time()
            draw(n)
            best[i] = min(best[i], time.process_time() - start)
    return [n / b for b in best]


def peak_mb(draw, n: int) -> float:
    """Peak traced allocation (MB) of one ``draw(n)``."""
    tracemalloc.start()
    draw(n)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def opendp_samplers():
    """OpenDP's exact integer Gaussian / Laplace measurements, or None when not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=int))

    def gaussian(sigma: float):
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=int), scale=sigma)
        return lambda n: meas([0] * n)

    def laplace(scale: float):
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=scale)
        return lambda n: meas([0] * n)

    return gaussian, laplace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2e5 draws (OpenDP: vectors of 2e3 and 2e4)")
    args = parser.parse_args()
    n, n_opendp = (200_000, 2_000) if args.quick else (5_000_000, 20_000)
    rng = release_rng(0)
    opendp = opendp_samplers()
    print(f"draws per CPU second ({n:,} draws; OpenDP on vectors of {n_opendp:,} and "
          f"{10 * n_opendp:,}, the slower length's rate in the ratio); ratios: numpy / ours "
          "(goal <= 10) and ours / OpenDP (goal >= 100)")
    print(f"{'sampler':<18} {'sigma':>7} {'ours':>12} {'numpy':>12} {'OpenDP':>10} "
          f"{'OpenDP x10':>10} {'numpy/ours':>10} {'ours/OpenDP':>11}")
    for family in ("gaussian", "laplace"):
        for sigma in SIGMAS:
            if family == "gaussian":
                ours, numpy = rates([lambda k, s=sigma: discrete_gaussian(s, k, rng),
                                     lambda k, s=sigma: rng.normal(0.0, s, k)], n)
            else:
                ours, numpy = rates([lambda k, s=sigma: discrete_laplace(s, k, rng),
                                     lambda k, s=sigma: rng.laplace(0.0, s, k)], n)
            if opendp is not None:
                draw = opendp[0 if family == "gaussian" else 1](sigma)
                short, long = rate(draw, n_opendp), rate(draw, 10 * n_opendp)
                other_text = f"{short:10.3g} {long:10.3g}"
                ratio = f"{ours / min(short, long):11.0f}"
            else:
                other_text, ratio = f"{'-':>10} {'-':>10}", f"{'-':>11}"
            print(f"discrete {family:<9} {sigma:7g} {ours:12.3g} {numpy:12.3g} {other_text} "
                  f"{numpy / ours:10.1f} {ratio}", flush=True)
    big = 4_000_000
    mb = peak_mb(lambda k: discrete_gaussian(4.2, k, rng), big)
    print(f"memory: peak {mb:.0f} MB traced for {big:,} discrete Gaussian draws "
          f"(output {big * 8 / 1e6:.0f} MB; batches of {BATCH:,})")


if __name__ == "__main__":
    main()
