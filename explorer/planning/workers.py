"""Planning in worker processes: one mechanism at a time per slot, with progress and cancel.

The explorer's web process must never wait behind planning. Planner threads in the web process
share its interpreter lock with page builds and slider callbacks: a planner in a Python-level
optimiser loop makes every short step of the web thread wait up to the lock's switch interval,
so a page or a Cancel click can take seconds. :class:`PlannerPool` plans each mechanism in a
process of a bounded pool (:func:`engine.executor.local_pool`, spawn-started, one BLAS thread
each, at a lower CPU priority than the web process): the web process only waits.

Each running plan owns a *slot* of a small shared-memory table, handed to the workers as they
start: the worker writes its optimiser's progress (iteration, objective, stage) there and reads
the slot's stop flag at every progress report, so a cancel stops the work in the worker at its
next checkpoint, as it does in a thread. Plans come back pickled by value (cloudpickle: they
hold reconstruction closures). A worker also computes what every page reads of the plan it made
(:func:`explorer.planning.people_ready.prepare_for_pages`), which comes back with the plan.

Nothing here imports Panel (the workers import this module).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from multiprocessing import get_context
from typing import Any

import cloudpickle

from engine import (
    ComparisonRow,
    Plan,
    Privacy,
    Progress,
    WorkerLost,
    Workload,
    local_pool,
    plan_row,
)
from explorer.planning.people_ready import prepare_for_pages

#: How much lower than the web process's the workers' CPU priority is (nice steps).
WORKER_NICENESS = 10
#: Seconds between two looks at a running plan (progress shown, stop flag set).
POLL_SECONDS = 0.1
#: Bytes of a slot's stage message (longer ones are cut).
MESSAGE_BYTES = 96

# A slot's numbers: [stop flag, iteration, objective]; its message is a separate byte array.
_STOP, _ITERATION, _LOSS = 0, 1, 2
_FIELDS = 3

#: In a worker process: the shared tables it was started with.
_worker_numbers: Any = None
_worker_messages: Any = None

ProgressCallback = Callable[[int, float, str], None]


def _start_planner(numbers: Any, messages: Any, niceness: int) -> None:
    """Worker initializer: keep the shared tables and lower the process's CPU priority (the
    pool's workers already end when the web process is gone, see engine.executor)."""
    global _worker_numbers, _worker_messages
    _worker_numbers, _worker_messages = numbers, messages
    with contextlib.suppress(AttributeError, OSError):  # no nice() on this platform
        os.nice(niceness)


def _slot_progress(slot: int) -> Progress:
    """A Progress that writes into ``slot`` and stops when the slot's flag is set."""
    numbers, messages = _worker_numbers, _worker_messages
    base = slot * _FIELDS
    progress = Progress()

    def report(iteration: int, loss: float, message: str) -> None:
        text = message.encode(errors="replace")[:MESSAGE_BYTES].ljust(MESSAGE_BYTES, b"\0")
        messages[slot * MESSAGE_BYTES : (slot + 1) * MESSAGE_BYTES] = text
        numbers[base + _LOSS] = loss
        numbers[base + _ITERATION] = iteration
        if numbers[base + _STOP]:
            progress.cancel()

    progress.callback = report
    return progress


def _plan_in_worker(call: bytes) -> bytes:
    """Plan one row in a worker, ready for the pages: ``call`` and the result are
    cloudpickled."""
    slot, name, workload, privacy, knobs, known = cloudpickle.loads(call)
    row = plan_row(name, workload, privacy, knobs, known, _slot_progress(slot))
    prepare_for_pages(row.plan)
    return cloudpickle.dumps(row)


