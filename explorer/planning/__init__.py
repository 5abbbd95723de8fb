"""Planning off the web thread: a process-wide plan store and the jobs that fill it.

Planning is the explorer's only slow step. :class:`PlanStore` keeps every finished plan per
``(workload, noise)`` for the life of the process, so revisiting a workload is instant and every
session shares them (plans are data-independent and hold nothing private). Missing plans are
made by a :class:`PlanningJob` on a bounded pool of planner threads: at most ``planners`` jobs run
at once, the others wait in a queue whose position (and the cost model's estimate of their
planning time) each waiting job reports.

In the served app (``EXPLORER_PLANNING=processes``, the default) a planner thread only waits:
each mechanism is planned in a worker process of a pool of ``planners`` processes
(:mod:`explorer.planning.workers`), which reports its progress back and stops at its next
checkpoint on a cancel. ``EXPLORER_PLANNING=threads`` plans in the planner threads themselves.

One job serves every session that asked for the same ``(workload, noise)``, but cancel and skip
belong to each subscriber: a job stops only when no subscriber still waits for it, and a running
mechanism is stopped only when every subscriber has skipped it.

With ``DPWB_SCHEDULER`` set to a Dask scheduler address (``tcp://host:port``), the jobs plan
their mechanisms on that cluster (the ``dask`` extra), so planning leaves the web process; the
planner threads then only wait, and a cancel drops the mechanisms that have not started.

Nothing here imports Panel; it is unit-testable without a browser or a server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

from engine.analysis.cost_model import format_bytes
from engine.analysis.svd_bound import Bound, svd_bound
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.executor import (
    SCHEDULER_VARIABLE,
    dask_client,
    dask_executor,
    scheduler_from_environment,
)
from engine.mechanisms import Plan, get, mechanism_class
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workflows.compare import Comparison, ComparisonRow, compare, plan_row
from engine.workloads.labels import readable_labels
from engine.workloads.workload import Workload
from explorer.planning.workers import PlannerPool

LOG = logging.getLogger(__name__)

#: How much lower than the web thread's the planner threads' CPU priority is (nice steps).
PLANNER_NICENESS = 10
#: Planning jobs that may run at the same time in one server process (``EXPLORER_PLANNERS``).
DEFAULT_PLANNERS = 2
#: Operations of ``Cost.plan_operations`` planned per second, to turn the cost model's count
#: into a time. A rough constant, measured once on the 2-core development machine by planning
#: mechanisms one at a time. The model is loose: on the large estimates that decide what is
#: held back it runs 4e8 to 3.5e10 per second (eigen-design on SF1: 1.4e10 operations in
#: 18-36 s; hdmm on SF1: 2.8e10 in 2-3 s; hdmm-opt0 on 1,400 cells: 2.7e11 in 9.4 s; hdmm-kron
#: on SF1: 1.4e10 in 0.4 s), on small ones down to 2e7 (eigen-design on CPS: 9e6 in 0.46 s).
#: Times derived from it are shown as estimates, never as promises.
OPERATIONS_PER_SECOND = 1e10
#: Mechanisms estimated to plan longer than this (seconds) start only on the user's request.
AUTO_START_SECONDS = 60.0


def workload_key(workload: Workload) -> str:
    """A short stable key for a workload (its domain and query groups), for caches."""
    doc = json.dumps(
        {"domain": workload.domain.to_spec(), "workload": workload.to_spec()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha1(doc.encode()).hexdigest()[:16]


def mechanism_title(name: str) -> str:
    """The display title of a registered mechanism (its name when it has none)."""
    try:
        return mechanism_class(name).title or name
    except Exception:  # an unknown or broken registration must not break a page
        return name


def is_data_dependent(name: str) -> bool:
    """True for mechanisms that need the data to choose what to measure."""
    try:
        return bool(mechanism_class(name).data_dependent)
    except Exception:  # an unknown or broken registration counts as data-independent
        return False


def one_line(exc: BaseException) -> str:
    """A one-line message for any exception (SpecErrors already are one line)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, SpecError | NotApplicable):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def skipped_row(name: str) -> ComparisonRow:
    """The row shown for a mechanism whose planning the user skipped."""
    return ComparisonRow(
        name,
        mechanism_title(name),
        None,
        "not planned: skipped by the user (plan it with 'Plan missing mechanisms')",
        0.0,
    )


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What planning one mechanism on a workload is expected to cost, before it starts.

    ``operations`` and ``bytes`` are the cost model's planning work and peak memory
    (:meth:`engine.mechanisms.Mechanism.estimate`); ``applicable`` is False when the mechanism
    refuses the workload at once (its row is then ready immediately, whatever the model says).
    """

    mechanism: str
    operations: float
    bytes: float
    applicable: bool = True

    @property
    def seconds(self) -> float:
        """Estimated planning time in seconds (0 when refused at once; inf when unknown)."""
        if not self.applicable:
            return 0.0
        return (
            self.operations / OPERATIONS_PER_SECOND if math.isfinite(self.operations) else math.inf
        )

    @property
    def starts_automatically(self) -> bool:
        """True unless the estimated time exceeds :data:`AUTO_START_SECONDS`."""
        return self.seconds <= AUTO_START_SECONDS

    def describe(self) -> str:
        """``~3e9 operations, 120 MiB, about 1 min (estimate)``."""
        if not self.applicable:
            return "does not apply: ready at once"
        if not math.isfinite(self.operations):
            return "no estimate"
        return (
            f"~{_scientific(self.operations)} operations, {format_bytes(self.bytes)}, "
            f"{_duration(self.seconds)} (estimate)"
        )


def _scientific(value: float) -> str:
    """``3e9`` for 3.1e9: one significant digit, no plus sign or leading zeros."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _duration(seconds: float) -> str:
    """``under 1 s``, ``about 12 s``, ``about 4 min``, ``about 3 h``, ``about 2e+03 days``."""
    if seconds < 1.0:
        return "under 1 s"
    if seconds < 90.0:
        return f"about {seconds:.0f} s"
    if seconds < 5400.0:
        return f"about {seconds / 60.0:.0f} min"
    if seconds < 86400.0 * 2:
        return f"about {seconds / 3600.0:.0f} h"
    return f"about {seconds / 86400.0:.2g} days"


