"""The plan store: finished plans per ``(workload, noise)``, shared by every session.

Planning is the explorer's only slow step. :class:`PlanStore` keeps every finished plan per
``(workload, noise)`` for the life of the process, so revisiting a workload is instant and every
session shares them (plans are data-independent and hold nothing private). Missing plans are
made by a :class:`~explorer.planning.jobs.PlanningJob` on a bounded pool of planner threads: at
most ``planners`` jobs run at once, the others wait in a queue whose position (and the cost
model's estimate of their planning time) each waiting job reports.

In the served app (``EXPLORER_PLANNING=processes``, the default) a planner thread only waits:
each mechanism is planned in a worker process of a pool of ``planners`` processes
(:mod:`explorer.planning.workers`), which reports its progress back and stops at its next
checkpoint on a cancel. ``EXPLORER_PLANNING=threads`` plans in the planner threads themselves.

With ``DPWB_SCHEDULER`` set to a Dask scheduler address (``tcp://host:port``), the jobs plan
their mechanisms on that cluster (the ``dask`` extra), so planning leaves the web process; the
planner threads then only wait, and a cancel drops the mechanisms that have not started.

With a :class:`~explorer.planning.plan_cache.PlanCache` (the served app's ``STORE`` has one, in
``$DPWB_DATA_DIR/plans``), every finished row and bound is also written to disk and a row this
process lacks is read from there before anything is planned, so every serving process reuses
every other's plans. With a :class:`~explorer.planning.board.JobBoard` (``board``, set by the
served app), every job's status is written where every process sees it, and a cancel from any
process stops it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

from engine import (
    SCHEDULER_VARIABLE,
    Bound,
    Comparison,
    ComparisonRow,
    Plan,
    Privacy,
    Workload,
    dask_client,
    dask_executor,
    mechanism_class,
    one_line,
    readable_labels,
    scheduler_from_environment,
    svd_bound,
)
from explorer.planning.board import JobBoard, running_elsewhere
from explorer.planning.jobs import JobStatus, PlanningJob
from explorer.planning.plan_cache import BOUND, PlanCache
from explorer.planning.schedule import mechanism_title
from explorer.planning.settings import (
    DEFAULT_MAX_JOBS,
    DEFAULT_PLANNERS,
    lower_thread_priority,
    max_jobs_from_environment,
    planners_from_environment,
    processes_from_environment,
)
from explorer.planning.workers import PlannerPool

LOG = logging.getLogger("explorer.planning")


class PlanningRefused(RuntimeError):  # noqa: N818 -- an outcome: the request is refused
    """A user asked for more unfinished planning jobs than they may have at once."""


def workload_key(workload: Workload) -> str:
    """A short stable key for a workload (its domain and query groups), for caches."""
    doc = json.dumps(
        {"domain": workload.domain.to_spec(), "workload": workload.to_spec()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha1(doc.encode()).hexdigest()[:16]


def skipped_row(name: str) -> ComparisonRow:
    """The row shown for a mechanism whose planning the user skipped."""
    return ComparisonRow(
        name,
        mechanism_title(name),
        None,
        "not planned: skipped by the user (plan it with 'Plan missing mechanisms')",
        0.0,
    )


@dataclasses.dataclass
class _Entry:
    workload: Workload | None
    bound: Bound | None = None
    rows: dict[str, dict[str, ComparisonRow]] = dataclasses.field(default_factory=dict)
    #: per noise: the last look into the shared cache (see :meth:`PlanStore.load_cached`)
    cache_looks: dict[str, tuple[int | None, tuple[str, ...], bool]] = dataclasses.field(
        default_factory=dict
    )


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
        cache: finished plans on disk, shared with other processes (None: memory only).
        board: where jobs' status rows go, for every process to see and cancel (None: none).
        max_jobs: unfinished jobs one user may have at once (a new one past that is refused).
        owner_of: the user a subscriber belongs to (default: every subscriber is its own).
    """

    def __init__(
        self,
        max_workloads: int = 48,
        planners: int = DEFAULT_PLANNERS,
        scheduler: str | None = None,
        processes: bool = False,
        cache: PlanCache | None = None,
        board: JobBoard | None = None,
        max_jobs: int = DEFAULT_MAX_JOBS,
        owner_of: Callable[[Hashable], Hashable] | None = None,
    ) -> None:
        if planners < 1:
            raise ValueError(f"planners: {planners} (allowed: 1 or more)")
        self.max_workloads = max_workloads
        self.planners = planners
        self.scheduler = scheduler
        self.cache = cache
        self.board = board
        self.max_jobs = max_jobs
        self.owner_of: Callable[[Hashable], Hashable] = owner_of or (lambda s: s)
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

    def _entry(self, key: str, workload: Workload | None) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(workload)
            elif entry.workload is None:
                entry.workload = workload
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_workloads:
                self._entries.popitem(last=False)
            return entry

    def put_row(self, key: str, workload: Workload, noise: str, row: ComparisonRow) -> None:
        """Store one finished row (in the shared cache too, unless it failed: a failure may
        not recur)."""
        with self._lock:
            self._entry(key, workload).rows.setdefault(noise, {})[row.mechanism] = row
        if self.cache is not None and not (row.error or "").startswith("failed"):
            self.cache.put(key, noise, row.mechanism, row)

    def put_bound(self, key: str, workload: Workload, bound: Bound) -> None:
        """Store the SVD bound of a workload (in the shared cache too)."""
        with self._lock:
            self._entry(key, workload).bound = bound
        if self.cache is not None and bound.method not in ("pending", "none"):
            self.cache.put(key, "", BOUND, bound)

    def load_cached(self, key: str, noise: str, names: Iterable[str]) -> None:
        """Take the rows among ``names`` that this process lacks, and the bound, from the
        shared cache when another process (or an earlier run) made them."""
        if self.cache is None:
            return
        version = self.cache.version()
        with self._lock:
            entry = self._entry(key, None)
            have = entry.rows.get(noise, {})
            lacking = [n for n in names if n not in have]
            bound_lacking = entry.bound is None
            # The same look at an unchanged cache folder finds nothing new: a page polling
            # while a job runs reads no files until some process writes an entry.
            look = (version, tuple(lacking), bound_lacking)
            if version is not None and entry.cache_looks.get(noise) == look:
                return
            entry.cache_looks[noise] = look
        for name in lacking:
            row = self.cache.get(key, noise, name)
            if isinstance(row, ComparisonRow) and row.mechanism == name:
                with self._lock:
                    self._entry(key, None).rows.setdefault(noise, {}).setdefault(name, row)
        if bound_lacking:
            bound = self.cache.get(key, "", BOUND)
            if isinstance(bound, Bound):
                with self._lock:
                    entry = self._entry(key, None)
                    if entry.bound is None:
                        entry.bound = bound

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
        self.load_cached(key, "", ())
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
        """The names among ``names`` with no finished row yet (here or in the shared cache)."""
        names = list(names)
        self.load_cached(key, noise, names)
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
        self.load_cached(key, privacy.noise, names)
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
            if self.job_elsewhere(key, privacy.noise) is not None:
                return None  # another process plans it: pages follow it on the board
            self._admit(subscriber)
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

    def _admit(self, subscriber: Hashable) -> None:
        """Refuse a new job for ``subscriber`` whose user has ``max_jobs`` unfinished ones."""
        owner = self.owner_of(subscriber)
        theirs = sum(
            1
            for job in self._jobs.values()
            if not job.status().finished
            and any(self.owner_of(s) == owner for s in job.waiting() if s is not subscriber)
        )
        if theirs >= self.max_jobs:
            raise PlanningRefused(
                f"planning: refused, {theirs} of your planning jobs are queued or running "
                f"(at most {self.max_jobs} at once); cancel one or wait until one finishes"
            )

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

    def dequeue(self, job: PlanningJob) -> None:
        """Take ``job`` out of the queue for a free planner (it runs, or was cancelled)."""
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)

    def running(self) -> list[PlanningJob]:
        """Jobs that have not finished (queued, running or cancelling)."""
        with self._lock:
            return [job for job in self._jobs.values() if not job.status().finished]

    def board_status(self, key: str, noise: str, elsewhere: bool = False) -> JobStatus | None:
        """The status of the job planning ``key`` for ``noise`` as the board has it, whichever
        process runs it (None without a board, or when none was recorded); ``elsewhere``: only
        an unfinished job of another living process (:func:`~explorer.planning.board.
        running_elsewhere`), else None."""
        row = self._board_call(lambda board: board.job(key, noise))
        if row is None or (elsewhere and not running_elsewhere(row)):
            return None
        return JobStatus(row.state, row.total, row.done, row.current, 0, math.nan, row.message,
                         0.0)

    def job_elsewhere(self, key: str, noise: str) -> JobStatus | None:
        """The status of an unfinished job planning ``key`` for ``noise`` in another living
        process (None: there is none, or no board)."""
        return self.board_status(key, noise, elsewhere=True)

    def cancel_everywhere(self, key: str, noise: str) -> bool:
        """Ask the job planning ``key`` for ``noise`` to stop, in whichever process it runs;
        False when the board knows of no unfinished job (or there is no board)."""
        return bool(self._board_call(lambda board: board.cancel_job(key, noise)))

    def _board_call(self, call: Any) -> Any:
        if self.board is None:
            return None
        try:
            return call(self.board)
        except Exception as exc:  # noqa: BLE001 - a failing board must not break a page
            LOG.warning("planning board: %s", one_line(exc))
            return None

    def clear(self) -> None:
        """Forget every plan (running jobs finish, and store what they finish)."""
        with self._lock:
            self._entries.clear()


#: The store shared by every session of this server process.
STORE = PlanStore(
    planners=planners_from_environment(),
    scheduler=scheduler_from_environment(),
    processes=processes_from_environment(),
    cache=PlanCache(),
    max_jobs=max_jobs_from_environment(),
)
