"""Serving load without browsers: simulated analysts as protocol-level clients.

Each simulated analyst (:class:`protocol_client.PageClient`, Bokeh's websocket protocol, no
rendering) does what an analyst does in a tab:

1. opens the privacy trade-off page (a new session) and waits for its readout;
2. moves the eps slider ``--moves`` times, each time waiting until the readout names the new
   privacy level;
3. opens the Compare page in the same session (``&s=<id>``, as the app's links do), which plans
   the session's workload (the default one: the server's plan cache has it after the warm-up),
   and waits for its headline;
4. closes both pages.

By default an analyst acts as soon as the server answered (a burst: no reading time). With
``--think S`` each analyst pauses before every slider move and before opening Compare, for a
time drawn uniformly between 0.5 S and 1.5 S, as a person reads a readout before acting (the
pause is not part of any measured time).

For every number of processes (``--procs``, served with ``panel serve --num-procs``) and every
number of analysts (``--analysts``), one fresh server runs: warm-up analysts first (not
measured; until every serving process has built a page and the server is idle, see
:func:`warm_up`), then all analysts start within ``--ramp`` seconds. Printed per row:
page-ready p50 / p95 (from connecting to the page's first view), slider p50 / p95 (from the
change to the new readout), web-process CPU per page (all serving processes, not the planner
pool), resident memory of the web processes per analyst while they are connected, errors
(timeouts, closed connections), lost sessions (the Compare page was given a new session instead
of the analyst's: a process that does not know the session), and resident memory after they
left against idle (sessions discarded after ``UNUSED_SESSION_MS`` and ``SESSION_IDLE_S``), for
the web processes and, apart, for the planner pool. Goals (issue 30) at 20 analysts and 2
processes: page p95 < 2 s, slider p95 < 300 ms; at 100 analysts: no error, no lost session,
memory back within 50 MB. Before the first row and after the last, the CPU seconds of a fixed
pure-Python workload (``timing.calibration_seconds``) say how fast this shared machine was.

All traffic goes to 127.0.0.1, every wait is bounded by ``--timeout`` and the run stops by
itself.

Every run is bounded: analysts still busy ``--run-limit`` seconds after the first arrived are
stopped and count as errors ("did not finish"). The rows print as a Markdown table (the one in
``benchmarks/README.md``), followed by the total time.

Usage::

    python benchmarks/protocol_load.py --table               # 20 50 100 analysts x 1 2 procs
    python benchmarks/protocol_load.py --analysts 20 --procs 1 --moves 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

import psutil
from protocol_client import PageClient, ProtocolError
from timing import CALIBRATION_ADDITIONS, calibration_seconds
from tornado.httpclient import HTTPClientError

from explorer.components.privacy import EXPONENT_BOUNDS
from explorer.server.served import ServerStartError, serving

#: Bokeh discards a session this long after its last connection closed (milliseconds).
UNUSED_SESSION_MS = 5_000
#: The explorer drops a session this long after its last page closed (seconds).
SESSION_IDLE_S = 10.0
#: Seconds to watch a page's address for a session id other than the one asked for.
SESSION_SWAP_S = 3.0
#: Seconds a fresh server may take to answer (a loaded machine imports slowly).
START_S = 240.0
#: A serving process counts as warm once its memory is this share of the largest one's.
WARM_SHARE = 0.8
#: Most warm-up rounds before the run starts anyway.
WARM_UP_ROUNDS = 10
#: The server counts as settled after the warm-up once its web processes spent less than this
#: many CPU seconds in :data:`SETTLE_S` seconds.
SETTLED_CPU_S = 0.05
SETTLE_S = 1.0
#: Longest wait for the server to settle (seconds).
SETTLE_LIMIT_S = 60.0
#: Issue 30's goals.
GOALS = "page p95 < 2 s and slider p95 < 0.3 s at 20 analysts / 2 processes; " \
        "at 100: no error, no lost session, RSS back within 50 MB of idle"


@dataclass
class Tally:
    """What the analysts of one run measured."""

    pages: list[float] = field(default_factory=list)
    moves: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost_sessions: int = 0


def session_of(client: PageClient) -> str:
    """The session id the server put into the page's address (``s=``), '' before it did."""
    for attributes in client.models.values():
        search = attributes.get("search")
        if isinstance(search, str) and "s=" in search:
            return parse_qs(search.lstrip("?")).get("s", [""])[0]
    return ""