def estimate_mechanism(name: str, workload: Workload, privacy: Privacy) -> Estimate:
    """The planning cost of ``name`` on ``workload`` from the cost model (nothing is planned).

    Data-dependent mechanisms and mechanisms whose ``check`` refuses the workload are not
    applicable (they finish at once); an estimate that raises is unknown (infinite).
    """
    try:
        mechanism = get(name)
        if mechanism.data_dependent:
            return Estimate(name, 0.0, 0.0, applicable=False)
        mechanism.check(workload, privacy)
    except Exception:  # NotApplicable, a size guard, a broken registration: refused at once
        return Estimate(name, 0.0, 0.0, applicable=False)
    try:
        cost = mechanism.estimate(workload, privacy)
    except Exception:  # no model for this workload: unknown, planned last
        return Estimate(name, math.inf, math.inf)
    return Estimate(name, float(cost.plan_operations), float(cost.plan_bytes))


def plan_order(estimates: Iterable[Estimate]) -> list[Estimate]:
    """Cheapest first (refused ones at once, unknown ones last); ties keep their order."""
    return sorted(estimates, key=lambda e: e.seconds)


def schedule(
    names: Iterable[str], workload: Workload, privacy: Privacy, allowed: Iterable[str] = ()
) -> tuple[list[Estimate], list[Estimate]]:
    """Split ``names`` into those to plan now, cheapest first, and those held back.

    A mechanism is held back when its estimate exceeds :data:`AUTO_START_SECONDS` and it is
    not among ``allowed`` (the ones the user asked to plan anyway).
    """
    allowed = set(allowed)
    ordered = plan_order(estimate_mechanism(n, workload, privacy) for n in names)
    start = [e for e in ordered if e.starts_automatically or e.mechanism in allowed]
    held = [e for e in ordered if not e.starts_automatically and e.mechanism not in allowed]
    return start, held


