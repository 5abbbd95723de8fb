"""Writing sessions to the shared store and reading them back, for a :class:`~explorer.server.
sessions.SessionRegistry`.

Every change a page makes to a session (its scenario, draft, privacy level, mechanisms, the
selected mechanism, its upload) marks it dirty; a writer thread saves dirty sessions at most
every ``debounce`` seconds (a slider drag writes once, not once per step). A fresh session is
written without waiting: its id is in the page being built, and the next page may land in
another process, which finds only what the store has. The process
remembers the version it last wrote or read of each session, so the registry can tell that
another process has changed a session it holds (:meth:`SessionPersistence.stale`).

A store that cannot be opened or written (a read-only or full data directory, an unreachable
database) never stops the server: the problem is logged once (one line), kept in
:attr:`SessionPersistence.error` for the page to show, and the sessions go on in memory; the
next successful write clears it.

It is also the planning board of the process's plan store (:mod:`explorer.planning.board`):
jobs' status rows and cancel flags go to the same store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from engine import one_line
from explorer.server.session_store import JobRow, SessionStore, StoreError
from explorer.server.uploads import UploadFiles
from explorer.session import Session
from explorer.session.model import Upload

LOG = logging.getLogger("explorer.sessions")
#: Seconds between a change and its write (changes in between are written together).
DEBOUNCE_SECONDS = 0.25
#: Seconds before a store that failed to open is tried again.
RETRY_SECONDS = 10.0


class SessionPersistence:
    """The shared store of a registry's sessions (module docstring).

    Args:
        open_store: opens the store (called on first use, so a forked server process opens
            its own connections).
        uploads: where uploaded files are kept by content.
        factory: makes a session from a spec (as the registry's).
        debounce: seconds between a change and its write.
    """

    def __init__(
        self,
        open_store: Callable[[], SessionStore],
        uploads: UploadFiles | None = None,
        factory: Callable[[dict[str, Any] | None], Session] = Session,
        debounce: float = DEBOUNCE_SECONDS,
    ) -> None:
        self._open_store = open_store
        self.uploads = uploads or UploadFiles()
        self._factory = factory
        self.debounce = debounce
        self.error = ""  #: the last problem with the store, one line ('' when writes work)
        self._store: SessionStore | None = None
        self._failed_at = -RETRY_SECONDS
        self._lock = threading.Lock()
        self._saving = threading.Lock()  # one write at a time (writer thread, flush, forget)
        self._dirty: dict[str, tuple[str | None, Session]] = {}
        self._versions: dict[str, int] = {}
        self._wake = threading.Condition(self._lock)
        self._at_once = False  # a change waiting that must not wait for the debounce
        self._writer: threading.Thread | None = None

    # ----- the store --------------------------------------------------------------------
    def store(self) -> SessionStore | None:
        """The store, opened on first use (None while it cannot be opened)."""
        with self._lock:
            if self._store is not None:
                return self._store
            if time.monotonic() - self._failed_at < RETRY_SECONDS:
                return None
        try:
            store = self._open_store()
        except StoreError as exc:
            with self._lock:
                self._failed_at = time.monotonic()
            self._failed(str(exc))
            return None
        with self._lock:
            if self._store is None:
                self._store = store
            return self._store

    def _failed(self, message: str) -> None:
        line = f"{message}; sessions are kept in this process only until it works again"
        if line != self.error:
            LOG.warning("%s", line)
        self.error = line

    def _call(self, what: Callable[[SessionStore], Any]) -> Any:
        """``what(store)``, or None (logged, in :attr:`error`) when the store fails."""
        store = self.store()
        if store is None:
            return None
        try:
            return what(store)
        except StoreError as exc:
            self._failed(str(exc))
        except OSError as exc:
            self._failed(one_line(exc))
        return None

    # ----- reading ----------------------------------------------------------------------
    def load(self, sid: str, owner: str | None) -> Session | None:
        """Session ``sid`` of ``owner`` from the store (None: unknown, someone else's, or the
        store is unavailable)."""
        row = self._call(lambda store: store.load(sid, owner))
        if row is None:
            return None
        ref = row.state.get("upload") or {}
        content = self.uploads.get(str(ref.get("sha256", ""))) if ref else None
        upload = Upload(str(ref.get("name", "data.csv")), content) if content else None
        try:
            session = Session.restored(row.state, upload, factory=self._factory)
        except Exception as exc:  # a state this version cannot rebuild: a fresh session
            LOG.warning("session %s: its stored state cannot be restored: %s", sid,
                        one_line(exc))
            return None
        with self._lock:
            self._versions[sid] = row.version
        return session

    def stale(self, sid: str) -> bool:
        """True when another process wrote ``sid`` after this process last wrote or read it
        (and this process has no change of its own waiting to be written)."""
        with self._lock:
            if sid in self._dirty:
                return False
            known = self._versions.get(sid)
        version = self._call(lambda store: store.version(sid))
        return version is not None and known is not None and version > known

    def shared(self, token: str) -> dict[str, Any] | None:
        """A read-only link's scenario (None for unknown tokens)."""
        return self._call(lambda store: store.shared(token)) if token else None

    # ----- writing ----------------------------------------------------------------------
    def watch(self, sid: str, owner: str | None, session: Session, fresh: bool) -> None:
        """Write ``session`` after each of its changes (debounced), and at once when it is
        ``fresh`` (a session loaded from the store is not written back unchanged: that could
        put an older state over a change another process is about to write).

        At once is on the writer thread, without the debounce: the page that made the
        session is still being built when it is written (a write may wait for the other
        processes' writes, which a page build must not). Debounced, an analyst's program
        that opened the trade-off page, moved eps five times and opened Compare within
        0.25 s found, in the other process, no session of that id and was given a new one
        (1 in 6 runs of ``benchmarks/protocol_load.py --analysts 24 --procs 2``)."""
        session.on_change(lambda: self.changed(sid, owner, session))
        if fresh:
            self.changed(sid, owner, session, at_once=True)

    def changed(self, sid: str, owner: str | None, session: Session,
                at_once: bool = False) -> None:
        """``session`` changed: write it within ``debounce`` seconds (``at_once``: now)."""
        with self._lock:
            self._dirty[sid] = (owner, session)
            self._at_once = self._at_once or at_once
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_forever, name="explorer-session-writer", daemon=True
                )
                self._writer.start()
            self._wake.notify()

    def _write_forever(self) -> None:
        while True:
            with self._lock:
                while not self._dirty:
                    self._wake.wait()
                due = time.monotonic() + self.debounce
                while not self._at_once and (left := due - time.monotonic()) > 0:
                    self._wake.wait(left)
                self._at_once = False
            self.flush()

    def flush(self) -> None:
        """Write every changed session now."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        for sid, (owner, session) in dirty.items():
            self.save(sid, owner, session)

    def save(self, sid: str, owner: str | None, session: Session) -> int | None:
        """Write ``session`` (and its upload's file) now; returns the version written (None
        when the store failed: logged, in :attr:`error`)."""
        with self._saving:
            try:
                state = session.snapshot()
                if session.upload is not None:
                    self.uploads.put(session.upload.content)
            except OSError as exc:
                self._failed(f"uploads: cannot write {str(self.uploads.directory)!r}: "
                             f"{exc.strerror or one_line(exc)}")
                return None
            version = self._call(lambda store: store.save(sid, owner, state))
            if version is not None:
                with self._lock:
                    self._versions[sid] = version
                self.error = ""
            return version

    def share(self, token: str, spec: dict[str, Any]) -> None:
        """Keep a read-only link's scenario for every process."""
        self._call(lambda store: store.put_shared(token, spec))

    def keep(self, sids: list[str], idle_seconds: float) -> None:
        """Mark ``sids`` (sessions with a tab in this process) as in use, and forget stored
        sessions idle for longer than ``idle_seconds``."""
        self._call(lambda store: (store.touch(sids), store.forget_idle(idle_seconds)))

    # ----- the planning board (explorer.planning.board.JobBoard) -------------------------
    def _board_store(self) -> SessionStore:
        store = self.store()
        if store is None:
            raise StoreError(self.error or "session store: not available")
        return store

    def put_job(self, key: str, noise: str, *, state: str, total: int, done: int,
                current: str | None, message: str, process: str) -> None:
        """Write a planning job's status to the store (for every process to see)."""
        self._board_store().put_job(key, noise, state=state, total=total, done=done,
                                    current=current, message=message, process=process)

    def job(self, key: str, noise: str) -> JobRow | None:
        """A planning job's status row in the store."""
        return self._board_store().job(key, noise)

    def cancel_job(self, key: str, noise: str) -> bool:
        """Set a planning job's cancel flag in the store (any process)."""
        return self._board_store().cancel_job(key, noise)

    def forget(self, sid: str) -> None:
        """Stop tracking ``sid`` in this process (it left its memory; the store keeps it,
        with a change still waiting written first)."""
        with self._lock:
            self._versions.pop(sid, None)
            waiting = self._dirty.pop(sid, None)
        if waiting is not None:
            self.save(sid, *waiting)
