"""The explorer's shared store: session state, read-only links and planning-job status rows.

Every serving process (``panel serve --num-procs N``, or N machines behind a balancer) opens
the same store, so a session's next page may land in any process: the process that does not
hold the session in memory loads it from here (see :class:`explorer.server.sessions.
SessionRegistry`). The store is any SQLAlchemy URL: ``$DPWB_SESSION_URL``, default the
ledger's database (``$DPWB_LEDGER_URL``, else ``ledger.sqlite`` in ``$DPWB_DATA_DIR``).

Its schema is a small Alembic history of its own (``explorer/server/migrations``), recorded in
its own version table (:data:`VERSION_TABLE`): the engine's ledger knows nothing of the
explorer (engine never imports explorer), and the two schemas upgrade independently in one
database.

A session's row holds its owner (the signed-in user, NULL without sign-in): :meth:`SessionStore.
load` returns it only to that owner. Rows carry a version that every write increments, so a
process can tell that another process changed a session it holds.

Database problems raise :class:`StoreError` with one line; the registry logs them and keeps
serving from memory.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from engine import database_message, default_url, sqlite_file, sqlite_transactions, upgrade_schema

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: Alembic's version table of this schema (the ledger keeps ``alembic_version``).
VERSION_TABLE = "explorer_alembic_version"
URL_ENV = "DPWB_SESSION_URL"

METADATA = sa.MetaData()
sessions = sa.Table(
    "explorer_sessions",
    METADATA,
    sa.Column("sid", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("state", sa.JSON, nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
)
shared = sa.Table(
    "explorer_shared",
    METADATA,
    sa.Column("token", sa.String(64), primary_key=True),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
)
jobs = sa.Table(
    "explorer_jobs",
    METADATA,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("noise", sa.String(20), primary_key=True),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("done", sa.Integer, nullable=False),
    sa.Column("current", sa.String(100), nullable=True),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("cancel", sa.Boolean, nullable=False),
    sa.Column("process", sa.String(100), nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
)


class StoreError(RuntimeError):
    """The session store cannot be opened, read or written (one line naming the database)."""


def session_url() -> str:
    """``$DPWB_SESSION_URL``, default the ledger's database (:func:`engine.ledger.default_url`)."""
    return os.environ.get(URL_ENV) or default_url()


@dataclass(frozen=True)
class StoredSession:
    """One session's row: its state (see ``Session.snapshot``) and the version written last."""

    sid: str
    owner: str | None
    version: int
    state: dict[str, Any]