def new_position(rng: random.Random, low: float, high: float, current: float) -> float:
    """A random slider position (log10 of eps, two decimals) other than ``current``: a release
    where the slider already is changes nothing, so no new readout would ever come (a run
    once lost an analyst that way, "no message within 286 s")."""
    while True:
        value = round(rng.uniform(low, high), 2)
        if abs(value - current) > 0.005:
            return value


async def analyst(ws_url: str, moves: int, timeout: float, tally: Tally | None,
                  rng: random.Random, think: float = 0.0) -> None:
    """One analyst's visit (module docstring); ``tally`` None: a warm-up, not counted;
    ``think``: mean seconds of reading before each action (0: none)."""
    pages: list[PageClient] = []
    step = "opening the trade-off page"  # named in an error, so a report says where it hung
    try:
        start = time.perf_counter()
        tradeoff = await PageClient.open(ws_url, {"page": "tradeoff"}, timeout=timeout)
        pages.append(tradeoff)
        step = "waiting for the trade-off readout and session id"
        await tradeoff.wait_for(lambda: bool(tradeoff.text_of("tradeoff-level"))
                                and bool(session_of(tradeoff)), timeout)
        if tally is not None:
            tally.pages.append(time.perf_counter() - start)
        slider = tradeoff.find("eps-slider")
        if slider is None:
            raise ProtocolError("the trade-off page has no eps slider")
        slider = tradeoff.models[slider]["data"]["id"]  # a LabelledSlider's values live there
        low, high = EXPONENT_BOUNDS["epsilon"]  # the slider's range (log10 of eps)
        for move in range(moves):
            await asyncio.sleep(think * rng.uniform(0.5, 1.5))
            before = tradeoff.text_of("tradeoff-level")
            # an attribute the document leaves out has its default (the slider's 0.0)
            value = new_position(rng, low, high, tradeoff.models[slider].get("value", 0.0))
            step = f"slider move {move + 1} to {value:g} (readout was {before!r})"
            await tradeoff.change(slider, value=value)
            took = await tradeoff.wait_for(
                lambda before=before: tradeoff.text_of("tradeoff-level") != before, timeout)
            if tally is not None:
                tally.moves.append(took)
        sid = session_of(tradeoff)
        await asyncio.sleep(think * rng.uniform(0.5, 1.5))
        start = time.perf_counter()
        step = "opening the Compare page"
        compare = await PageClient.open(ws_url, {"page": "compare", "s": sid}, timeout=timeout)
        pages.append(compare)
        step = "waiting for the Compare headline"
        await compare.wait_for(lambda: bool(compare.text_of("compare-headline")), timeout)
        if tally is not None:
            tally.pages.append(time.perf_counter() - start)
            # A process that does not know the session gives the page a new one and puts its
            # id into the address once the page has loaded.
            try:
                await compare.wait_for(lambda: session_of(compare) != sid, SESSION_SWAP_S)
                tally.lost_sessions += 1
            except ProtocolError:
                pass
    except (ProtocolError, HTTPClientError, OSError, KeyError, ValueError) as exc:
        # HTTPClientError: the websocket handshake timed out (an overloaded server)
        if tally is None:
            raise
        tally.errors.append(f"{step}: {type(exc).__name__}: {exc}")
    finally:
        for page in pages:
            page.close()


def server_processes(root: psutil.Process) -> list[psutil.Process]:
    """The serving process and its children (``--num-procs`` forks; planning workers)."""
    return [root, *root.children(recursive=True)]


def is_planner(proc: psutil.Process) -> bool:
    """A process of the planner pool (spawned by ``multiprocessing``), not a web process."""
    with contextlib.suppress(psutil.Error):
        return "multiprocessing" in " ".join(proc.cmdline())
    return False


def cpu_seconds(root: psutil.Process, planners: bool = False) -> float:
    """CPU seconds so far of the web processes (``planners``: of the planner pool)."""
    total = 0.0
    for proc in server_processes(root):
        with contextlib.suppress(psutil.Error):
            if is_planner(proc) == planners:
                times = proc.cpu_times()
                total += times.user + times.system
    return total


def rss_mb(root: psutil.Process, planners: bool = False) -> float:
    """Resident memory (MB) of the web processes (``planners``: of the planner pool).

    Apart, because a planner worker that ran only the pool's warm-up task has not imported
    the planner yet (13 MB); the first plan it gets adds about 190 MB once, a cost of the
    pool's start, not of anybody's session."""
    total = 0
    for proc in server_processes(root):
        with contextlib.suppress(psutil.Error):
            if is_planner(proc) == planners:
                total += proc.memory_info().rss
    return total / 2**20


