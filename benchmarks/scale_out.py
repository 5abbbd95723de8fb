"""Scale-out (issue 18): the same planning and trials serially, on a local process pool and on
a Dask LocalCluster, with speed-ups, per-task overhead and peak memory per worker.

Work: QuerySmasher on Table 7 rows (all 1-way range + 2-way affine + 3-way prefix on [n]^d;
n=10, d=50 and n=30, d=30), whose distinct non-Kronecker SDPs go through the executor; a
workload of many SDPs of different sizes (1-way prefix + every 2-way affine pair on
attributes of sizes 12..20, or 14..24 in the full run: 15 pairs, 10 of them heavy), which
shows how the executors spread uneven work; and census Monte-Carlo trials
(hierarchical-pgsr ``dp`` on the default synthetic census, seeded: the trial values must be
the same on every executor, and the script checks that they are).

Executors: ``serial`` (in-process), ``pool`` (:func:`engine.executor.local_pool`, 2 spawn
processes), ``dask-2`` (:func:`engine.executor.dask_client`: LocalCluster, 2 single-threaded
worker processes). Start-up is timed apart from the work, and every executor first runs a
small plan, a few trials and no-op tasks untimed, twice, so that imports and first calls in
this process and in every worker (pool and Dask alike) are not counted. Every piece of work
then runs ``--repeats`` times (cheap pieces three times as often), the three executors taking
turns within each repeat: a burst of someone else's load then hits neighbouring runs of every
executor. Printed: the median wall (and CPU) seconds of each executor with their spread
(min..max), and each ratio as the median over repeats of the ratio within one repeat, with
its spread. CPU seconds are this process's (Dask's scheduler and client run here) plus the
executor's own worker processes (the pool's; the Dask workers: their nannies run here). Per-task
overhead is the wall time per no-op task when 200 are mapped at once. Goal: dask-2 within
10 % of the pool.

The machine has 2 cores, so a 4-worker cluster cannot run 4 things at once: ``dask-4``
(LocalCluster, 4 single-threaded workers) reports how evenly the work is spread instead, from
Dask's task stream: total work / busiest worker's busy seconds (the speed-up 4 real cores
would give; 4.00 is linear), beside the bound no schedule can beat, min(4, total work /
longest single task): a row whose work is one indivisible SDP has a bound near 1.

Usage: ``python benchmarks/scale_out.py [--quick] [--repeats R] [--work census ...]``
(quick: n=10, d=10 and d=20, pairs on 12..20, 40 trials; 3 repeats by default; ``--work``
picks pieces among ``qs``, ``pairs``, ``census``, e.g. ``--work census --repeats 5`` re-measures
the 200-trial census alone: about a minute on a quiet machine, 4-5 at load average 10).
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
from collections.abc import Callable, Sequence  # noqa: E402
from concurrent.futures import Executor, ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from querysmasher_workloads import mixed_workload, pair_groups  # noqa: E402

from engine.domain import Domain  # noqa: E402
from engine.executor import (  # noqa: E402
    SerialExecutor,
    dask_client,
    dask_executor,
    local_pool,
    map_ordered,
)
from engine.mechanisms.residual import QuerySmasher  # noqa: E402
from engine.privacy import Privacy  # noqa: E402
from engine.workflows.evaluate import census_trials, synthetic_hierarchy  # noqa: E402
from engine.workloads import Workload  # noqa: E402
from engine.workloads.groups import PrefixMarginals  # noqa: E402

BETA1 = Privacy(noise="zcdp", rho=0.5)
CENSUS = "levels=1,6,30;groups=20000;max_size=50;seed=0"
NOOP_TASKS = 200
#: The pieces of work ``--work`` picks from.
PIECES = ("qs", "pairs", "census")


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


def cpu_seconds(processes: Sequence[Any]) -> float:
    """CPU seconds so far of this process (every thread: Dask's scheduler and client run here)
    and of ``processes`` (``psutil.Process``: an executor's workers)."""
    import psutil  # a dependency of distributed

    total = time.process_time()
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def pool_processes(pool: ProcessPoolExecutor) -> list[Any]:
    """The pool's worker processes (``psutil.Process``)."""
    import psutil

    return [psutil.Process(pid) for pid in pool._processes]  # no public accessor


def dask_processes(client: Any) -> list[Any]:
    """The local cluster's worker processes (``psutil.Process``; their nannies run in this
    process, as does the scheduler)."""
    import psutil

    return [psutil.Process(pid) for pid in client.run(os.getpid).values()]


def qs_work(executor: Executor, n: int, d: int) -> float:
    """QuerySmasher's plan of the Table 7 row; returns the plan's total squared error."""
    return QuerySmasher(executor=executor).plan(mixed_workload(n, d), BETA1).tse()


def pairs_workload(sizes: tuple[int, ...]) -> Workload:
    """1-way prefix and every 2-way affine pair on numeric attributes of ``sizes``: one
    distinct SDP per pair, of ``a * b`` cells."""
    dom = Domain.from_sizes(list(sizes), kinds=["numeric"] * len(sizes))
    return Workload(dom, tuple([PrefixMarginals(k=1)] + pair_groups(dom, "affine")))


def pairs_work(executor: Executor, sizes: tuple[int, ...]) -> float:
    """QuerySmasher's plan of :func:`pairs_workload`; returns its total squared error."""
    return QuerySmasher(executor=executor).plan(pairs_workload(sizes), BETA1).tse()


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


def same_as_serial(key: str, value: Any, expected: Any) -> bool:
    """Census trial values equal exactly; a plan's error to 1e-12."""
    if key == "census":
        return bool(np.array_equal(value, expected))
    return abs(value - expected) <= 1e-12 * abs(expected)


def spread(values: Sequence[float], fmt: str) -> str:
    """``median (min..max)`` of ``values``."""
    return f"{np.median(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def run_suites(
    executors: dict[str, Executor],
    processes: dict[str, Callable[[], list[Any]]],
    work: dict[str, Callable[[Executor], Any]],
    repeats: dict[str, int],
) -> dict[str, dict[str, list[float]]]:
    """Wall seconds (``key``) and CPU seconds (``key cpu``) of every piece of work on every
    executor, ``repeats[key]`` times, the executors taking turns within each repeat; every
    result is checked against the serial one (the first executor's). ``processes[name]()``
    lists the worker processes whose CPU counts for executor ``name``.

    A small plan, a few trials and no-op tasks run first on each executor, untimed, twice, so
    that imports and first-call set-up in this process and in every worker are not counted.
    """
    for executor in executors.values():
        for _ in range(2):
            qs_work(executor, 6, 4)
            census_work(executor, 16)
            map_ordered(executor, _noop, range(4))
    found = {name: processes[name]() for name in executors}  # a pool starts them on demand
    times: dict[str, dict[str, list[float]]] = {name: {} for name in executors}
    reference: dict[str, Any] = {}
    for key, fn in work.items():
        for _ in range(repeats[key]):
            for name, executor in executors.items():
                cpu = cpu_seconds(found[name])
                wall, value = timed(lambda fn=fn, executor=executor: fn(executor))
                cpu = cpu_seconds(found[name]) - cpu
                times[name].setdefault(key, []).append(wall)
                times[name].setdefault(f"{key} cpu", []).append(cpu)
                if key not in reference:
                    reference[key] = value
                elif key != "noop" and not same_as_serial(key, value, reference[key]):
                    raise SystemExit(f"{name}: {key} differs from the serial result")
    return times


def ratios(times: dict[str, dict[str, list[float]]], top: str, bottom: str, key: str) -> str:
    """``median (min..max)`` over repeats of ``top``'s time over ``bottom``'s in one repeat."""
    return spread([t / b for t, b in zip(times[top][key], times[bottom][key], strict=True)], ".2f")


def balance(client: Any, work: Callable[[], Any]) -> tuple[float, float, float]:
    """Wall seconds, total work / busiest worker's busy seconds, and the bound of that ratio:
    min(workers, total work / longest task)."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        wall, _ = timed(work)
    busy: dict[str, float] = {}
    longest = 0.0
    for task in stream.data:
        for span in task["startstops"]:
            if span["action"] == "compute":
                seconds = span["stop"] - span["start"]
                busy[task["worker"]] = busy.get(task["worker"], 0.0) + seconds
                longest = max(longest, seconds)
    total = sum(busy.values())
    workers = len(client.scheduler_info()["workers"])
    return wall, total / max(busy.values()), min(workers, total / longest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small rows, 40 trials")
    parser.add_argument("--repeats", type=int, default=3, help="runs of every piece of work")
    parser.add_argument(
        "--work", nargs="+", choices=PIECES, default=list(PIECES), help="pieces of work to run"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats: must be at least 1")
    rows = [(10, 10), (10, 20)] if args.quick else [(10, 50), (30, 30)]
    sizes = (12, 14, 16, 18, 20) if args.quick else (14, 16, 18, 20, 22, 24)
    trials = 40 if args.quick else 200
    work: dict[str, Callable[[Executor], Any]] = {}
    if "qs" in args.work:
        work.update({f"qs {n},{d}": functools.partial(qs_work, n=n, d=d) for n, d in rows})
    if "pairs" in args.work:
        pairs = "qs pairs " + "-".join(str(size) for size in (sizes[0], sizes[-1]))
        work[pairs] = functools.partial(pairs_work, sizes=sizes)
    if "census" in args.work:
        work["census"] = functools.partial(census_work, trials=trials)
    repeats = {
        key: args.repeats * (1 if key.startswith("qs ") and "pairs" not in key else 3)
        for key in work
    }
    repeats["noop"] = args.repeats
    print(
        f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; rows (n, d): "
        f"{rows if 'qs' in args.work else '-'}; pairs on {sizes}; census trials: {trials}; "
        f"repeats: {', '.join(f'{key} {count}' for key, count in repeats.items())}"
    )
    noop = functools.partial(map_ordered, fn=_noop, items=range(NOOP_TASKS))

    startup: dict[str, float] = {}
    peaks: dict[str, float] = {}
    start = time.perf_counter()
    pool = local_pool(2)
    map_ordered(pool, _noop, range(2))  # start both processes
    startup["pool"] = time.perf_counter() - start
    start = time.perf_counter()
    client = dask_client(workers=2)
    startup["dask-2"] = time.perf_counter() - start
    try:
        executors = {"serial": SerialExecutor(), "pool": pool, "dask-2": dask_executor(client)}
        processes = {
            "serial": list,
            "pool": functools.partial(pool_processes, pool),
            "dask-2": functools.partial(dask_processes, client),
        }
        times = run_suites(executors, processes, work, repeats)
        overhead = run_suites(
            {name: executors[name] for name in ("pool", "dask-2")},
            processes,
            {"noop": lambda executor: noop(executor)},
            repeats,
        )
        peaks["pool"] = pool_peak_mb(pool, 2)
        peaks["dask-2"] = dask_peak_mb(client)
    finally:
        pool.shutdown()
        client.close()
        client.cluster.close()
    load_after = os.getloadavg()[0]

    print("\nwall seconds, median (min..max) of the repeats")
    print(f"{'work':<16}" + "".join(f"{name:>22}" for name in times))
    for key in work:
        print(f"{key:<16}" + "".join(f"{spread(times[name][key], '.2f'):>22}" for name in times))
    print("\nCPU seconds, median (min..max)")
    for key in work:
        cpus = [times[name][f"{key} cpu"] for name in times]
        print(f"{key:<16}" + "".join(f"{spread(c, '.2f'):>22}" for c in cpus))
    print("\nratios within a repeat, median (min..max) over the repeats")
    header = ("pool x", "dask-2 x", "dask/pool wall", "dask/pool CPU")
    print(f"{'work':<16}" + "".join(f"{name:>22}" for name in header))
    for key in work:
        cells = (
            ratios(times, "serial", "pool", key),
            ratios(times, "serial", "dask-2", key),
            ratios(times, "dask-2", "pool", key),
            ratios(times, "dask-2", "pool", f"{key} cpu"),
        )
        print(f"{key:<16}" + "".join(f"{cell:>22}" for cell in cells))
    for name in ("pool", "dask-2"):
        per_task = [wall / NOOP_TASKS * 1e3 for wall in overhead[name]["noop"]]
        print(
            f"{name}: start-up {startup[name]:.2f} s, per-task overhead "
            f"{spread(per_task, '.2f')} ms ({NOOP_TASKS} no-op tasks), peak memory per worker "
            f"{peaks[name]:.0f} MB"
        )
    print(f"dask/pool per-task overhead: {ratios(overhead, 'dask-2', 'pool', 'noop')}")
    print(
        "(x: speed-up over serial; dask/pool: Dask's time over the pool's, goal <= 1.10;"
        f" results identical to serial: checked; load average after: {load_after:.2f})"
    )

    client = dask_client(workers=4)
    try:
        executor = dask_executor(client)
        qs_work(executor, 6, 4)  # imports in every worker, not counted
        census_work(executor, 16)
        print("\ndask-4 (4 single-threaded workers on 2 cores): work balance from the task stream")
        print(f"{'work':<16}{'wall':>22}{'work/busiest':>22}{'bound':>8}")
        for key, fn in work.items():
            runs = [balance(client, lambda fn=fn: fn(executor)) for _ in range(repeats[key])]
            walls, spreads, bounds = zip(*runs, strict=True)
            note = "  one indivisible SDP bounds it" if np.median(bounds) < 2 else ""
            print(
                f"{key:<16}{spread(walls, '.2f'):>22}{spread(spreads, '.2f'):>22}"
                f"{np.median(bounds):>8.2f}{note}"
            )
        print(
            "(work/busiest: the speed-up 4 real cores would give, 4.00 is linear; bound:"
            " min(4, total work / longest task), which no schedule beats)"
        )
    finally:
        client.close()
        client.cluster.close()


if __name__ == "__main__":
    main()