class PlannerPool:
    """A bounded pool of planner processes; :meth:`plan` runs one mechanism in it.

    Args:
        workers: processes, i.e. plans that may run at the same time (each takes a slot).
        niceness: how much lower the workers' CPU priority is than the caller's.

    The processes start on the first plan (about a second each: spawn and imports) and stay
    for the life of the pool; :meth:`close` stops them.
    """

    def __init__(self, workers: int, niceness: int = WORKER_NICENESS) -> None:
        if workers < 1:
            raise ValueError(f"workers: {workers} (allowed: 1 or more)")
        self.workers = workers
        self.niceness = niceness
        context = get_context("spawn")
        self._numbers = context.RawArray("d", workers * _FIELDS)
        self._messages = context.RawArray("c", workers * MESSAGE_BYTES)
        self._lock = threading.Lock()
        self._free = list(range(workers))
        self._slot_free = threading.Condition(self._lock)
        self._executor: ProcessPoolExecutor | None = None
        self._warm = False  # warm() was called on this executor

    def _pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = local_pool(
                    self.workers,
                    blas_threads=1,
                    initializer=_start_planner,
                    initargs=(self._numbers, self._messages, self.niceness),
                )
            return self._executor

    def warm(self) -> None:
        """Start the worker processes now, without waiting for them (a plan submitted
        meanwhile waits only for what is left of their start)."""
        with self._lock:
            if self._warm:
                return
            self._warm = True
        pool = self._pool()
        for _ in range(self.workers):
            pool.submit(os.getpid)

    def plan(
        self,
        name: str,
        workload: Workload,
        privacy: Privacy,
        knobs: Mapping[str, Any] | None = None,
        known: Iterable[tuple[str, Mapping[str, Any], Plan]] = (),
        progress: Progress | None = None,
    ) -> ComparisonRow:
        """``engine.workflows.compare.plan_row`` in a worker process; blocks until it is done.

        ``known`` plans are sent with the workload, so in the worker they hold its copy of
        ``workload`` (as ``plan_row`` requires). ``progress`` receives the worker's reports
        every :data:`POLL_SECONDS`; cancelling it stops the worker at its next report.

        Raises:
            Cancelled: ``progress`` was cancelled.
            WorkerLost: the worker process died (the pool is started afresh for later plans).
        """
        known = tuple(
            (other, dict(k), replace(plan, workload=workload)) for other, k, plan in known
        )
        slot = self._take_slot()
        try:
            base = slot * _FIELDS
            self._numbers[base : base + _FIELDS] = [0.0, 0.0, math.nan]
            call = cloudpickle.dumps((slot, name, workload, privacy, dict(knobs or {}), known))
            future = self._pool().submit(_plan_in_worker, call)
            return self._wait(future, slot, progress)
        finally:
            self._give_slot(slot)

    def _wait(self, future: Future, slot: int, progress: Progress | None) -> ComparisonRow:
        base, seen = slot * _FIELDS, 0.0
        while True:
            done, _ = wait([future], timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            if progress is not None:
                iteration = self._numbers[base + _ITERATION]
                if iteration != seen and progress.callback is not None:
                    seen = iteration
                    message = bytes(
                        self._messages[slot * MESSAGE_BYTES : (slot + 1) * MESSAGE_BYTES]
                    )
                    progress.callback(
                        int(iteration),
                        float(self._numbers[base + _LOSS]),
                        message.rstrip(b"\0").decode(errors="replace"),
                    )
                if progress.cancelled:
                    self._numbers[base + _STOP] = 1.0
            if done:
                break
        try:
            return cloudpickle.loads(future.result())
        except BrokenProcessPool as exc:
            self._restart()
            raise WorkerLost(
                f"the planner process died while it planned ({type(exc).__name__}); plan it again"
            ) from exc
        finally:
            self._numbers[base + _STOP] = 0.0

    def _take_slot(self) -> int:
        with self._slot_free:
            while not self._free:
                self._slot_free.wait()
            return self._free.pop(0)

    def _give_slot(self, slot: int) -> None:
        with self._slot_free:
            self._free.append(slot)
            self._slot_free.notify()

    def _restart(self) -> None:
        with self._lock:
            executor, self._executor, self._warm = self._executor, None, False
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the worker processes (a later plan starts them again)."""
        with self._lock:
            executor, self._executor, self._warm = self._executor, None, False
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