def queue_rows(
    status: JobStatus | None,
    pending: Sequence[str],
    held: Sequence[Estimate],
    estimates: dict[str, Estimate],
) -> list[tuple[str, str, str]]:
    """``(mechanism, state, estimate)`` for every mechanism without a row yet, in plan order.

    ``pending`` are the job's mechanisms still to plan (the running one first); ``held`` the
    ones waiting for the user's "plan anyway". Without a ``status`` no job has started yet
    (a page shows the plan while it loads): ``pending`` is then the order they will start in.
    """
    rows = []
    for place, name in enumerate(pending):
        if status is None:
            state = "starts first" if place == 0 else f"starts number {place + 1}"
        elif status.state == "queued":
            state = f"waiting for a free planner (job number {status.position} in line)"
        elif place == 0 and status.current == name:
            state = "planning now"
        else:
            state = f"queued: number {place} after the running one"
        estimate = estimates.get(name)
        rows.append((name, state, estimate.describe() if estimate else "no estimate"))
    for estimate in held:
        rows.append(
            (
                estimate.mechanism,
                f"not started: estimated over {AUTO_START_SECONDS:.0f} s; "
                "press 'Plan anyway' to start it",
                estimate.describe(),
            )
        )
    return rows


@dataclasses.dataclass(frozen=True)
class JobStatus:
    """A consistent snapshot of a planning job, for display.

    ``position`` is the job's place in the queue for a free planner (1 = next), 0 once it runs.
    """

    state: str  # queued | running | cancelling | done | cancelled | failed
    total: int
    done: int
    current: str | None
    iteration: int
    loss: float
    message: str
    seconds: float
    position: int = 0
    #: while queued: the cost model's estimate of the job's planning time (seconds)
    estimate: float = math.nan

    @property
    def finished(self) -> bool:
        """True once the job will not change any more."""
        return self.state in ("done", "cancelled", "failed")

    @property
    def fraction(self) -> float:
        """Share of mechanisms finished, 0..1."""
        return self.done / self.total if self.total else 1.0

    def describe(self) -> str:
        """One line for a progress indicator."""
        if self.state == "queued":
            ahead = self.position - 1
            line = (
                f"Waiting for a free planner: number {self.position} in the queue "
                f"({ahead} job(s) ahead)"
                if self.position
                else "Waiting for a free planner"
            )
            if not math.isnan(self.estimate):
                line += f"; this job: {_duration(self.estimate)} (estimate)"
            return line + "..."
        if self.state == "done":
            return f"Planned {self.total} mechanism(s) in {self.seconds:.1f} s."
        if self.state == "cancelled":
            return f"Cancelled after {self.done} of {self.total} mechanism(s)."
        if self.state == "failed":
            return f"Planning failed: {self.message}"
        where = (
            f"Planning {self.current} ({self.done + 1} of {self.total})"
            if self.current
            else "Finishing"
        )
        if self.state == "cancelling":
            return f"Cancelling: {self.current or 'the job'} stops at its next checkpoint..."
        if self.iteration:
            where += f", iteration {self.iteration}"
            if math.isfinite(self.loss):
                where += f", objective {self.loss:.4g}"
        return where + "..."


