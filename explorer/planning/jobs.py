"""Planning jobs: one per ``(workload, noise)``, shared by the sessions that wait for it.

A :class:`PlanningJob` plans the missing mechanisms of one workload and noise family, cheapest
first, for every subscriber that asked; finished rows go into the plan store at once, so partial
results survive a cancel. Cancel and skip belong to each subscriber: a job stops only when no
subscriber still waits for it, and a running mechanism is stopped only when every subscriber
has skipped it. :class:`JobStatus` is a consistent snapshot of a job for display, and
:func:`queue_rows` says where each mechanism without a row stands.

A job plans in the worker processes of the store's :class:`~explorer.planning.workers.PlannerPool`
when it has one, else through :func:`engine.workflows.compare.compare` on the calling planner
thread (or on a Dask cluster, through the store's executor).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Hashable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

from engine import (
    Bound,
    Cancelled,
    ComparisonRow,
    Plan,
    Privacy,
    Progress,
    Workload,
    compare,
    one_line,
    plan_row,
)
from explorer.planning.board import BoardReport, JobBoard
from explorer.planning.people_ready import prepare_for_pages
from explorer.planning.schedule import (
    AUTO_START_SECONDS,
    Estimate,
    duration_text,
    estimate_mechanism,
    mechanism_title,
)
from explorer.planning.workers import PlannerPool

#: The log lines' name stays ``explorer.planning`` (what operators grep for), whichever module
#: of the package writes them.
LOG = logging.getLogger("explorer.planning")


class JobHost(Protocol):
    """What a job needs of the store that runs it (:class:`explorer.planning.store.PlanStore`):
    where its rows and the bound go, and where it plans."""

    #: the worker processes that plan (None: plan through ``executor()`` or in this thread)
    pool: PlannerPool | None
    #: where every process sees the job's status and may cancel it (None: this process only)
    board: JobBoard | None

    def put_row(self, key: str, workload: Workload, noise: str, row: ComparisonRow) -> None:
        """Store one finished row."""

    def put_bound(self, key: str, workload: Workload, bound: Bound) -> None:
        """Store the SVD bound of a workload."""

    def bound(self, key: str) -> Bound | None:
        """The stored SVD bound, or None when not computed yet."""

    def composed_plans(
        self, key: str, noise: str, name: str
    ) -> tuple[tuple[str, dict[str, Any], Plan], ...]:
        """The finished plans of the mechanisms that ``name`` composes."""

    def executor(self) -> Executor | None:
        """The cluster's executor, or None to plan in the calling thread."""

    def position(self, job: PlanningJob) -> int:
        """The job's place in the queue for a free planner (1 = next; 0 when not queued)."""

    def dequeue(self, job: PlanningJob) -> None:
        """Take the job out of the queue for a free planner (it runs, or was cancelled)."""


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
                line += f"; this job: {duration_text(self.estimate)} (estimate)"
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
        store: JobHost,
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
        board = getattr(store, "board", None)
        self._report = BoardReport(board, key, self.privacy.noise) if board is not None else None
        self._to_board(force=True)

    def _to_board(self, force: bool = False) -> None:
        """Write the job's status to the shared board (throttled unless ``force``d)."""
        if self._report is not None:
            self._report.write(self._state, len(self._names), self._done, self._current(),
                               self._message, force=force)

    def _cancelled_elsewhere(self, force: bool = False) -> bool:
        """True when another process set the job's cancel flag on the board."""
        return self._report is not None and self._report.cancel_requested(force)

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

    def waiting(self) -> tuple[Hashable, ...]:
        """The subscribers that still wait for this job."""
        with self._lock:
            return tuple(self._subscribers)

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
        self._to_board(force=True)
        self.store.dequeue(self)
        progress.cancel()

    # ----- the work (a planner thread, or the caller's) -----------------------------------
    def _on_progress(self, iteration: int, loss: float, message: str) -> None:
        with self._lock:
            self._iteration, self._loss, self._message = iteration, loss, message
        self._to_board()
        if self._cancelled_elsewhere():
            self.cancel()

    def _current(self) -> str | None:
        return self._names[self._done] if self._done < len(self._names) else None

    def run(self) -> None:
        """Plan every missing mechanism, cheapest first as given; never raises."""
        self.store.dequeue(self)
        with self._lock:
            if self._state != "queued":  # cancelled while it waited
                return
            self._state = "running"
            self._started = time.perf_counter()
        self._to_board(force=True)
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
        self._to_board(force=True)
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
        prepare_for_pages(row.plan)  # planned in this process's threads or on Dask: here
        self.store.put_row(self.key, self.workload, self.privacy.noise, row)
        with self._lock:
            self._done += 1
            self._iteration, self._loss = 0, math.nan
        self._to_board(force=True)
        if self._cancelled_elsewhere(force=True):
            self.cancel()
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
