"""Scale-out (issue 18): the same planning and trials serially, on a local process pool and on
a Dask LocalCluster, with speed-ups, per-task overhead and peak memory per worker.

Work: QuerySmasher on Table 7 rows (all 1-way range + 2-way affine + 3-way prefix on [n]^d;
n=10, d=50 and n=30, d=30), whose distinct non-Kronecker SDPs go through the executor, and
census Monte-Carlo trials (hierarchical-pgsr ``dp`` on the default synthetic census, seeded:
the trial values must be the same on every executor, and the script checks that they are).

Executors: ``serial`` (in-process), ``pool`` (:func:`engine.executor.local_pool`, 2 spawn
processes), ``dask-2`` (LocalCluster, 2 single-threaded worker processes). Start-up is timed
apart from the work. Per-task overhead is the wall time per no-op task when 200 are mapped at
once. Goal: dask-2 within 10 % of the pool.

The machine has 2 cores, so a 4-worker cluster cannot run 4 things at once: ``dask-4``
(LocalCluster, 4 single-threaded workers) reports how evenly the work is spread instead, from
Dask's task stream: busiest worker's busy seconds, and total work / busiest worker (the
speed-up 4 real cores would give; 4.0 is linear). Wall times of dask-4 on 2 cores are printed
but mean little.

Usage: ``python benchmarks/scale_out.py [--quick]`` (quick: n=10, d=10 and d=20; 40 trials).
"""

from __future__ import annotations

import os

# One BLAS thread per process: several processes on a 2-core machine oversubscribe otherwise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from concurrent.futures import Executor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from querysmasher_workloads import mixed_workload  # noqa: E402

from engine.executor import (  # noqa: E402
    SerialExecutor,
    dask_client,
    dask_executor,
    local_pool,
    map_ordered,
)
from engine.experiments import census_trials, synthetic_hierarchy  # noqa: E402
from engine.mechanisms.residual import QuerySmasher  # noqa: E402
from engine.privacy import Privacy  # noqa: E402

BETA1 = Privacy(noise="zcdp", rho=0.5)
CENSUS = "levels=1,6,30;groups=20000;max_size=50;seed=0"
NOOP_TASKS = 200


def _noop(x: int) -> int:
    return x


def _peak_rss_mb(_: int = 0) -> tuple[int, float]:
    time.sleep(0.3)  # long enough that every worker takes one
    return os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of ``fn()`` and its value."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def qs_work(executor: Executor, n: int, d: int) -> float:
    """QuerySmasher's plan of the Table 7 row; returns the plan's total squared error."""
    return QuerySmasher(executor=executor).plan(mixed_workload(n, d), BETA1).tse()


@functools.cache
def census_hierarchy() -> Any:
    """The synthetic census, generated once (its generation is not the work measured)."""
    return synthetic_hierarchy(CENSUS)


def census_work(executor: Executor, trials: int) -> np.ndarray:
    """Seeded census trials; returns the per-trial RMSEs."""
    run = census_trials(census_hierarchy(), ["dp"], 1.0, trials, seed=18, executor=executor)
    return run.evaluations["dp"].rmse_trials


def pool_peak_mb(executor: Executor, workers: int) -> float:
    """Largest peak resident memory (MB) among the pool's worker processes."""
    peaks = dict(map_ordered(executor, _peak_rss_mb, range(2 * workers)))
    return max(peaks.values())


def dask_peak_mb(client: Any) -> float:
    """Largest peak resident memory (MB) among the cluster's worker processes."""
    return max(mb for _, mb in client.run(_peak_rss_mb).values())


def run_suite(
    name: str,
    executor: Executor,
    rows: list[tuple[int, int]],
    trials: int,
    serial: dict[str, Any] | None,
) -> dict[str, Any]:
    """Time every piece of work on ``executor`` and check it against the serial results.

    A small plan and two trials run first, untimed, so that imports and first-call set-up
    in this process and in every worker are not counted as work.
    """
    for _ in range(2):
        qs_work(executor, 6, 4)
        census_work(executor, 16)
    out: dict[str, Any] = {}
    for n, d in rows:
        out[f"qs {n},{d}"] = timed(lambda n=n, d=d: qs_work(executor, n, d))
    out["census"] = timed(lambda: census_work(executor, trials))
    if not isinstance(executor, SerialExecutor):
        out["noop"] = timed(lambda: map_ordered(executor, _noop, range(NOOP_TASKS)))
    if serial is not None:
        for key, (_, value) in out.items():
            if key == "noop":
                continue
            expected = serial[key][1]
            same = (
                np.array_equal(value, expected)
                if key == "census"
                else abs(value - expected) <= 1e-12 * abs(expected)
            )
            if not same:
                raise SystemExit(f"{name}: {key} differs from the serial result")
    return out


