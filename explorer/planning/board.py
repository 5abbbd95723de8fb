"""Planning jobs on a shared board: their status and a cancel flag, seen by every process.

A job runs in the serving process that started it; its status row (state, mechanisms done of
how many, the running one, the last message) is written to a :class:`JobBoard` (the explorer's
shared store, :class:`explorer.server.session_store.SessionStore`) whenever its state changes
and at most every :data:`REPORT_SECONDS` while it plans, so any process can show it
(:meth:`explorer.planning.store.PlanStore.board_status`). Any process can set the row's cancel
flag (:meth:`JobBoard.cancel_job`); the job reads it at the same pace and between mechanisms,
and stops at its next checkpoint as after a local cancel.

A process that finds an unfinished job of another, living process on the board
(:func:`running_elsewhere`) follows it instead of planning the same workload a second time:
its pages show the job's progress from the board, and their Cancel sets the flag. A job whose
process is gone (killed: its pid no longer exists on this machine, or it has not written for
:data:`STALE_SECONDS` from another machine) is planned afresh.

A board that fails (an unwritable store) is logged once and then left alone: planning goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from typing import Any, Protocol

from engine import one_line

LOG = logging.getLogger("explorer.planning")
#: Seconds between two writes of a planning job's progress (and two reads of its cancel flag).
REPORT_SECONDS = 1.0
#: Seconds without a write after which a job of a process on another machine counts as gone.
STALE_SECONDS = 60.0
#: The states of a job that has not finished.
UNFINISHED = ("queued", "running", "cancelling")


class JobBoard(Protocol):
    """Where jobs' status rows live (see :class:`explorer.server.session_store.SessionStore`)."""

    def put_job(self, key: str, noise: str, *, state: str, total: int, done: int,
                current: str | None, message: str, process: str) -> None:
        """Write a job's status."""

    def job(self, key: str, noise: str) -> Any:
        """The job's status row (with ``state``, ``total``, ``done``, ``current``,
        ``message``, ``cancel``, ``process``), or None."""

    def cancel_job(self, key: str, noise: str) -> bool:
        """Set the cancel flag of an unfinished job; False when there is none."""


def process_name() -> str:
    """``host:pid`` of this process (after a fork: the child's own)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_alive(process: str) -> bool | None:
    """Whether the process ``host:pid`` is alive, when it ran on this machine (None: another
    machine's, which cannot be asked)."""
    host, _, pid = process.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def running_elsewhere(row: Any, now: dt.datetime | None = None) -> bool:
    """True when the board row ``row`` (see :meth:`JobBoard.job`; None: no job) is an
    unfinished job of another process that is still alive (this machine: its pid exists;
    another machine: it wrote less than :data:`STALE_SECONDS` ago)."""
    if row is None or row.state not in UNFINISHED or row.process == process_name():
        return False
    alive = process_alive(row.process)
    if alive is not None:
        return alive
    updated = getattr(row, "updated", None)
    if updated is None:
        return False
    now = now or dt.datetime.now(dt.UTC)
    return (now - updated).total_seconds() < STALE_SECONDS


class BoardReport:
    """One job's writes to the board (throttled) and reads of its cancel flag."""

    def __init__(self, board: JobBoard, key: str, noise: str,
                 every: float = REPORT_SECONDS) -> None:
        self.board, self.key, self.noise, self.every = board, key, noise, every
        self._lock = threading.Lock()
        self._written = -every
        self._read = -every
        self._broken = False

    def _safely(self, call: Any) -> Any:
        if self._broken:
            return None
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - the board must never stop planning
            self._broken = True
            LOG.warning("planning board %s/%s: %s; its progress is shown in this process only",
                        self.key, self.noise, one_line(exc))
            return None

    def write(self, state: str, total: int, done: int, current: str | None, message: str,
              force: bool = False) -> None:
        """Write the job's status (unless written less than ``every`` seconds ago and not
        ``force``d: a change of state is always written)."""
        now = time.monotonic()
        with self._lock:
            if not force and now - self._written < self.every:
                return
            self._written = now
        self._safely(lambda: self.board.put_job(
            self.key, self.noise, state=state, total=total, done=done, current=current,
            message=message, process=process_name()))

    def cancel_requested(self, force: bool = False) -> bool:
        """True when some process set the job's cancel flag (read at most every ``every``
        seconds unless ``force``d)."""
        now = time.monotonic()
        with self._lock:
            if not force and now - self._read < self.every:
                return False
            self._read = now
        row = self._safely(lambda: self.board.job(self.key, self.noise))
        return bool(row is not None and row.cancel and row.process == process_name())
