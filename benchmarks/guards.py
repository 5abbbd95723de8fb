"""How good is the cost model? Its estimates against measured peak memory and time.

For 20 (workload, mechanism) pairs from 16 cells to 1e64 cells: the time the estimate itself
takes (goal of issue 15: < 50 ms), the estimated peak memory of planning and of running on a
data vector, and, for the pairs small enough to run here, the measured peak traced allocation
(``tracemalloc``: numpy's arrays included) and wall time of plan + measure + reconstruct on
1,000 random records. The
ratio estimate / measured is the figure of merit (goal: within 4x for memory); for time the
implied operations per second shows how far the rough operation count is from a clock. Pairs
marked "refused" exceed the default budget and are refused by ``Mechanism.plan``.

Run: ``python benchmarks/guards.py [--quick]`` (quick: measure only pairs whose estimate is
below 64 MB; the full run measures up to 1 GB).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np
import pandas as pd

from engine.analysis.cost_model import format_bytes, memory_limit
from engine.data import Dataset
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.scenario import Scenario


def _attrs(count: int, size: int) -> dict[str, int]:
    return {f"a{i}": size for i in range(count)}


def _spec(domain: dict, workload: list) -> dict:
    return {"domain": domain, "workload": workload}


PAIRS: list[tuple[str, dict, str]] = [
    ("prefix 16", _spec({"x": 16}, [{"product": {"x": "prefix"}}]), "identity"),
    ("prefix 64", _spec({"x": 64}, [{"product": {"x": "prefix"}}]), "hdmm-opt0"),
    ("all_range 256", _spec({"x": 256}, [{"product": {"x": "all_range"}}]), "hdmm-opt0"),
    ("all_range 1024", _spec({"x": 1024}, [{"product": {"x": "all_range"}}]), "identity"),
    ("prefix 4096", _spec({"x": 4096}, [{"product": {"x": "prefix"}}]), "h2"),
    ("prefix 65536", _spec({"x": 65536}, [{"product": {"x": "prefix"}}]), "wavelet"),
    ("identity 1e6", _spec({"x": 1_000_000}, [{"product": {"x": "identity"}}]), "identity"),
    (
        "prefix x identity 64^2",
        _spec({"x": 64, "y": 64}, [{"product": {"x": "prefix", "y": "identity"}}]),
        "hdmm-kron",
    ),
    ("2-way marginals 16^3", _spec(_attrs(3, 16), [{"marginals": {"k": 2}}]), "residual-planner"),
    (
        "2-way marginals 16^3 OPT_M",
        _spec(_attrs(3, 16), [{"marginals": {"k": 2}}]),
        "hdmm-marginals",
    ),
    ("2-way marginals 10^4", _spec(_attrs(4, 10), [{"marginals": {"k": 2}}]), "identity"),
    ("3-way marginals 10^6", _spec(_attrs(6, 10), [{"marginals": {"k": 3}}]), "querysmasher"),
    ("prefix 8192 OPT_0", _spec({"x": 8192}, [{"product": {"x": "prefix"}}]), "hdmm-opt0"),
    ("2-way marginals 10^8", _spec(_attrs(8, 10), [{"marginals": {"k": 2}}]), "residual-planner"),
    ("prefix 1e9", _spec({"x": 1_000_000_000}, [{"product": {"x": "prefix"}}]), "identity"),
    ("total 1e18", _spec({"x": 10**18}, [{"product": {"x": "total"}}]), "identity"),
    ("2-way marginals 10^16", _spec(_attrs(16, 10), [{"marginals": {"k": 2}}]), "querysmasher"),
    ("2-way marginals 10^32", _spec(_attrs(32, 10), [{"marginals": {"k": 2}}]), "residual-planner"),
    ("2-way marginals 10^64", _spec(_attrs(64, 10), [{"marginals": {"k": 2}}]), "hdmm"),
    (
        "identity product 10^64",
        _spec(_attrs(64, 10), [{"product": {f"a{i}": "identity" for i in range(64)}}]),
        "identity",
    ),
]


def estimate_ms(mech, workload, privacy) -> tuple[object, float]:
    """The estimate and the best of three times to compute it, in milliseconds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        cost = mech.estimate(workload, privacy)
        best = min(best, time.perf_counter() - start)
    return cost, best * 1e3


def sample_data(workload, records: int = 1000):
    """``records`` random records over the workload's domain (a Dataset)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({a.name: rng.integers(0, a.size, size=records) for a in workload.domain})
    return Dataset(frame, workload.domain)


def measure(mech, workload, privacy) -> tuple[float, float]:
    """Peak traced bytes and seconds of plan + measure + reconstruct on 1,000 records.

    Time is taken without tracing (tracemalloc slows numpy's small allocations) after one
    warm-up run that pays for lazy imports.
    """
    data = sample_data(workload)
    rng = np.random.default_rng(0)
    mech.plan(workload, privacy).run(data, rng)
    start = time.perf_counter()
    mech.plan(workload, privacy).run(data, rng)
    seconds = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    mech.plan(workload, privacy).run(data, rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return float(peak), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="measure only the smallest pairs")
    args = parser.parse_args()
    measure_below = 64 * 2**20 if args.quick else 2**30
    privacy = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    limit = memory_limit()
    print(
        f"memory budget {format_bytes(limit)}; measuring pairs estimated below "
        f"{format_bytes(measure_below)}"
    )
    print(
        f"{'workload':<28}{'mechanism':<18}{'est ms':>7}{'est peak':>12}{'measured':>12}"
        f"{'ratio':>7}{'seconds':>9}{'ops/s':>9}"
    )
    ratios, slowest = [], 0.0
    for label, spec, name in PAIRS:
        workload = Scenario.from_spec(spec).workload
        mech = get(name)
        cost, ms = estimate_ms(mech, workload, privacy)
        slowest = max(slowest, ms)
        peak = cost.peak_bytes
        row = f"{label:<28}{name:<18}{ms:>7.2f}{peak:>12.3g}"
        try:
            mech.check(workload, privacy)
        except ValueError as exc:
            print(f"{row}  not applicable: {str(exc)[:60]}")
            continue
        if peak > limit:
            print(f"{row}  refused (over the budget)")
            continue
        if peak > measure_below:
            print(f"{row}  (estimate only)")
            continue
        measured, seconds = measure(mech, workload, privacy)
        ratio = peak / max(measured, 1.0)
        ratios.append(ratio)
        ops = (cost.plan_operations + cost.run_operations) / max(seconds, 1e-9)
        print(f"{row}{measured:>12.3g}{ratio:>7.2f}{seconds:>9.3f}{ops:>9.2g}")
    within = sum(1 for r in ratios if 0.25 <= r <= 4.0)
    print(
        f"\nslowest estimate: {slowest:.1f} ms (goal < 50 ms); memory estimate within 4x of "
        f"the measured peak on {within} of {len(ratios)} measured pairs "
        f"(ratios {min(ratios):.2g} .. {max(ratios):.2g})"
    )


if __name__ == "__main__":
    main()