def balance(client: Any, work: Callable[[], Any]) -> tuple[float, float, float]:
    """Wall seconds, busiest worker's busy seconds and total work / busiest worker."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        wall, _ = timed(work)
    busy: dict[str, float] = {}
    for task in stream.data:
        for span in task["startstops"]:
            if span["action"] == "compute":
                busy[task["worker"]] = busy.get(task["worker"], 0.0) + span["stop"] - span["start"]
    busiest = max(busy.values())
    return wall, busiest, sum(busy.values()) / busiest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small rows, 40 trials")
    args = parser.parse_args()
    rows = [(10, 10), (10, 20)] if args.quick else [(10, 50), (30, 30)]
    trials = 40 if args.quick else 200
    print(f"cores: {os.cpu_count()}; rows (n, d): {rows}; census trials: {trials}")

    results: dict[str, dict[str, Any]] = {}
    results["serial"] = run_suite("serial", SerialExecutor(), rows, trials, None)
    startup: dict[str, float] = {}
    peaks: dict[str, float] = {}

    start = time.perf_counter()
    with local_pool(2) as pool:
        map_ordered(pool, _noop, range(2))  # start both processes
        startup["pool"] = time.perf_counter() - start
        results["pool"] = run_suite("pool", pool, rows, trials, results["serial"])
        peaks["pool"] = pool_peak_mb(pool, 2)

    start = time.perf_counter()
    client = dask_client(workers=2)
    try:
        startup["dask-2"] = time.perf_counter() - start
        results["dask-2"] = run_suite(
            "dask-2", dask_executor(client), rows, trials, results["serial"]
        )
        peaks["dask-2"] = dask_peak_mb(client)
    finally:
        client.close()
        client.cluster.close()

    keys = list(results["serial"])
    print(
        f"\n{'work':<12}"
        + "".join(f"{name:>12}" for name in results)
        + f"{'pool x':>9}{'dask-2 x':>9}{'dask/pool':>10}"
    )
    for key in keys:
        walls = [results[name][key][0] for name in results]
        print(
            f"{key:<12}"
            + "".join(f"{w:>11.2f}s" for w in walls)
            + f"{walls[0] / walls[1]:>9.2f}{walls[0] / walls[2]:>9.2f}"
            + f"{walls[2] / walls[1]:>10.2f}"
        )
    for name in ("pool", "dask-2"):
        per_task = results[name]["noop"][0] / NOOP_TASKS * 1e3
        print(
            f"{name}: start-up {startup[name]:.2f} s, per-task overhead {per_task:.2f} ms "
            f"({NOOP_TASKS} no-op tasks), peak memory per worker {peaks[name]:.0f} MB"
        )
    print(
        "(x: speed-up over serial; dask/pool: Dask's wall time over the pool's, goal <= 1.10;"
        " results identical to serial: checked)"
    )

    client = dask_client(workers=4)
    try:
        executor = dask_executor(client)
        print("\ndask-4 (4 single-threaded workers on 2 cores): work balance from the task stream")
        print(f"{'work':<12}{'wall':>9}{'busiest':>10}{'work/busiest':>14}")
        for n, d in rows:
            wall, busiest, ratio = balance(client, lambda n=n, d=d: qs_work(executor, n, d))
            print(f"{f'qs {n},{d}':<12}{wall:>8.2f}s{busiest:>9.2f}s{ratio:>14.2f}")
        wall, busiest, ratio = balance(client, lambda: census_work(executor, trials))
        print(f"{'census':<12}{wall:>8.2f}s{busiest:>9.2f}s{ratio:>14.2f}")
        print(
            "(work/busiest: the speed-up 4 real cores would give, 4.00 is linear; QuerySmasher"
            " sends only its distinct non-Kronecker SDPs, so one large SDP bounds it)"
        )
    finally:
        client.close()
        client.cluster.close()


if __name__ == "__main__":
    main()
