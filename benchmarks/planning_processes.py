"""Page loads while another session plans: planner threads in the web process vs processes.

Serves the explorer twice on 127.0.0.1 (``panel serve explorer/app.py``), once with
``EXPLORER_PLANNING=threads`` (planning in threads of the web process) and once with
``EXPLORER_PLANNING=processes`` (planning in worker processes, the default). In each:

1. a browser session uploads all ranges on ``--size`` values (default 4,096: OPT_0 plans for
   a minute or more, longer than the loads take) with ``hdmm-opt0`` only, opens Compare and
   presses "Plan anyway" (the cost model holds OPT_0 on that many cells back as over a minute);
2. while that job plans, a second session loads the workload page ``--loads`` times (a fresh
   browser context each time: the server builds the page for it) and, for reference, the
   same number of times on the idle server first.

Prints each load's time (navigation until Panel has rendered the page's workload summary; a
load that ended after the heavy job had stopped planning is marked ``*`` and left out of the
median), the median per mode, and the ratio busy / idle per mode, with the resident memory of
the server and its worker processes while planning. Then the price of processes: the time to
pickle an hdmm-opt0 plan on all ranges of ``--size // 4`` values there and back (cloudpickle),
beside the time to plan it, and how late the web process answers an event (a 20 ms wait, then a
callback's many short steps) while OPT_0 plans on that size nowhere, in a thread of the web
process or in a worker process (the interpreter lock is what the processes take away;
``--response-only`` runs just this, about 40 s). Traffic stays on 127.0.0.1, bounded by
``--timeout`` seconds per step. Quick mode: ``--quick`` (1,024 values, 2 loads).

Usage::

    python benchmarks/planning_processes.py [--size 4096] [--loads 4]
    python benchmarks/planning_processes.py --quick
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import threading
import time
from pathlib import Path

import cloudpickle
import numpy as np
from playwright.sync_api import sync_playwright

from explorer.server.served import REPO_ROOT, chromium_options, serving

LOG_DIR = REPO_ROOT / "test-results"


def spec(size: int) -> bytes:
    """All ranges on ``size`` values, planned by OPT_0 alone."""
    return (
        f"domain: {{x: {{size: {size}, kind: numeric}}}}\n"
        f"workload: [{{product: {{x: all_range}}}}]\n"
        f"privacy: {{noise: laplace, epsilon: 1.0}}\n"
        f"mechanisms: [hdmm-opt0]\n"
    ).encode()


def rss_mb(pid: int) -> tuple[float, float]:
    """Resident memory (MB) of process ``pid`` and of its child processes together."""

    def one(process: int) -> float:
        for line in Path(f"/proc/{process}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024.0
        return 0.0

    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return one(pid), sum(one(int(child)) for child in children)


def pickling(size: int) -> tuple[float, float, float]:
    """Seconds to plan hdmm-opt0 on all ranges of ``size`` values in this process, seconds
    to cloudpickle its row there and back, and the pickle's size in MB."""
    from engine.scenario import Scenario
    from engine.workflows.compare import plan_row

    scenario = Scenario.loads(spec(size).decode())
    start = time.perf_counter()
    row = plan_row("hdmm-opt0", scenario.workload, scenario.privacy)
    planned = time.perf_counter() - start
    start = time.perf_counter()
    blob = cloudpickle.dumps(row)
    back = cloudpickle.loads(blob)
    moved = time.perf_counter() - start
    assert back.rmse == row.rmse
    return planned, moved, len(blob) / 1e6


def handle_event() -> None:
    """What a web callback does: many short Python steps with small numpy calls."""
    values = np.arange(50.0)
    for _ in range(300):
        values = np.sqrt(values * 1.0001 + 1.0)
        {str(i): i for i in range(20)}


def response_ms(seconds: float) -> list[float]:
    """For ``seconds``: wait 20 ms for an event, then handle it; the milliseconds beyond the
    wait, sorted (how late the thread answers)."""
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        time.sleep(0.02)
        handle_event()
        out.append(1000.0 * (time.perf_counter() - start - 0.02))
    return sorted(out)


def responsiveness(size: int, rounds: int = 2, seconds: float = 6.0) -> None:
    """Print how late this process answers events while hdmm-opt0 plans all ranges on
    ``size`` values nowhere, in a thread of this process, or in a worker process."""
    from engine.scenario import Scenario
    from engine.workflows.compare import plan_row
    from explorer.planning.workers import PlannerPool

    scenario = Scenario.loads(spec(size).decode())
    pool = PlannerPool(1)
    pool.plan("identity", scenario.workload, scenario.privacy)  # start the worker first
    planners = {
        "a thread": lambda: plan_row("hdmm-opt0", scenario.workload, scenario.privacy),
        "a process": lambda: pool.plan("hdmm-opt0", scenario.workload, scenario.privacy),
    }
    print(f"Event response in the web process while hdmm-opt0 plans {size:,} values (ms):")
    for _ in range(rounds):
        for where in ("nowhere", "a thread", "a process"):
            planner = None
            if where in planners:
                planner = threading.Thread(target=planners[where])
                planner.start()
                time.sleep(0.5)
            late = response_ms(seconds)
            if planner is not None:
                planner.join()
            print(
                f"  planning in {where:>9}: p50 {statistics.median(late):5.1f}, "
                f"p95 {late[int(0.95 * len(late))]:6.1f} ({len(late)} events)"
            )
    pool.close()


