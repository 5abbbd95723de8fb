"""Web-process CPU seconds per page of the served explorer (issue 30 item 3: under 0.2 s).

Serves the explorer as an operator does (``panel serve explorer/app.py`` on 127.0.0.1, a fresh
temporary data directory) and opens each page with the protocol-level client of
:mod:`protocol_client` (no browser: it pulls the document and says it is ready, so the server
builds the page, serialises it and runs its ``onload`` work, exactly as for a tab). For every
open it reads the serving process's own CPU seconds (user + system, ``psutil``) before the
connection and after the server has gone quiet (no CPU for :data:`QUIET_S` seconds), so the
number is the page's whole cost in the web process, independent of the machine's load; the
planning workers (child processes) are not counted, since they are not the web process.

All pages of one round share one session (``&s=<id>``, as the app's links do), as an analyst
moving through the menu would; every page is opened once to warm up (imports, first plan),
then ``--runs`` rounds are measured. Printed: the median CPU seconds of each page, the median
over the eight pages, and the goal beside it; that median in units of a fixed pure-Python
workload timed in this process before and after the run (:func:`calibration_seconds`; this
shared machine's speed moves, 0.115 CPU s for the workload before one run and 0.083 after it,
and the pages' CPU moves with it, so runs of different days compare better in these units);
and the CPU the process spent between the measured opens (while the client waited for quiet
before the next one), per page opened: the work that belongs to no one page, mostly discarding
closed sessions (Bokeh keeps a closed page's session 15 s) and Panel's full garbage collection
a few seconds after each discard, which lands in whichever page is being measured when it runs
during one (the "max" column), and is counted here when it runs between two.

Parts of a page below its first screen are built when the reader scrolls near them
(:func:`explorer.components.lazy_view.on_sight`); this client never scrolls, so by default the
number is a page's first screen, as a reader who does not scroll costs. ``--scrolled`` also
reports every such part as seen (as a browser does once the reader has scrolled to the end,
or at once for the parts within a screen of the window) and counts their builds too.

``--profile PAGE`` instead builds that page's document in this process (``page_app`` into a
``bokeh.document.Document``, then its JSON, as the server does for ``PULL-DOC-REQ``), once to
warm up and once under ``cProfile``, and prints the top functions by cumulative time. The
page's first ticks run too, and the views it builds in the background
(:class:`explorer.components.background.BackgroundView`) are built on the profiled thread, so
their cost is counted as the server's is. ``--in-process`` builds every page that way
``--runs`` times without the profiler (no server, no websocket, no other sessions' ticks or
garbage collections) and prints each page's median CPU seconds and models: the build alone,
steadier than a served run on a shared machine.

Usage::

    python benchmarks/page_cpu.py                    # 5 rounds of the 8 pages
    python benchmarks/page_cpu.py --runs 9 --options --warm
    python benchmarks/page_cpu.py --scrolled         # every part built, as if scrolled to
    python benchmarks/page_cpu.py --profile compare
    python benchmarks/page_cpu.py --in-process --runs 9
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import cProfile
import gc
import pstats
import statistics
import tempfile
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
from protocol_client import PageClient, ProtocolError
from protocol_load import session_of
from timing import CALIBRATION_ADDITIONS, calibration_seconds

from explorer.server.served import serving

#: The eight pages of the goal: (``page`` query value, label).
PAGES: tuple[tuple[str, str], ...] = (
    ("", "start"), ("builder", "workload"), ("compare", "compare"), ("strategy", "strategy"),
    ("tradeoff", "trade-off"), ("learn", "learn"), ("budget", "budget"), ("census", "census"),
)
#: Issue 30's goal: median over the eight pages, web-process CPU seconds.
GOAL_S = 0.2
#: The server counts as done with a page once it spent no CPU for this many seconds.
QUIET_S = 0.4
#: Less CPU than this over :data:`QUIET_S` counts as none (the event loop's own ticks).
QUIET_CPU_S = 0.004


def process_cpu(process: psutil.Process) -> float:
    """User + system CPU seconds of ``process`` alone (not its children)."""
    times = process.cpu_times()
    return times.user + times.system


async def settled(process: psutil.Process, timeout: float) -> float:
    """Wait until ``process`` spends no CPU for :data:`QUIET_S` s; its CPU seconds then."""
    deadline = time.monotonic() + timeout
    last = process_cpu(process)
    while time.monotonic() < deadline:
        await asyncio.sleep(QUIET_S)
        now = process_cpu(process)
        if now - last < QUIET_CPU_S:
            return now
        last = now
    return process_cpu(process)


#: The CSS class of a part not built until the reader scrolls near it (``on_sight``).
WAITING = "on-sight-waiting"


async def scroll_through(client: PageClient, process: psutil.Process, timeout: float) -> None:
    """Report every part waiting to be seen as seen (its ``SeenSignal``'s ``seen``), again for
    parts that appear meanwhile, until the server is quiet with none left."""
    reported: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ProtocolError):  # no message for a while: read what came
            await client.wait_for(lambda: False, QUIET_S)
        waiting = [m for m in dict.fromkeys(client.order) if m not in reported
                   and WAITING in (client.models[m].get("css_classes") or [])]
        if not waiting:
            await settled(process, timeout)
            with contextlib.suppress(ProtocolError):
                await client.wait_for(lambda: False, QUIET_S)
            if not any(m not in reported and WAITING in (client.models[m].get("css_classes")
                                                         or []) for m in client.order):
                return
            continue
        for model in waiting:
            reported.add(model)
            data = client.models[model].get("data") or {}
            if "id" in data:
                await client.change(data["id"], seen=True)


async def open_page(ws_url: str, process: psutil.Process, page: str, sid: str,
                    timeout: float, scrolled: bool = False) -> tuple[float, str, int]:
    """Open ``page`` in session ``sid`` (a new one when ''); its CPU seconds, the session and
    how many Bokeh models the client received (a count the machine's load does not change).
    ``scrolled``: every part built when seen is reported seen (:func:`scroll_through`)."""
    arguments = {"page": page} if page else {}
    if sid:
        arguments["s"] = sid
    before = await settled(process, timeout)
    client = await PageClient.open(ws_url, arguments, timeout=timeout)
    after = await settled(process, timeout)
    if scrolled:
        await scroll_through(client, process, timeout)
        after = await settled(process, timeout)
    if not sid:
        await client.wait_for(lambda: bool(session_of(client)), timeout)
        sid = session_of(client)
    client.close()
    return after - before, sid, len(client.models)


async def measure(ws_url: str, process: psutil.Process, runs: int, timeout: float,
                  scrolled: bool = False) -> tuple[dict[str, list[float]], dict[str, int], float]:
    """Warm every page up once, then ``runs`` rounds; CPU seconds per page label, the models
    of each page's last open, and the CPU seconds spent between the measured opens."""
    seconds: dict[str, list[float]] = {label: [] for _, label in PAGES}
    models: dict[str, int] = {}
    start = 0.0
    for round_ in range(runs + 1):
        if round_ == 1:
            start = await settled(process, timeout)
        sid = ""
        for page, label in PAGES:
            cpu, sid, models[label] = await open_page(ws_url, process, page, sid, timeout,
                                                      scrolled)
            if round_:
                seconds[label].append(cpu)
        # let Bokeh discard the closed sessions outside the measured opens
        await settled(process, timeout)
    total = process_cpu(process) - start
    return seconds, models, total - sum(sum(values) for values in seconds.values())


def report(seconds: dict[str, list[float]], models: dict[str, int],
           between: float | None = None, calibration: float | None = None) -> None:
    """Print the per-page medians (and models sent) and the median over the pages beside the
    goal, also in units of ``calibration`` (:func:`calibration_seconds`, when given); and
    ``between``, the CPU seconds spent between the measured opens, per page."""
    print(f"{'page':<10} {'median CPU s':>12} {'min':>6} {'max':>6} {'models':>7}")
    medians = []
    for label, values in seconds.items():
        median = statistics.median(values)
        medians.append(median)
        print(f"{label:<10} {median:12.3f} {min(values):6.3f} {max(values):6.3f} "
              f"{models.get(label, 0):7d}")
    print(f"{'median':<10} {statistics.median(medians):12.3f}   (goal < {GOAL_S} s)")
    if calibration is not None:
        print(f"calibration: {CALIBRATION_ADDITIONS:,} additions in {calibration:.3f} CPU s; "
              f"median page = {statistics.median(medians) / calibration:.2f} of them")
    if between is not None:
        opened = sum(len(values) for values in seconds.values())
        print(f"between pages (closed sessions discarded, garbage collected): "
              f"{between / opened:.3f} CPU s per page opened ({between:.2f} s in all)")


class ProfiledSession:
    """Enough of a Bokeh session context for a page to build as it does when served (the
    pages check ``doc.session_context`` and read the URL's arguments from its request)."""

    def __init__(self, arguments: dict[str, str]) -> None:
        self.id = f"profile-{time.monotonic_ns()}"
        self.server_context = None
        self.destroyed = False
        self.request = SimpleNamespace(
            arguments={k: [v.encode()] for k, v in arguments.items()}, cookies={}, headers={})


class DeferredExecutor(concurrent.futures.Executor):
    """Keeps what is submitted until :meth:`run` runs it on the caller's thread (so cProfile
    sees it; at once would deadlock a caller that submits under its own lock)."""

    def __init__(self) -> None:
        self.queued: list[tuple[concurrent.futures.Future, Any]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.queued.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run(self) -> bool:
        """Run everything queued; False when nothing was."""
        queued, self.queued = self.queued, []
        for future, work in queued:
            try:
                future.set_result(work())
            except Exception as exc:  # reported as the pool would: on the future
                future.set_exception(exc)
        return bool(queued)


def run_ticks(doc: Any, builders: DeferredExecutor) -> None:
    """Run ``doc``'s next-tick callbacks and the background builds, and those they add, until
    none is left (a served document's event loop and the builder threads do this)."""
    from bokeh.server.callbacks import NextTickCallback

    while True:
        pending = [c for c in doc.session_callbacks if isinstance(c, NextTickCallback)]
        for callback in pending:
            doc.remove_next_tick_callback(callback)
            callback.callback()
        if not builders.run() and not pending:
            return


class InProcessPages:
    """Builds pages' documents in this process as if served (``page_app`` into a
    ``bokeh.document.Document``, its JSON as for ``PULL-DOC-REQ``, its ``onload`` work, its
    first ticks and background views, run on the calling thread), all in one session."""

    def __init__(self) -> None:
        from explorer.components import background
        from explorer.server import model_values

        model_values.install()  # as the serving process serialises
        background.BUILDERS = self.builders = DeferredExecutor()
        self.sid = ""

    def build(self, name: str) -> int:
        """Build page ``name`` ('' = start); the number of models in its document."""
        from bokeh.document import Document
        from panel.io.state import set_curdoc, state

        from explorer.app import page_app

        arguments = {"page": name} if name else {}
        if self.sid:
            arguments["s"] = self.sid
        doc = Document()
        context = ProfiledSession(arguments)
        doc._session_context = weakref.ref(context)
        with set_curdoc(doc):
            with doc.models.freeze():
                page_app().server_doc(doc)
            self.sid = page_app_sid(doc) or self.sid
        doc.to_json()
        state._on_load(doc)
        run_ticks(doc, self.builders)
        return len(doc.models)

    def warm_up(self) -> None:
        """Build every page once (imports, first plans), then let background planning
        settle."""
        for name, _ in PAGES:
            self.build(name)
        time.sleep(2)


def profile(page: str, top: int) -> None:
    """Build ``page``'s document in this process as if served, under cProfile (CPU time),
    after one warm-up round of every page in one session, and print the top entries."""
    pages = InProcessPages()
    pages.warm_up()
    start = time.process_time()
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(pages.build, page)
    print(f"{page or 'start'}: {time.process_time() - start:.3f} CPU s under the profiler")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def in_process(runs: int) -> None:
    """Build every page ``runs`` times in this process as if served (after a warm-up round;
    no profiler, no server) and print each page's median CPU seconds and models; the garbage
    collector runs between builds, outside the measured time, as it does between pages."""
    pages = InProcessPages()
    pages.warm_up()
    seconds: dict[str, list[float]] = {label: [] for _, label in PAGES}
    models: dict[str, int] = {}
    for _ in range(runs):
        for name, label in PAGES:
            gc.collect()
            start = time.process_time()
            models[label] = pages.build(name)
            seconds[label].append(time.process_time() - start)
    print("in-process build (no server), CPU seconds:")
    report(seconds, models)


def page_app_sid(doc: Any) -> str:
    """The session id the page put into its address (``s=``) or its links."""
    for model in doc.models:
        text = getattr(model, "text", None)
        if isinstance(text, str) and "s=" in text:
            return text.split("s=", 1)[1].split("&", 1)[0].split(")", 1)[0].split('"', 1)[0]
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="measured rounds (after a warm-up)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds any one page may take")
    parser.add_argument("--options", nargs=argparse.REMAINDER, default=[],
                        help="extra panel serve options (the rest of the command line)")
    parser.add_argument("--profile", metavar="PAGE", default=None,
                        help="profile one page's build in this process instead ('' = start)")
    parser.add_argument("--top", type=int, default=40, help="profile lines to print")
    parser.add_argument("--in-process", action="store_true",
                        help="build the pages in this process (no server, no profiler)")
    parser.add_argument("--scrolled", action="store_true",
                        help="also build every part that waits to be scrolled to")
    args = parser.parse_args()
    if args.profile is not None:
        profile(args.profile, args.top)
        return
    if args.in_process:
        in_process(args.runs)
        return
    print(f"load average at start: {psutil.getloadavg()[0]:.1f} (2 cores); "
          f"panel serve options: {' '.join(args.options) or '(none)'}; "
          f"{'every part scrolled to' if args.scrolled else 'first screen (no scrolling)'}")
    before = calibration_seconds()
    with tempfile.TemporaryDirectory() as logs, serving(Path(logs) / "server.log",
                                                        *args.options) as app:
        ws_url = app.url.replace("http://", "ws://") + "/app/ws"
        seconds, models, between = asyncio.run(measure(
            ws_url, psutil.Process(app.process.pid), args.runs, args.timeout, args.scrolled))
    after = calibration_seconds()
    print(f"calibration before and after the run: {before:.3f} and {after:.3f} CPU s")
    report(seconds, models, between, calibration=(before + after) / 2)
    print(f"load average at end: {psutil.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