@dataclass(frozen=True)
class JobRow:
    """A planning job's status as the process that runs it last wrote it."""

    key: str
    noise: str
    state: str
    total: int
    done: int
    current: str | None
    message: str
    cancel: bool
    process: str
    updated: dt.datetime | None = None  # when it was last written (UTC)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SessionStore:
    """The shared store at a SQLAlchemy URL (module docstring).

    Args:
        url: a SQLAlchemy URL; None uses :func:`session_url`.
        timeout: seconds a SQLite connection waits for another writer's lock.

    Raises:
        StoreError: the database cannot be opened or upgraded (one line).
    """

    def __init__(self, url: str | None = None, *, timeout: float = 10.0) -> None:
        self.url = url or session_url()
        try:
            path = sqlite_file(self.url)
            if path is not None and not str(path).startswith("file:"):  # not a SQLite URI
                path.parent.mkdir(parents=True, exist_ok=True)
            if self.url.startswith("sqlite"):
                self.engine = sa.create_engine(self.url, connect_args={"timeout": timeout})
                sqlite_transactions(self.engine, write_lock_always=False)
            else:
                self.engine = sa.create_engine(self.url, pool_pre_ping=True)
        except (SQLAlchemyError, ImportError, OSError) as exc:
            raise StoreError(
                f"session store: cannot open {self.url!r} ({database_message(exc)})"
            ) from None
        with self._guard("open"):
            self._upgrade()

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except IntegrityError:
            raise
        except (SQLAlchemyError, OSError, ValueError, TypeError) as exc:
            where = sqlite_file(self.url) or self.engine.url.render_as_string(hide_password=True)
            raise StoreError(f"session store: cannot {what} {str(where)!r}: "
                             f"{database_message(exc)}") from None

    @contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """A write transaction that holds SQLite's write lock from its start (``BEGIN
        IMMEDIATE``; other databases: a plain transaction). A deferred one that reads first
        (a row's version) and then writes can be refused at once with "database is locked"
        when another process's writer is waiting on its read lock -- SQLite's way out of the
        deadlock, which skips the busy timeout; an immediate one waits its turn instead."""
        with self.engine.connect().execution_options(write_lock=True) as conn, conn.begin():
            yield conn

    def _upgrade(self) -> None:
        upgrade_schema(self.engine, MIGRATIONS, version_table=VERSION_TABLE)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # ------------------------------------------------------------------------- sessions
    def load(self, sid: str, owner: str | None) -> StoredSession | None:
        """Session ``sid`` when it belongs to ``owner`` (None: unknown, or someone else's)."""
        with self._guard("read"), self.engine.connect() as conn:
            row = conn.execute(sa.select(sessions).where(sessions.c.sid == sid)).first()
        if row is None or row.owner != owner:
            return None
        return StoredSession(row.sid, row.owner, row.version, dict(row.state))

    def version(self, sid: str) -> int | None:
        """The version of ``sid``'s row (None when there is none)."""
        with self._guard("read"), self.engine.connect() as conn:
            return conn.execute(
                sa.select(sessions.c.version).where(sessions.c.sid == sid)
            ).scalar()

    def save(self, sid: str, owner: str | None, state: dict[str, Any]) -> int:
        """Write ``sid``'s state (a new row, or the next version of its owner's); returns the
        version written. A row of another owner is never overwritten.

        Raises:
            StoreError: the write failed, or ``sid`` belongs to another owner.
        """
        try:
            return self._save(sid, owner, state)
        except IntegrityError:  # another process wrote its first version meanwhile
            return self._save(sid, owner, state)

    def _save(self, sid: str, owner: str | None, state: dict[str, Any]) -> int:
        with self._guard("write to"), self._writing() as conn:
            row = conn.execute(
                sa.select(sessions.c.owner, sessions.c.version).where(sessions.c.sid == sid)
            ).first()
            if row is None:
                conn.execute(sessions.insert().values(
                    sid=sid, owner=owner, version=1, state=state, updated=_now()))
                return 1
            if row.owner != owner:
                raise StoreError(f"session: {sid!r} belongs to another user")
            version = row.version + 1
            conn.execute(sessions.update().where(sessions.c.sid == sid).values(
                version=version, state=state, updated=_now()))
            return version

    def touch(self, sids: list[str]) -> None:
        """Mark sessions as in use now (tabs show them), so :meth:`forget_idle` keeps them."""
        if sids:
            with self._guard("write to"), self._writing() as conn:
                conn.execute(sessions.update().where(sessions.c.sid.in_(sids)).values(
                    updated=_now()))

    def forget_idle(self, seconds: float) -> int:
        """Delete sessions neither written nor touched for ``seconds``; returns how many."""
        cutoff = _now() - dt.timedelta(seconds=seconds)
        with self._guard("write to"), self._writing() as conn:
            return conn.execute(sessions.delete().where(sessions.c.updated < cutoff)).rowcount

    # ----------------------------------------------------------------------- read-only links
    def put_shared(self, token: str, spec: dict[str, Any]) -> None:
        """Keep a read-only link's scenario."""
        with self._guard("write to"), self._writing() as conn:
            conn.execute(shared.insert().values(token=token, spec=spec, created=_now()))

    def shared(self, token: str) -> dict[str, Any] | None:
        """A read-only link's scenario (None for unknown tokens)."""
        with self._guard("read"), self.engine.connect() as conn:
            spec = conn.execute(sa.select(shared.c.spec).where(shared.c.token == token)).scalar()
        return None if spec is None else dict(spec)

    # --------------------------------------------------------------------- planning jobs
    def put_job(self, key: str, noise: str, *, state: str, total: int, done: int,
                current: str | None, message: str, process: str) -> None:
        """Write a planning job's status (a new job resets the cancel flag)."""
        values = {"state": state, "total": total, "done": done, "current": current,
                  "message": message[:2000], "process": process, "updated": _now()}
        where = (jobs.c.key == key) & (jobs.c.noise == noise)
        with self._guard("write to"), self._writing() as conn:
            row = conn.execute(sa.select(jobs.c.process, jobs.c.state).where(where)).first()
            if row is None:
                conn.execute(jobs.insert().values(key=key, noise=noise, cancel=False, **values))
                return
            fresh = row.process != process or row.state in ("done", "cancelled", "failed")
            if fresh and state in ("queued", "running"):
                values["cancel"] = False
            conn.execute(jobs.update().where(where).values(**values))

    def job(self, key: str, noise: str) -> JobRow | None:
        """The status row of the job planning ``key`` for ``noise`` (None: never planned)."""
        with self._guard("read"), self.engine.connect() as conn:
            row = conn.execute(
                sa.select(jobs).where((jobs.c.key == key) & (jobs.c.noise == noise))
            ).first()
        if row is None:
            return None
        updated = row.updated
        if updated is not None and updated.tzinfo is None:  # SQLite keeps no time zone
            updated = updated.replace(tzinfo=dt.UTC)
        return JobRow(row.key, row.noise, row.state, row.total, row.done, row.current,
                      row.message, bool(row.cancel), row.process, updated)

    def cancel_job(self, key: str, noise: str) -> bool:
        """Ask the job of ``key``/``noise``, in whichever process runs it, to stop at its next
        checkpoint; False when no unfinished job is recorded."""
        where = ((jobs.c.key == key) & (jobs.c.noise == noise)
                 & jobs.c.state.in_(("queued", "running", "cancelling")))
        with self._guard("write to"), self._writing() as conn:
            return conn.execute(jobs.update().where(where).values(cancel=True)).rowcount > 0