def web_processes(root: psutil.Process) -> list[psutil.Process]:
    """The processes that serve pages: ``--num-procs`` forks (the parent then only waits for
    them), or the root alone."""
    with contextlib.suppress(psutil.Error):
        forks = [proc for proc in root.children() if not is_planner(proc)]
        if forks:
            return forks
    return [root]


async def warm_up(ws_url: str, root: psutil.Process, timeout: float, rng: random.Random,
                  rounds: int = WARM_UP_ROUNDS) -> None:
    """Visit as an analyst until every serving process has built a page (its imports and
    first plans done: its memory within :data:`WARM_SHARE` of the largest), at most ``rounds``
    rounds of one analyst per process at once. The kernel hands a connection to whichever
    process accepts first, so one warm-up analyst left the other process cold, and its
    imports (about 3 s) fell into the measured run."""
    for _ in range(rounds):
        serving = web_processes(root)
        await asyncio.gather(*(analyst(ws_url, 1, timeout, None, rng) for _ in serving))
        sizes = []
        for proc in serving:
            with contextlib.suppress(psutil.Error):
                sizes.append(proc.memory_info().rss)
        if sizes and min(sizes) >= WARM_SHARE * max(sizes):
            break
    await settle(root)


async def settle(root: psutil.Process, limit_s: float = SETTLE_LIMIT_S) -> None:
    """Wait until the web processes are idle (:data:`SETTLED_CPU_S` in :data:`SETTLE_S`), at
    most ``limit_s``: the readiness check's page request (``serving``) may still be building
    a process's first page, imports and all (3-4 CPU s), when the warm-up analysts are done,
    and a run once started inside it."""
    deadline = time.perf_counter() + limit_s
    before = cpu_seconds(root)
    while time.perf_counter() < deadline:
        await asyncio.sleep(SETTLE_S)
        now = cpu_seconds(root)
        if now - before < SETTLED_CPU_S:
            return
        before = now


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of the values, nearest rank; NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def run(ws_url: str, root: psutil.Process, analysts: int, args: argparse.Namespace
              ) -> dict[str, float | int | str]:
    """Warm up, run ``analysts`` at once, wait for their sessions to go; one result row."""
    rng = random.Random(0)  # the analysts' slider positions and arrival times (not noise)
    await warm_up(ws_url, root, args.timeout, rng)
    idle, planners_idle = rss_mb(root), rss_mb(root, planners=True)
    tally = Tally()
    cpu_before = cpu_seconds(root)
    peak = idle

    async def arrive(delay: float) -> None:
        await asyncio.sleep(delay)
        await analyst(ws_url, args.moves, args.timeout, tally, rng, args.think)

    visits = [asyncio.ensure_future(arrive(rng.uniform(0, args.ramp))) for _ in range(analysts)]
    started = time.perf_counter()
    deadline = started + args.run_limit
    while not all(visit.done() for visit in visits) and time.perf_counter() < deadline:
        await asyncio.sleep(0.5)
        peak = max(peak, rss_mb(root))
    unfinished = [visit for visit in visits if not visit.done()]
    for visit in unfinished:
        visit.cancel()  # its pages close in the analyst's ``finally``
    await asyncio.gather(*visits, return_exceptions=True)
    tally.errors += [f"did not finish within {args.run_limit:g} s"] * len(unfinished)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(root) - cpu_before
    await asyncio.sleep(UNUSED_SESSION_MS / 1000 + SESSION_IDLE_S + 5)
    after, planners_after = rss_mb(root), rss_mb(root, planners=True)
    return {"analysts": analysts, "seconds": seconds,
            "page_p50": percentile(tally.pages, 0.5), "page_p95": percentile(tally.pages, 0.95),
            "slider_p50": percentile(tally.moves, 0.5), "slider_p95": percentile(tally.moves, 0.95),
            "cpu_per_page": cpu / max(len(tally.pages), 1),
            "rss_per_analyst": (peak - idle) / analysts, "errors": len(tally.errors),
            "lost": tally.lost_sessions, "rss_idle": idle, "rss_after": after,
            "planners_idle": planners_idle, "planners_after": planners_after,
            "first_error": tally.errors[0] if tally.errors else ""}