def load_seconds(browser, url: str, timeout_ms: int) -> float:
    """Open ``url`` in a fresh context; seconds until the workload summary is rendered."""
    context = browser.new_context()
    context.set_default_timeout(timeout_ms)
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    page.locator(".workload-stats").first.wait_for(state="visible")
    seconds = time.perf_counter() - start
    context.close()
    return seconds


def start_heavy_job(browser, base: str, size: int, timeout_ms: int):
    """Upload the heavy workload, press "Plan anyway" on Compare; returns the open page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(timeout_ms)
    page = context.new_page()
    page.goto(base + "/app?page=builder", wait_until="load")
    page.locator(".workload-stats").first.wait_for(state="visible")
    page.locator(".spec-upload input[type=file]").first.set_input_files(
        files=[{"name": "ranges.yaml", "mimeType": "text/yaml", "buffer": spec(size)}]
    )
    page.locator(".workload-stats", has_text=f"{size:,} cells").first.wait_for()
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    page.locator(".plan-anyway button").first.click()
    page.locator(".planning-status", has_text="Planning hdmm-opt0").first.wait_for()
    return page


def measure(
    mode: str, size: int, loads: int, timeout_s: float
) -> tuple[list[float], list[tuple[float, bool]]]:
    """Idle load times (seconds) and busy ones (seconds, whether the heavy job was still
    planning when the load ended) with ``EXPLORER_PLANNING=mode``."""
    os.environ["EXPLORER_PLANNING"] = mode
    timeout_ms = int(timeout_s * 1000)
    log = LOG_DIR / f"planning-{mode}.log"
    with serving(log, unused_session_ms=5_000) as app, sync_playwright() as playwright:
        browser = playwright.chromium.launch(**chromium_options())
        url = app.url + "/app?page=builder"
        load_seconds(browser, url, timeout_ms)  # warm-up: imports, first build
        idle = [load_seconds(browser, url, timeout_ms) for _ in range(loads)]
        planner = start_heavy_job(browser, app.url, size, timeout_ms)
        busy = []
        for _ in range(loads):
            seconds = load_seconds(browser, url, timeout_ms)
            # has_text reads through Panel's shadow roots (inner_text would not)
            status = planner.locator(".planning-status", has_text="Planning hdmm-opt0")
            busy.append((seconds, status.count() > 0))
        web, workers = rss_mb(app.process.pid)
        print(
            f"  {mode}: RSS while planning: web process {web:.0f} MB, "
            f"its worker processes {workers:.0f} MB"
        )
        planner.context.close()
        browser.close()
    return idle, busy


def main() -> None:
    """Run both modes and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="values of the range workload")
    parser.add_argument("--loads", type=int, default=4, help="page loads per measurement")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
    parser.add_argument("--quick", action="store_true", help="1,024 values, 2 loads")
    parser.add_argument(
        "--response-only", action="store_true", help="only the event-response measurement"
    )
    args = parser.parse_args()
    size, loads = (1024, 2) if args.quick else (args.size, args.loads)
    if args.response_only:
        responsiveness(size // 4)
        return
    print(f"Workload page loads while hdmm-opt0 plans all ranges on {size:,} values")
    medians = {}
    for mode in ("threads", "processes"):
        idle, busy = measure(mode, size, loads, args.timeout)
        planning = [s for s, still in busy if still] or [math.nan]
        medians[mode] = statistics.median(planning)
        shown = ", ".join(f"{s:.2f}{'' if still else '*'}" for s, still in busy)
        print(
            f"{mode:>9}: idle {', '.join(f'{s:.2f}' for s in idle)} s; "
            f"while planning {shown} s; median "
            f"{statistics.median(idle):.2f} -> {medians[mode]:.2f} s "
            f"(x{medians[mode] / statistics.median(idle):.2f})"
        )
    print(
        f"median load while planning, threads / processes: "
        f"{medians['threads'] / medians['processes']:.2f}"
    )
    responsiveness(size // 4)
    planned, moved, megabytes = pickling(size // 4)
    print(
        f"hdmm-opt0 on all ranges of {size // 4:,} values: planned in {planned:.2f} s; its row "
        f"pickled there and back in {moved:.3f} s ({megabytes:.1f} MB, "
        f"{moved / planned:.1%} of the planning time)"
    )


if __name__ == "__main__":
    main()
