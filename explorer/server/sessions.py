"""Which :class:`~explorer.session.Session` a browser gets: server-issued ids, expiry, sharing.

Session ids are made by the server (``secrets.token_urlsafe``, 128 bits) and carried in the
page URL (``?s=...``) so the pages of one user share their work. An id the server did not
issue, or one issued to another signed-in user, gets a fresh session with a new id: nobody
can choose or guess their way into someone else's session. The one way to share work on
purpose is :meth:`SessionRegistry.share`, a read-only link that opens a copy of the scenario
as it was when the link was made.

With a :class:`~explorer.server.persistence.SessionPersistence` (the served app's
:data:`REGISTRY` has one), sessions live in the shared store as well (see
:mod:`explorer.server.session_store`): a process that does not hold a session in memory loads
it from there, one that holds an older version than the store's (another process changed it)
reloads it, and every change is written back. The owner check holds across processes: the
store returns a session only to the user it was issued to.

A session counts the browser tabs showing it. It is never dropped while a tab is connected;
once its last tab closes it stops waiting for planning (a job nobody else waits for is
cancelled) and it expires after ``idle_seconds`` without a tab.

A session outlives the pages that show it, and a page binds its panes and widgets to the
session's parameters (``pn.bind``, ``from_param``), which puts watchers on the session. Those
watchers hold the page, its Bokeh models and data (about 3 MB for the trade-off page) and
keep recomputing it on every slider move, long after its tab closed. :func:`watchers_added`
records what a page put on the session while it was built, and :meth:`SessionRegistry.
tab_closed` removes it when the tab closes.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import secrets
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import param

from explorer.server.persistence import SessionPersistence
from explorer.server.session_store import SessionStore
from explorer.session import Session

#: How long a session without any connected tab is kept (seconds).
IDLE_SECONDS = 30 * 60
#: Read-only links kept at most (the oldest are forgotten first).
MAX_SHARED = 1_000


def new_id() -> str:
    """An unguessable id (22 URL-safe characters, 128 random bits)."""
    return secrets.token_urlsafe(16)


#: A watcher and the object it watches.
Watching = tuple[param.Parameterized, param.parameterized.Watcher]


def _watchers(owner: param.Parameterized) -> list[param.parameterized.Watcher]:
    return [
        watcher
        for by_kind in owner.param.watchers.values()
        for watchers in by_kind.values()
        for watcher in watchers
    ]


@contextlib.contextmanager
def watchers_added(*owners: param.Parameterized) -> Iterator[list[Watching]]:
    """The watchers put on ``owners`` while the block runs (the list is filled when it ends).

    A page is built on the server's event loop, one at a time, so what appears on the
    session during its build is the page's own.
    """
    before = {id(w) for owner in owners for w in _watchers(owner)}
    added: list[Watching] = []
    try:
        yield added
    finally:
        added.extend(
            (owner, w) for owner in owners for w in _watchers(owner) if id(w) not in before
        )


def unwatch(watching: Sequence[Watching]) -> None:
    """Remove the watchers (removing one that is gone already does nothing)."""
    for owner, watcher in watching:
        owner.param.unwatch(watcher)


@dataclasses.dataclass
class _Held:
    session: Session
    owner: str | None
    tabs: int = 0
    last_seen: float = 0.0


class SessionRegistry:
    """Sessions by id, with their tab counts and read-only links.

    Args:
        idle_seconds: how long a session with no connected tab is kept.
        factory: makes a session from a spec (None: the default scenario).
        clock: seconds on a monotonic clock (tests pass their own).
        persistence: the shared store of the sessions (None: this process's memory only).
    """

    def __init__(
        self,
        idle_seconds: float = IDLE_SECONDS,
        factory: Callable[[dict[str, Any] | None], Session] = Session,
        clock: Callable[[], float] = time.monotonic,
        persistence: SessionPersistence | None = None,
    ) -> None:
        self.idle_seconds = idle_seconds
        self.persistence = persistence
        self._factory = factory
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._owners: weakref.WeakKeyDictionary[Session, str] = weakref.WeakKeyDictionary()
        self._shared: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def open(
        self, sid: str | None, user: str | None = None, shared: str | None = None
    ) -> tuple[str, Session]:
        """The session ``sid`` of ``user``, or a fresh one with a new id.

        A fresh session starts from the read-only link ``shared`` when it names one. With a
        store, a session this process does not hold (or holds in an older version than
        another process wrote) is loaded from it.
        """
        self.expire()
        with self._lock:
            held = self._held.get(sid or "")
            if held is not None and held.owner == user:
                held.last_seen = self._clock()
        if sid and (held is None or held.owner == user):
            stale = held is not None and self.persistence is not None and \
                self.persistence.stale(sid)
            if held is not None and not stale:
                return sid, held.session
            loaded = self.persistence.load(sid, user) if self.persistence is not None else None
            if loaded is not None:
                self._hold(sid, user, loaded, tabs=held.tabs if held is not None else 0,
                           fresh=False)
                return sid, loaded
            if held is not None:
                return sid, held.session
        with self._lock:
            spec = copy.deepcopy(self._shared.get(shared or ""))
        if spec is None and shared and self.persistence is not None:
            spec = self.persistence.shared(shared)
        session = self._factory(spec)
        sid = new_id()
        self._hold(sid, user, session)
        return sid, session

    def _hold(
        self, sid: str, user: str | None, session: Session, tabs: int = 0, fresh: bool = True
    ) -> None:
        """Keep ``session`` as ``sid`` in this process (and write its changes to the store;
        a ``fresh`` one at once)."""
        with self._lock:
            self._held[sid] = _Held(session, user, tabs=tabs, last_seen=self._clock())
            if user is not None:
                self._owners[session] = user
        if self.persistence is not None:
            self.persistence.watch(sid, user, session, fresh)

    def owner_of(self, subscriber: Hashable) -> Hashable:
        """The signed-in user of a session, for the plan store's limit on jobs per user (a
        session without sign-in is its own user)."""
        with self._lock:
            try:
                return self._owners.get(subscriber, subscriber)  # type: ignore[arg-type]
            except TypeError:  # not a session
                return subscriber

    def flush(self) -> None:
        """Write every changed session to the store now (no store: nothing)."""
        if self.persistence is not None:
            self.persistence.flush()

    @property
    def store_error(self) -> str:
        """The store's last problem, one line ('' when it works or there is none)."""
        return self.persistence.error if self.persistence is not None else ""

    def connect(self, sid: str) -> None:
        """A browser tab now shows session ``sid``."""
        with self._lock:
            held = self._held.get(sid)
            if held is not None:
                held.tabs += 1
                held.last_seen = self._clock()

    def disconnect(self, sid: str) -> None:
        """A tab of ``sid`` closed; the last one to close ends the session's planning wait."""
        with self._lock:
            held = self._held.get(sid)
            if held is None:
                return
            held.tabs = max(held.tabs - 1, 0)
            held.last_seen = self._clock()
            last = held.tabs == 0
        if last:
            held.session.release()

    def tab_closed(self, sid: str, page: Sequence[Watching] = ()) -> Callable[[Any], None]:
        """A ``pn.state.on_session_destroyed`` callback that disconnects one tab of ``sid``
        and removes the watchers its ``page`` put on the session (see
        :func:`watchers_added`).

        Served scripts lose their module globals when their document is destroyed, so the
        callback must not look anything up in the script.
        """

        def closed(session_context: Any) -> None:
            unwatch(page)
            self.disconnect(sid)

        return closed

    def tabs(self, sid: str) -> int:
        """How many browser tabs show ``sid`` right now (0 for unknown ids)."""
        with self._lock:
            held = self._held.get(sid)
            return held.tabs if held is not None else 0

    def expire(self) -> list[str]:
        """Drop sessions without a tab for longer than ``idle_seconds``; return their ids."""
        now = self._clock()
        with self._lock:
            gone = [
                sid
                for sid, held in self._held.items()
                if held.tabs == 0 and now - held.last_seen > self.idle_seconds
            ]
            dropped = [self._held.pop(sid) for sid in gone]
        for sid, held in zip(gone, dropped, strict=True):
            held.session.release()
            if self.persistence is not None:
                self.persistence.forget(sid)
        return gone

    def keep_alive(self) -> None:
        """Mark the sessions with a tab in this process as in use in the store, and forget
        stored sessions idle for longer than ``idle_seconds`` (the expiry sweep calls it)."""
        if self.persistence is None:
            return
        with self._lock:
            shown = [sid for sid, held in self._held.items() if held.tabs]
        self.persistence.keep(shown, self.idle_seconds)

    def share(self, sid: str) -> str:
        """A token for a read-only link to ``sid``'s scenario as it is now.

        Opening the link starts a new session from a copy: the sharer's session is never
        reachable through it.
        """
        with self._lock:
            held = self._held.get(sid)
        if held is None:
            raise KeyError(f"session: {sid!r} is not an open session")
        token = new_id()
        spec = held.session.export_spec()
        with self._lock:
            self._shared[token] = spec
            while len(self._shared) > MAX_SHARED:
                self._shared.popitem(last=False)
        if self.persistence is not None:
            self.persistence.share(token, spec)
        return token


def idle_seconds_from_environment() -> float:
    """``EXPLORER_SESSION_IDLE_SECONDS``: how long a session without a tab is kept (seconds,
    default :data:`IDLE_SECONDS`)."""
    text = os.environ.get("EXPLORER_SESSION_IDLE_SECONDS", "").strip()
    if not text:
        return IDLE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SystemExit(
            f"EXPLORER_SESSION_IDLE_SECONDS: {text!r} is not a number of seconds (allowed: "
            "more than 0)"
        )
    return value


#: The sessions of this server process, kept in the shared store (``$DPWB_SESSION_URL``,
#: default the ledger's database) so any serving process can serve any of them.
REGISTRY = SessionRegistry(
    idle_seconds=idle_seconds_from_environment(), persistence=SessionPersistence(SessionStore)
)
