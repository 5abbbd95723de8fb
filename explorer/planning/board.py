"""Planning jobs on a shared board: their status and a cancel flag, seen by every process.

A job runs in the serving process that started it; its status row (state, mechanisms done of
how many, the running one, the last message) is written to a :class:`JobBoard` (the explorer's
shared store, :class:`explorer.server.session_store.SessionStore`) whenever its state changes
and at most every :data:`REPORT_SECONDS` while it plans, so any process can show it
(:meth:`explorer.planning.store.PlanStore.board_status`). Any process can set the row's cancel
flag (:meth:`JobBoard.cancel_job`); the job reads it at the same pace and between mechanisms,
and stops at its next checkpoint as after a local cancel.

A board that fails (an unwritable store) is logged once and then left alone: planning goes on.
"""

from __future__ import annotations

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