class PlanningJob:
    """Plans the missing mechanisms of one ``(workload, noise)`` for its subscribers.

    Finished rows go straight into the store, so partial results survive a cancel and show up
    while the rest is still running. Subscribers are any hashable tokens (the explorer uses its
    sessions); each one's skips are its own.
    """

    def __init__(
        self,
        store: PlanStore,
        key: str,
        workload: Workload,
        privacy: Privacy,
        names: Sequence[str],
    ) -> None:
        self.store, self.key, self.workload = store, key, workload
        self.privacy = privacy.with_()
        self.progress = Progress(self._on_progress)
        self._names = list(names)
        self._subscribers: dict[Hashable, set[str]] = {}  # subscriber -> mechanisms it skipped
        self._cancelled = False  # the whole job (as opposed to skipping one mechanism)
        self._closed = False  # every mechanism is planned: no new names are taken
        self._skip: str | None = None
        self._lock = threading.Lock()
        self._state = "queued"
        self._done = 0
        self._iteration = 0
        self._loss = math.nan
        self._message = ""
        self._started = time.perf_counter()
        self._finished_at: float | None = None
        self._event = threading.Event()
        self._estimates: dict[str, Estimate] = {}  # the cost model's, computed when needed

    @property
    def names(self) -> tuple[str, ...]:
        """Every mechanism this job plans (subscribers joining later may add some)."""
        with self._lock:
            return tuple(self._names)

    def pending(self) -> tuple[str, ...]:
        """The mechanisms still to plan, the running one first."""
        with self._lock:
            return tuple(self._names[self._done :])

    # ----- subscribers (any thread) -------------------------------------------------------
    def subscribe(self, subscriber: Hashable, names: Iterable[str] = ()) -> bool:
        """Wait for this job too, adding the ``names`` it does not plan yet.

        Returns False when the job can no longer take them (it is finishing or finished); the
        caller then starts a new job.
        """
        with self._lock:
            wanted = [n for n in names if n not in self._names]
            if self._state in ("cancelling", "done", "cancelled", "failed") or (
                wanted and self._closed
            ):
                return False
            self._names.extend(wanted)
            self._subscribers.setdefault(subscriber, set())
            return True

    def waits(self, subscriber: Hashable) -> bool:
        """True while ``subscriber`` waits for this job."""
        with self._lock:
            return subscriber in self._subscribers

    def subscribers(self) -> int:
        """How many subscribers still wait for this job."""
        with self._lock:
            return len(self._subscribers)

    def leave(self, subscriber: Hashable) -> None:
        """``subscriber`` stops waiting; the job is cancelled when nobody waits any more."""
        with self._lock:
            self._subscribers.pop(subscriber, None)
            if self._subscribers:
                return
        self.cancel()

    def skip(self, subscriber: Hashable) -> str | None:
        """``subscriber`` gives up on the running mechanism; returns its name.

        The mechanism stops only once every subscriber has skipped it; until then it goes on
        for the others (and its plan, when it finishes, is there for everyone).
        """
        with self._lock:
            current = self._current()
            if current is None or self._state != "running" or subscriber not in self._subscribers:
                return None
            self._subscribers[subscriber].add(current)
            if not all(current in skips for skips in self._subscribers.values()):
                return current
            self._skip = current
            progress = self.progress
        progress.cancel()
        return current

    def cancel(self) -> None:
        """Stop the whole job at the next checkpoint of the running mechanism."""
        with self._lock:
            self._cancelled = True
            self._subscribers.clear()
            progress = self.progress
            if self._state == "queued":
                self._finish("cancelled")
            elif self._state == "running":
                self._state = "cancelling"
        self.store._dequeue(self)
        progress.cancel()

    # ----- the work (a planner thread, or the caller's) -----------------------------------
    def _on_progress(self, iteration: int, loss: float, message: str) -> None:
        with self._lock:
            self._iteration, self._loss, self._message = iteration, loss, message

    def _current(self) -> str | None:
        return self._names[self._done] if self._done < len(self._names) else None

    def run(self) -> None:
        """Plan every missing mechanism, cheapest first as given; never raises."""
        self.store._dequeue(self)
        with self._lock:
            if self._state != "queued":  # cancelled while it waited
                return
            self._state = "running"
            self._started = time.perf_counter()
        try:
            self._plan_all()
        except Cancelled:
            with self._lock:
                self._finish("cancelled")
            return
        except Exception as exc:  # a broken engine must not kill the planner thread
            with self._lock:
                self._message = one_line(exc)
                self._finish("failed")
            return
        with self._lock:
            self._finish("cancelled" if self._cancelled else "done")

    def _finish(self, state: str) -> None:
        self._state = state
        self._subscribers.clear()
        self._finished_at = time.perf_counter()
        self._event.set()
        LOG.info(
            "planning job %s/%s (%s): %s after %d of %d mechanism(s), %.1f s",
            self.key,
            self.privacy.noise,
            self.workload.describe(),
            state,
            self._done,
            len(self._names),
            self._finished_at - self._started,
        )

    def _on_row(self, row: ComparisonRow) -> None:
        self.store.put_row(self.key, self.workload, self.privacy.noise, row)
        with self._lock:
            self._done += 1
            self._iteration, self._loss = 0, math.nan
        if self._cancelled:
            raise Cancelled("cancelled between mechanisms")

    def _remaining(self) -> list[str]:
        """What is left to plan; closes the job to new names when nothing is."""
        with self._lock:
            remaining = self._names[self._done :]
            self._closed = not remaining
            return remaining

    def _plan_all(self) -> None:
        pool = self.store.pool
        if pool is not None:
            self._plan_in(pool)
            return
        bound: Bound | None = None
        while remaining := self._remaining():
            before = self._done
            try:
                result = compare(
                    self.workload,
                    self.privacy,
                    remaining,
                    progress=self.progress,
                    on_row=self._on_row,
                    executor=self.store.executor(),
                )
                bound = result.bound
            except Cancelled:
                if self._cancelled:
                    raise
                self._after_skip(remaining, self._done - before)
            except Exception as exc:
                finished = self._done - before
                if finished >= len(remaining):  # every row is in: compare's own bound failed
                    continue
                # The running mechanism raised something compare() does not treat as "not
                # applicable": record it as that mechanism's outcome and go on with the rest.
                failed = remaining[finished]
                self._on_row(
                    ComparisonRow(
                        failed, mechanism_title(failed), None, f"failed: {one_line(exc)}", 0.0
                    )
                )
        # The store computes the bound on its own thread when the job starts; this one, made
        # by compare() anyway, only fills in when that thread has not finished.
        if bound is not None and self.store.bound(self.key) is None:
            self.store.put_bound(self.key, self.workload, bound)

    def _plan_in(self, pool: PlannerPool) -> None:
        """Plan the mechanisms one by one in ``pool``'s worker processes, in order; a row
        that composes others' plans (hdmm) gets the finished ones of this workload."""
        while remaining := self._remaining():
            name = remaining[0]
            try:
                if not self._estimate(name).applicable:  # refused at once: no planning
                    row = plan_row(name, self.workload, self.privacy)
                else:
                    row = pool.plan(
                        name,
                        self.workload,
                        self.privacy,
                        known=self.store.composed_plans(self.key, self.privacy.noise, name),
                        progress=self.progress,
                    )
            except Cancelled:
                if self._cancelled:
                    raise
                self._after_skip(remaining, 0)
                continue
            except Exception as exc:  # a broken engine or a lost worker: this row's message
                row = ComparisonRow(name, mechanism_title(name), None, f"failed: {one_line(exc)}")
            self._on_row(row)

    def _after_skip(self, remaining: list[str], finished: int) -> None:
        """Account for a skip request that stopped the running mechanism."""
        with self._lock:
            target, self._skip = self._skip, None
            running = remaining[finished] if finished < len(remaining) else None
            # A fresh Progress: the old one stays cancelled for ever.
            self.progress = Progress(self._on_progress)
            if running is not None and running == target:
                self._done += 1  # not planned; each subscriber shows its own skip
        # Otherwise the mechanism to skip had just finished and the next one caught the
        # request: that one is planned again from the start.

    # ----- watching (any thread) ----------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finished (True) or the timeout passed (False)."""
        return self._event.wait(timeout)

    def _estimate(self, name: str) -> Estimate:
        if name not in self._estimates:
            self._estimates[name] = estimate_mechanism(name, self.workload, self.privacy)
        return self._estimates[name]

    def estimate(self) -> float:
        """The cost model's planning time of the mechanisms still to plan (seconds)."""
        return sum(self._estimate(name).seconds for name in self.pending())

    def status(self) -> JobStatus:
        """A consistent snapshot for display."""
        position = self.store.position(self)
        estimate = self.estimate() if position else math.nan
        with self._lock:
            end = self._finished_at if self._finished_at is not None else time.perf_counter()
            return JobStatus(
                self._state,
                len(self._names),
                self._done,
                self._current(),
                self._iteration,
                self._loss,
                self._message,
                end - self._started,
                position if self._state == "queued" else 0,
                estimate if self._state == "queued" else math.nan,
            )


