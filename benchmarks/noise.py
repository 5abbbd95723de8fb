"""Exact noise at numpy speed? Draws per second of our samplers against numpy and OpenDP.

For sigma in {0.5, 4.2, 1e3} (the discrete Laplace at the same scale b): our exact discrete
Gaussian and discrete Laplace (``engine.noise``, CKS 2020 in vectorised int64 arithmetic)
against numpy's float ``normal`` / ``laplace`` (fast, not private: Mironov 2012) and OpenDP's
exact integer samplers (``make_gaussian`` / ``make_laplace`` on integer vectors). Goals of
issue 14: ours within 10x of numpy, at least 100x faster than OpenDP, memory O(batch): the
peak traced allocation of one call is printed beside the batch size.

Run: ``python benchmarks/noise.py [--quick]`` (quick: 2e5 draws each, 2e3 for OpenDP).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from engine.noise import BATCH, discrete_gaussian, discrete_laplace, release_rng

SIGMAS = (0.5, 4.2, 1e3)


def rate(draw, n: int) -> float:
    """Draws per second of ``draw(n)`` (best of two runs)."""
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        draw(n)
        best = min(best, time.perf_counter() - start)
    return n / best


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
    parser.add_argument("--quick", action="store_true", help="2e5 draws (2e3 for OpenDP)")
    args = parser.parse_args()
    n, n_opendp = (200_000, 2_000) if args.quick else (5_000_000, 20_000)
    rng = release_rng(0)
    opendp = opendp_samplers()
    print(f"draws per second ({n:,} draws; OpenDP {n_opendp:,}); ratios: numpy / ours "
          "(goal <= 10) and ours / OpenDP (goal >= 100)")
    print(f"{'sampler':<18} {'sigma':>7} {'ours':>12} {'numpy':>12} {'OpenDP':>10} "
          f"{'numpy/ours':>10} {'ours/OpenDP':>11}")
    for family in ("gaussian", "laplace"):
        for sigma in SIGMAS:
            if family == "gaussian":
                ours = rate(lambda k, s=sigma: discrete_gaussian(s, k, rng), n)
                numpy = rate(lambda k, s=sigma: rng.normal(0.0, s, k), n)
            else:
                ours = rate(lambda k, s=sigma: discrete_laplace(s, k, rng), n)
                numpy = rate(lambda k, s=sigma: rng.laplace(0.0, s, k), n)
            if opendp is not None:
                other = rate(opendp[0 if family == "gaussian" else 1](sigma), n_opendp)
                other_text, ratio = f"{other:10.3g}", f"{ours / other:11.0f}"
            else:
                other_text, ratio = f"{'-':>10}", f"{'-':>11}"
            print(f"discrete {family:<9} {sigma:7g} {ours:12.3g} {numpy:12.3g} {other_text} "
                  f"{numpy / ours:10.1f} {ratio}", flush=True)
    big = 4 * BATCH
    mb = peak_mb(lambda k: discrete_gaussian(4.2, k, rng), big)
    print(f"memory: peak {mb:.0f} MB traced for {big:,} discrete Gaussian draws "
          f"(output {big * 8 / 1e6:.0f} MB; batches of {BATCH:,})")


if __name__ == "__main__":
    main()