COLUMNS = ("procs", "analysts", "page p50 / p95 (s)", "slider p50 / p95 (ms)",
           "web CPU per page (s)", "RSS per session (MB)", "errors", "lost sessions",
           "RSS idle -> after they left (MB)", "planners' RSS idle -> after (MB)", "run (s)",
           "load average")


def table_row(procs: int, row: dict[str, float | int | str]) -> str:
    """One Markdown row of the table (:data:`COLUMNS`)."""
    cells = (f"{procs}", f"{row['analysts']}",
             f"{row['page_p50']:.2f} / {row['page_p95']:.2f}",
             f"{row['slider_p50'] * 1e3:.0f} / {row['slider_p95'] * 1e3:.0f}",
             f"{row['cpu_per_page']:.2f}", f"{row['rss_per_analyst']:.1f}",
             f"{row['errors']}", f"{row['lost']}",
             f"{row['rss_idle']:.0f} -> {row['rss_after']:.0f} "
             f"({row['rss_after'] - row['rss_idle']:+.0f})",
             f"{row['planners_idle']:.0f} -> {row['planners_after']:.0f}",
             f"{row['seconds']:.0f}", f"{psutil.getloadavg()[0]:.1f}")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true",
                        help="the whole table: 20, 50 and 100 analysts x 1 and 2 processes "
                        "(the defaults of --analysts and --procs)")
    parser.add_argument("--analysts", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--ramp", type=float, default=5.0,
                        help="the analysts arrive within this many seconds")
    parser.add_argument("--think", type=float, default=0.0, metavar="S",
                        help="mean seconds an analyst reads before each slider move and "
                        "before opening Compare (default 0: acts at once)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds any one step may take before it counts as an error")
    parser.add_argument("--run-limit", type=float, default=600.0,
                        help="seconds one run may take; analysts still busy then are stopped "
                        "and count as errors")
    parser.add_argument("--serve-options", default="", metavar="OPTIONS",
                        help="extra panel serve options in one string, e.g. "
                        "'--num-threads 4'")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="extra environment of the served explorer, e.g. "
                        "PYTHONMALLOC=pymalloc (Python's own allocator instead of the "
                        "default malloc)")
    args = parser.parse_args()
    server_env = dict(item.split("=", 1) for item in args.server_env if "=" in item)
    if args.table:
        args.analysts, args.procs = [20, 50, 100], [1, 2]
    begun = time.perf_counter()
    print(f"goals: {GOALS}")
    reading = f"{args.think:g} s (0.5-1.5 x) before each action" if args.think else "none"
    print(f"calibration ({CALIBRATION_ADDITIONS:,} additions, benchmarks/timing.py): "
          f"{calibration_seconds():.3f} CPU s at start")
    print(f"load average at start: {psutil.getloadavg()[0]:.1f} ({psutil.cpu_count()} cores); "
          f"{args.moves} slider moves per analyst, arrivals within {args.ramp:g} s, "
          f"reading time {reading}"
          + (f"; server environment {server_env}" if server_env else "")
          + (f"; panel serve {args.serve_options}" if args.serve_options else ""))
    print()
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    errors = []
    for procs in args.procs:
        for analysts in args.analysts:
            try:
                with tempfile.TemporaryDirectory() as logs, serving(
                        Path(logs) / "server.log", "--num-procs", str(procs),
                        *args.serve_options.split(),
                        unused_session_ms=UNUSED_SESSION_MS, timeout_s=START_S,
                        environment={"EXPLORER_SESSION_IDLE_SECONDS": str(SESSION_IDLE_S),
                                     **server_env}
                ) as app:
                    ws_url = app.url.replace("http://", "ws://") + "/app/ws"
                    row = asyncio.run(run(ws_url, psutil.Process(app.process.pid), analysts,
                                          args))
            except ServerStartError as exc:
                print(f"| {procs} | {analysts} | the server did not start: "
                      f"{str(exc).splitlines()[0]} |", flush=True)
                continue
            except (ProtocolError, HTTPClientError, OSError) as exc:
                print(f"| {procs} | {analysts} | the warm-up analyst failed: {exc} |", flush=True)
                continue
            print(table_row(procs, row), flush=True)
            if row["first_error"]:
                errors.append(f"{procs} proc(s), {analysts} analysts, first error: "
                              f"{row['first_error']}")
    print()
    print("\n".join(errors))
    print(f"total {time.perf_counter() - begun:.0f} s; load average at the end "
          f"{psutil.getloadavg()[0]:.1f}; calibration {calibration_seconds():.3f} CPU s")


if __name__ == "__main__":
    main()