@dataclasses.dataclass
class _Entry:
    workload: Workload
    bound: Bound | None = None
    rows: dict[str, dict[str, ComparisonRow]] = dataclasses.field(default_factory=dict)


class PlanStore:
    """Finished plans per ``(workload, noise)`` and the jobs that make them.

    Args:
        max_workloads: how many workloads to keep (least recently used ones are dropped).
        planners: how many planning jobs may run at the same time; the rest queue.
        scheduler: a Dask scheduler address: the jobs then plan their mechanisms on that
            cluster, out of the web process.
        processes: without a scheduler, plan in a pool of ``planners`` worker processes
            (:class:`explorer.planning.workers.PlannerPool`) rather than in the planner threads
            themselves, so planning never holds the web process's interpreter lock.
    """

    def __init__(
        self,
        max_workloads: int = 48,
        planners: int = DEFAULT_PLANNERS,
        scheduler: str | None = None,
        processes: bool = False,
    ) -> None:
        if planners < 1:
            raise ValueError(f"planners: {planners} (allowed: 1 or more)")
        self.max_workloads = max_workloads
        self.planners = planners
        self.scheduler = scheduler
        #: the worker processes that plan (None: the planner threads or the cluster do)
        self.pool = PlannerPool(planners) if processes and scheduler is None else None
        self._client: Any = None  # a distributed.Client, imported lazily
        self._lock = threading.RLock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._jobs: dict[tuple[str, str], PlanningJob] = {}
        self._bound_threads: dict[str, threading.Thread] = {}  # bounds being computed
        self._queue: list[PlanningJob] = []
        self._job_waiting = threading.Condition(self._lock)
        self._planners: list[threading.Thread] = []

    def _entry(self, key: str, workload: Workload) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(workload)
                while len(self._entries) > self.max_workloads:
                    self._entries.popitem(last=False)
            self._entries.move_to_end(key)
            return entry

    def put_row(self, key: str, workload: Workload, noise: str, row: ComparisonRow) -> None:
        """Store one finished row."""
        with self._lock:
            self._entry(key, workload).rows.setdefault(noise, {})[row.mechanism] = row

    def put_bound(self, key: str, workload: Workload, bound: Bound) -> None:
        """Store the SVD bound of a workload."""
        with self._lock:
            self._entry(key, workload).bound = bound

    def rows(self, key: str, noise: str) -> dict[str, ComparisonRow]:
        """Finished rows of a workload for one noise family (a copy)."""
        with self._lock:
            entry = self._entries.get(key)
            return dict(entry.rows.get(noise, {})) if entry else {}

    def bound(self, key: str) -> Bound | None:
        """The stored SVD bound, or None when not computed yet."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.bound if entry else None

    def ensure_bound(
        self, key: str, workload: Workload, background: bool = True, wait: float = 0.0
    ) -> None:
        """Compute the workload's SVD bound unless stored or under way.

        The bound never waits for a planner: in the background it gets a thread of its own,
        at normal priority, so it shows within moments even while slow planners run (it takes
        milliseconds on closed forms, seconds at most on explicit eigendecompositions).
        ``wait`` (seconds) blocks until it is stored or that time has passed, so a page being
        built can show it at once.
        """
        with self._lock:
            if self.bound(key) is not None:
                return
            thread = self._bound_threads.get(key)
            if thread is None:
                thread = threading.Thread(
                    target=self._compute_bound,
                    args=(key, workload, background),
                    name="explorer-bound",
                    daemon=True,
                )
                self._bound_threads[key] = thread
                if background:
                    thread.start()
        if not background:
            if thread.is_alive():
                thread.join()
            elif self.bound(key) is None:
                thread.run()
        elif wait > 0 and thread.is_alive():
            thread.join(wait)

    def _compute_bound(self, key: str, workload: Workload, labels: bool) -> None:
        """Compute and store the bound; then, when ``labels`` (a served page's background
        thread), the workload's readable labels."""
        try:
            bound = svd_bound(workload)
        except Exception as exc:  # no bound is better than a crashed page
            bound = Bound(None, "none", f"the bound could not be computed: {one_line(exc)}")
        with self._lock:
            self.put_bound(key, workload, bound)
            self._bound_threads.pop(key, None)
        if not labels:
            return  # a caller waiting for the bound (notebook, test) may never show a label
        # The per-query views need the labels once the first plan arrives (0.4 s for CPS's
        # 618,120 queries) and would otherwise build them during the analyst's first slider
        # move. Workloads over the label limit have none.
        with contextlib.suppress(ValueError):
            readable_labels(workload)

    def composed_plans(
        self, key: str, noise: str, name: str
    ) -> tuple[tuple[str, dict[str, Any], Plan], ...]:
        """The finished plans of the mechanisms that ``name`` composes (hdmm: its operators),
        as ``(mechanism, knobs, plan)`` for :func:`engine.workflows.compare.plan_row`."""
        composed = set(mechanism_class(name).composes)
        return tuple(
            (row.mechanism, {}, row.plan)
            for row in self.rows(key, noise).values()
            if row.mechanism in composed and row.plan is not None
        )

    def missing(self, key: str, noise: str, names: Iterable[str]) -> list[str]:
        """The names among ``names`` with no finished row yet."""
        have = self.rows(key, noise)
        return [n for n in names if n not in have]

    def comparison(
        self,
        key: str,
        workload: Workload,
        privacy: Privacy,
        names: Sequence[str],
        skipped: Iterable[str] = (),
    ) -> Comparison | None:
        """The finished part of the comparison at the plans' own calibration.

        ``skipped`` (the caller's skips) appear as "skipped" rows unless planned meanwhile.
        None when there is nothing to show yet.
        """
        rows = self.rows(key, privacy.noise)
        skipped = set(skipped)
        chosen = tuple(
            rows[n] if n in rows else skipped_row(n) for n in names if n in rows or n in skipped
        )
        bound = self.bound(key)
        if not chosen and bound is None:
            return None
        if bound is None:
            bound = Bound(None, "pending", "the bound is still being computed")
        return Comparison(workload, privacy.with_(), bound, chosen)

    def executor(self) -> Executor | None:
        """The cluster's executor when a scheduler is set (connected on first use and kept
        for the life of the process), else None.

        Raises:
            SpecError: the scheduler is unreachable (the job records it as its message).
        """
        if self.scheduler is None:
            return None
        with self._lock:
            if self._client is None:
                self._client = dask_client(self.scheduler, field=SCHEDULER_VARIABLE)
            return dask_executor(self._client)

    def close(self) -> None:
        """Disconnect from the scheduler and stop the worker processes (a later job connects
        or starts them again)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        if self.pool is not None:
            self.pool.close()

    # ----- jobs ---------------------------------------------------------------------------
    def start(
        self,
        subscriber: Hashable,
        workload: Workload,
        privacy: Privacy,
        names: Sequence[str],
        key: str | None = None,
        background: bool = True,
    ) -> PlanningJob | None:
        """Plan the missing ones among ``names`` (in the given order: the caller's plan
        order) for ``subscriber``; None when all are cached.

        The SVD bound is started first, apart from the job (see :meth:`ensure_bound`). A job
        already running for the same workload and noise takes the subscriber (and any names
        it lacks) instead of a second job starting.
        """
        key = key or workload_key(workload)
        self.ensure_bound(key, workload, background)
        with self._lock:
            names = self.missing(key, privacy.noise, names)
            job = self._jobs.get((key, privacy.noise))
            if job is not None and job.subscribe(subscriber, names):
                return job
            if not names:
                return None
            job = PlanningJob(self, key, workload, privacy, names)
            job.subscribe(subscriber)
            self._jobs[(key, privacy.noise)] = job
            if background:
                if self.pool is not None:
                    self.pool.warm()
                self._queue.append(job)
                if len(self._planners) < self.planners:
                    # Daemon threads: stopping the server must not wait for a running plan.
                    planner = threading.Thread(
                        target=self._plan_forever,
                        name=f"explorer-planner-{len(self._planners) + 1}",
                        daemon=True,
                    )
                    self._planners.append(planner)
                    planner.start()
                self._job_waiting.notify()
        if not background:
            job.run()
        return job

    def _plan_forever(self) -> None:
        """A planner thread: run queued jobs, first come first served."""
        lower_thread_priority()
        while True:
            with self._job_waiting:
                while not self._queue:
                    self._job_waiting.wait()
                job = self._queue.pop(0)
            job.run()

    def position(self, job: PlanningJob) -> int:
        """The job's place in the queue for a free planner (1 = next; 0 when not queued)."""
        with self._lock:
            return self._queue.index(job) + 1 if job in self._queue else 0

    def _dequeue(self, job: PlanningJob) -> None:
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)

    def running(self) -> list[PlanningJob]:
        """Jobs that have not finished (queued, running or cancelling)."""
        with self._lock:
            return [job for job in self._jobs.values() if not job.status().finished]

    def clear(self) -> None:
        """Forget every plan (running jobs finish, and store what they finish)."""
        with self._lock:
            self._entries.clear()


