"""Plan time of every mechanism on the census-shaped presets (issue 19 item 2, issue 17).

For each workload, one comparison in this process (serial, one BLAS thread, the way
``python -m engine compare`` plans), timing each mechanism's row: its plan plus the RMSE the
comparison reports. Printed per mechanism: CPU seconds of this process and its children
(what the machine is asked to do; on a shared machine wall-clock time also counts the waits
for a core) and wall seconds, the RMSE, and the totals against the goals:

* SF1 and SF1+ presets: eigen-design and QuerySmasher each < 20 s, every applicable mechanism
  together < 60 s;
* CPS, Adult and Loans presets: every mechanism together < 20 s;
* the 1,400-cell workload of issue 17 (age 100 numeric x sex 2 x race 7: prefix on age plus
  every 2-way marginal, 1,014 queries): every mechanism together < 10 s.

The goals are judged on CPU seconds (the load average is printed: at load 2 or less on the two
cores wall and CPU agree).

Usage::

    python benchmarks/census_planners.py            # every workload (about 2 minutes)
    python benchmarks/census_planners.py --quick    # SF1 and the 1,400-cell workload
    python benchmarks/census_planners.py sf1 w1400  # chosen workloads
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.scenario import Scenario  # noqa: E402
from engine.workflows.compare import ComparisonRow, compare  # noqa: E402
from engine.workloads import catalog  # noqa: E402
from explorer.presets import build_preset  # noqa: E402

#: The 1,400-cell workload of issue 17.
W1400 = {**catalog.spec("age_sex_race"),
         "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6}}
#: workload key -> (label, goal for every mechanism together, goal for each slow planner)
WORKLOADS: dict[str, tuple[str, float, float | None]] = {
    "sf1": ("SF1 preset", 60.0, 20.0),
    "sf1_plus": ("SF1+ preset", 60.0, 20.0),
    "cps_marginals": ("CPS preset", 20.0, None),
    "adult_marginals": ("Adult preset", 20.0, None),
    "loans_marginals": ("Loans preset", 20.0, None),
    "w1400": ("1,400-cell workload", 10.0, None),
}
QUICK = ("sf1", "w1400")
#: The planners issue 19 item 2 names (each has its own goal on SF1 / SF1+).
SLOW_PLANNERS = ("eigen-design", "querysmasher")


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def spec_of(key: str) -> dict:
    """The scenario spec of a preset key (or the 1,400-cell workload)."""
    return W1400 if key == "w1400" else build_preset(key)


def run(key: str) -> bool:
    """Time one comparison; print its rows and goals; True when every goal is met."""
    label, goal_all, goal_each = WORKLOADS[key]
    scenario = Scenario.from_spec(spec_of(key))
    workload = scenario.workload
    print(
        f"\n{label}: {workload.domain.size:,} cells, {workload.num_queries:,} queries, "
        f"{len(workload.terms)} terms (load average {os.getloadavg()[0]:.1f})"
    )
    print(f"  {'mechanism':<20} {'CPU s':>8} {'wall s':>8} {'RMSE':>12}  note")
    times: dict[str, tuple[float, float]] = {}
    last = [cpu_seconds(), time.perf_counter()]

    def on_row(row: ComparisonRow) -> None:
        cpu, wall = cpu_seconds(), time.perf_counter()
        times[row.mechanism] = (cpu - last[0], wall - last[1])
        last[:] = [cpu, wall]
        rmse = f"{row.rmse:12.4f}" if row.rmse is not None else f"{'-':>12}"
        note = "" if row.error is None else row.error[:60]
        print(
            f"  {row.mechanism:<20} {times[row.mechanism][0]:8.2f} "
            f"{times[row.mechanism][1]:8.2f} {rmse}  {note}",
            flush=True,
        )

    compare(workload, scenario.privacy, on_row=on_row)
    total_cpu = sum(c for c, _ in times.values())
    total_wall = sum(w for _, w in times.values())
    met = total_cpu < goal_all
    print(
        f"  {'all mechanisms':<20} {total_cpu:8.2f} {total_wall:8.2f}  goal < {goal_all:.0f} s"
        f" CPU: {'met' if met else 'NOT MET'}"
    )
    if goal_each is not None:
        for name in SLOW_PLANNERS:
            cpu = times.get(name, (0.0, 0.0))[0]
            ok = cpu < goal_each
            met = met and ok
            print(
                f"  {name:<20} {cpu:8.2f}  goal < {goal_each:.0f} s CPU: "
                f"{'met' if ok else 'NOT MET'}"
            )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "workloads", nargs="*", choices=[*WORKLOADS, []], help="workload keys (default: all)"
    )
    parser.add_argument("--quick", action="store_true", help="SF1 and the 1,400-cell one")
    args = parser.parse_args()
    keys = args.workloads or (QUICK if args.quick else tuple(WORKLOADS))
    met = [run(key) for key in keys]
    print(f"\n{sum(met)} of {len(met)} workloads meet their goals")


if __name__ == "__main__":
    main()