def lower_thread_priority() -> None:
    """Give the calling thread a lower CPU priority than the web thread (Linux; else no-op).

    Planning is throughput work and page serving is latency work: on a busy machine the
    kernel should run page builds and slider callbacks first.
    """
    # AttributeError / OSError: no per-thread priorities on this platform.
    with contextlib.suppress(AttributeError, OSError):
        thread = threading.get_native_id()
        # Relative to the thread's own niceness: a server started under `nice` keeps the gap.
        niceness = min(os.getpriority(os.PRIO_PROCESS, thread) + PLANNER_NICENESS, 19)
        os.setpriority(os.PRIO_PROCESS, thread, niceness)


def planners_from_environment() -> int:
    """``EXPLORER_PLANNERS`` as a count of concurrent planning jobs (default 2)."""
    text = os.environ.get("EXPLORER_PLANNERS", "").strip()
    if not text:
        return DEFAULT_PLANNERS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(f"EXPLORER_PLANNERS: {text!r} is not a count (allowed: 1 or more)")
    return value


def processes_from_environment() -> bool:
    """``EXPLORER_PLANNING``: ``processes`` (the default) plans in worker processes,
    ``threads`` in the planner threads of the web process."""
    text = os.environ.get("EXPLORER_PLANNING", "").strip().lower() or "processes"
    if text not in ("processes", "threads"):
        raise SystemExit(f"EXPLORER_PLANNING: {text!r} (allowed: processes, threads)")
    return text == "processes"


#: The store shared by every session of this server process.
STORE = PlanStore(
    planners=planners_from_environment(),
    scheduler=scheduler_from_environment(),
    processes=processes_from_environment(),
)
