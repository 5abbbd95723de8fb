"""The ledger in a database: data sets with a budget and every release charged to them.

:class:`Ledger` opens a SQLAlchemy URL (default: a SQLite file, :func:`default_url`), upgrades
its schema to the newest Alembic revision shipped in ``engine/ledger/migrations`` and offers:

* :meth:`Ledger.register` a data set (any name, SHA-256 fingerprint of its file, public domain,
  total budget in a unit of :data:`engine.ledger.composition.UNITS`, its owner: the signed-in
  user or :data:`ANONYMOUS`); :meth:`Ledger.archive` one (kept with its history, which is
  evidence; no new release);
* :meth:`Ledger.reserve` a release *before* its noise is drawn: the check against the budget
  and the write of the release row are one transaction, so two concurrent releases cannot both
  pass (SQLite: ``BEGIN IMMEDIATE`` takes the write lock before the read; other databases: the
  data set's row is read ``SELECT ... FOR UPDATE``). A refusal raises
  :class:`~engine.ledger.composition.BudgetExceeded` and writes nothing. The reserved row is
  ``released`` when the block finishes (with its record path), ``failed`` when the block raises
  (then nothing was published and it is not counted); a process killed in between leaves it
  ``reserved``, which counts (the conservative side);
* :meth:`Ledger.refusal` (why a cost would be refused, with what still fits; None when it
  fits: nothing is written, nothing printed);
* :meth:`Ledger.status` (spent and remaining, in the budget's unit, as rho and as eps at a chosen
  delta) and :meth:`Ledger.history`.

Use it as a context manager (``with Ledger(url) as ledger: ...``): the connection pool is
released on leaving the block.

Database problems (a corrupted file, a lock held past the timeout, an unreachable server) raise
:class:`~engine.ledger.composition.LedgerError` with one line.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from engine.ledger.composition import (
    Budget,
    BudgetExceeded,
    Cost,
    LedgerError,
    Spent,
    admits,
    composed,
    refusal,
)
from engine.ledger.schema import datasets, releases
from engine.privacy import DEFAULT_DELTA

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
DATA_DIR_ENV = "DPWB_DATA_DIR"
URL_ENV = "DPWB_LEDGER_URL"
LEDGER_FILE = "ledger.sqlite"
#: release statuses that count against the budget
COUNTED = ("reserved", "released")
#: the owner of a data set registered without sign-in
ANONYMOUS = "anonymous"


def data_dir() -> Path:
    """``$DPWB_DATA_DIR``, default ``~/.local/share/dpworkbench`` (not created here)."""
    text = os.environ.get(DATA_DIR_ENV)
    return Path(text).expanduser() if text else Path.home() / ".local/share/dpworkbench"


def default_url() -> str:
    """``$DPWB_LEDGER_URL``, default a SQLite file ``ledger.sqlite`` in :func:`data_dir`."""
    return os.environ.get(URL_ENV) or f"sqlite:///{data_dir() / LEDGER_FILE}"


def fingerprint_bytes(content: bytes) -> str:
    """The SHA-256 (hex) of a data file's bytes: the data set's identity in the ledger."""
    return hashlib.sha256(content).hexdigest()


def fingerprint_file(path: str | os.PathLike[str]) -> str:
    """:func:`fingerprint_bytes` of a file, read in blocks.

    Raises:
        LedgerError: the file cannot be read (one line).
    """
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise LedgerError(f"data: cannot read {str(path)!r} ({exc.strerror})") from None
    return digest.hexdigest()


def sqlite_file(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL (None for other databases and in-memory SQLite)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@dataclass(frozen=True)
class DatasetEntry:
    """A registered data set (one row of ``datasets``)."""

    id: int
    name: str
    fingerprint: str
    budget: Budget
    domain: Any
    created: dt.datetime
    created_by: str | None
    owner: str = ANONYMOUS
    #: when the data set was archived (None: open for releases)
    archived: dt.datetime | None = None


@dataclass(frozen=True)
class ReleaseEntry:
    """A release charged to a data set (one row of ``releases``)."""

    id: int
    dataset: str
    status: str
    mechanism: str
    cost: Cost
    time: dt.datetime
    user: str | None
    record_path: str | None
    knobs: Any = None
    workload_sha256: str | None = None
    privacy: Any = None
    rounds: Any = None


@dataclass
class Reservation:
    """A release reserved by :meth:`Ledger.reserve`: set ``record_path`` / ``rounds`` inside the
    block; they are written when it completes."""

    id: int
    dataset: DatasetEntry
    spent_before: Spent
    spent_after: Spent
    record_path: str | None = None
    rounds: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BudgetStatus:
    """Spent and remaining budget of a data set (:meth:`Ledger.status`)."""

    dataset: DatasetEntry
    spent: Spent
    releases: int
    at_delta: float

    def as_json(self) -> dict[str, Any]:
        """The status as JSON values (the CLI's ``budget show --json``)."""
        b = self.dataset.budget
        return {"name": self.dataset.name, "fingerprint": self.dataset.fingerprint,
                "owner": self.dataset.owner, "archived": self.dataset.archived is not None,
                "unit": b.unit, "total": b.total, "budget_delta": b.delta,
                "spent": self.spent.spent, "remaining": self.spent.remaining,
                "remaining_rho": self.spent.remaining_rho,
                "remaining_epsilon": self.spent.remaining_epsilon(self.at_delta),
                "at_delta": self.at_delta if b.unit != "epsilon-delta" else b.delta,
                "releases": self.releases}

    def line(self) -> str:
        """``adult: spent 0.25 of rho=1 (25%); remaining rho=0.75, eps=... at delta=...``."""
        b, s = self.dataset.budget, self.spent
        share = 100.0 * min(s.spent / b.total, 1.0)
        delta = b.delta if b.unit == "epsilon-delta" else self.at_delta
        return (f"{self.dataset.name}: spent {s.spent:.6g} of {b.describe()} ({share:.1f}%) in "
                f"{self.releases} releases; remaining {s.remaining:.6g} = rho "
                f"{s.remaining_rho:.6g} = eps {s.remaining_epsilon(self.at_delta):.6g} at "
                f"delta={delta:.3g}")


def database_message(exc: BaseException) -> str:
    """The first line of a database error's own message (the driver's, not SQLAlchemy's
    wrapper with its SQL and parameters)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class Ledger:
    """The privacy budget ledger at a SQLAlchemy URL (module docstring).

    Args:
        url: a SQLAlchemy URL; None uses :func:`default_url` (a SQLite file, created with its
            directory on first use).
        timeout: seconds a SQLite connection waits for another writer's lock before failing.

    Raises:
        LedgerError: the database cannot be opened or upgraded (one line).
    """

    def __init__(self, url: str | None = None, *, timeout: float = 10.0) -> None:
        self.url = url or default_url()
        try:
            path = sqlite_file(self.url)
        except SQLAlchemyError as exc:
            raise LedgerError(f"ledger: bad database URL {self.url!r} "
                              f"({database_message(exc)})") from None
        self.is_sqlite = self.url.startswith("sqlite")
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(f"ledger: cannot create {str(path.parent)!r} "
                                  f"({exc.strerror})") from None
        try:
            if self.is_sqlite:
                self.engine = sa.create_engine(self.url, connect_args={"timeout": timeout})
                sqlite_transactions(self.engine, write_lock_always=True)
            else:
                self.engine = sa.create_engine(self.url, isolation_level="READ COMMITTED")
        except (SQLAlchemyError, ImportError) as exc:
            raise LedgerError(f"ledger: cannot open {self.url!r} "
                              f"({database_message(exc)})") from None
        with self._guard("open"):
            self._upgrade()

    # ------------------------------------------------------------------ database plumbing
    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Database errors as one-line LedgerErrors naming the database."""
        try:
            yield
        except LedgerError:
            raise
        except (SQLAlchemyError, DBAPIError, OSError, ValueError) as exc:
            where = sqlite_file(self.url) or self.engine.url.render_as_string(hide_password=True)
            raise LedgerError(f"ledger: cannot {what} {str(where)!r}: "
                              f"{database_message(exc)}") from None

    def _upgrade(self) -> None:
        """Bring the schema to the newest shipped Alembic revision (see :func:`upgrade_schema`)."""
        upgrade_schema(self.engine, MIGRATIONS)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- data sets
    def register(self, name: str, fingerprint: str, budget: Budget, *, domain: Any = None,
                 user: str | None = None) -> DatasetEntry:
        """Register a data set under any ``name`` with its total budget; ``user`` (the signed-in
        user; None: :data:`ANONYMOUS`) owns it.

        Raises:
            LedgerError: an empty name, or a name or fingerprint already registered.
        """
        name = str(name).strip()
        if not name:
            raise LedgerError("name: give the data set a name")
        row = {"name": name, "fingerprint": fingerprint, "domain": domain,
               "budget_unit": budget.unit, "budget_total": float(budget.total),
               "budget_delta": budget.delta, "created": dt.datetime.now(dt.UTC),
               "created_by": user, "owner": user or ANONYMOUS}
        with self._guard("register in"):
            try:
                with self.engine.begin() as conn:
                    clash = conn.execute(sa.select(datasets.c.name).where(
                        (datasets.c.name == name) | (datasets.c.fingerprint == fingerprint))
                    ).first()
                    if clash is not None:
                        raise LedgerError(f"name: the data set is already registered as "
                                          f"{clash.name!r}" if clash.name != name else
                                          f"name: {name!r} is already registered")
                    conn.execute(datasets.insert().values(**row))
            except IntegrityError:
                raise LedgerError(f"name: {name!r} (or this file) is already registered") from None
        entry = self.dataset(name)
        assert entry is not None
        return entry

    def dataset(self, key: str) -> DatasetEntry | None:
        """The data set with this name or fingerprint, or None."""
        with self._guard("read"), self.engine.connect() as conn:
            row = conn.execute(sa.select(datasets).where(
                (datasets.c.name == key) | (datasets.c.fingerprint == key))).first()
        return None if row is None else _dataset(row)

    def require(self, key: str) -> DatasetEntry:
        """:meth:`dataset`, or a one-line LedgerError listing the registered names."""
        entry = self.dataset(key)
        if entry is None:
            names = ", ".join(d.name for d in self.datasets()) or "none"
            raise LedgerError(f"dataset: {key!r} is not registered (registered: {names})")
        return entry

    def archive(self, key: str, *, user: str | None = None) -> DatasetEntry:
        """Archive a data set: it stays with its history (evidence of what was released) and
        takes no new release. Only its owner may archive it (anyone, if it is anonymous).

        Raises:
            LedgerError: an unknown data set, or a user who is not its owner.
        """
        entry = self.require(key)
        if entry.owner not in (ANONYMOUS, user):
            raise LedgerError(f"archive: {entry.name!r} belongs to {entry.owner}; only its "
                              f"owner can archive it")
        if entry.archived is None:
            with self._guard("write to"), self.engine.begin() as conn:
                conn.execute(datasets.update().where(datasets.c.id == entry.id).values(
                    archived=dt.datetime.now(dt.UTC)))
        archived = self.dataset(entry.name)
        assert archived is not None
        return archived

    def datasets(self) -> list[DatasetEntry]:
        """Every registered data set, by name."""
        with self._guard("read"), self.engine.connect() as conn:
            rows = conn.execute(sa.select(datasets).order_by(datasets.c.name)).all()
        return [_dataset(r) for r in rows]

    # -------------------------------------------------------------------------- releases
    def history(self, key: str, *, all_statuses: bool = False) -> list[ReleaseEntry]:
        """The releases charged to a data set, oldest first (``failed`` ones only with
        ``all_statuses``)."""
        entry = self.require(key)
        query = sa.select(releases).where(releases.c.dataset_id == entry.id)
        if not all_statuses:
            query = query.where(releases.c.status.in_(COUNTED))
        with self._guard("read"), self.engine.connect() as conn:
            rows = conn.execute(query.order_by(releases.c.id)).all()
        return [_release(r, entry.name) for r in rows]

    def status(self, key: str, at_delta: float = 1e-6) -> BudgetStatus:
        """Spent and remaining budget of a data set (remaining also as eps at ``at_delta``)."""
        entry = self.require(key)
        history = self.history(entry.name)
        return BudgetStatus(entry, composed(entry.budget, [r.cost for r in history]),
                            len(history), at_delta)

    def refusal(self, key: str, cost: Cost, at_delta: float | None = None) -> str | None:
        """Why ``cost`` would be refused now (the one line :meth:`reserve` would raise, with
        what still fits, as eps at ``at_delta`` too), or None when it fits. Writes nothing.

        Raises:
            LedgerError: an unknown data set, a unit mismatch or a database problem.
        """
        entry = self.require(key)
        if entry.archived is not None:
            return _archived(entry)
        before, after, fits = admits(entry.budget, [r.cost for r in self.history(entry.name)],
                                     cost)
        return None if fits else refusal(entry.name, entry.budget, before, after, cost,
                                         _at_delta(cost, at_delta))

    @contextmanager
    def reserve(self, key: str, cost: Cost, *, mechanism: str, knobs: Any = None,
                workload_sha256: str | None = None, privacy: Any = None,
                user: str | None = None, at_delta: float | None = None
                ) -> Iterator[Reservation]:
        """Charge ``cost`` to a data set before the release's noise is drawn.

        Use as ``with ledger.reserve(...) as r: ...release...; r.record_path = path``. A
        refusal states what still fits (as eps at ``at_delta``; default: the cost's delta,
        else :data:`engine.privacy.DEFAULT_DELTA`).

        Raises:
            BudgetExceeded: the cost does not fit what is left (nothing is written).
            LedgerError: an unknown or archived data set, a unit mismatch or a database
                problem.
        """
        entry = self.require(key)
        if entry.archived is not None:
            raise LedgerError(_archived(entry))
        with self._guard("write to"), self.engine.begin() as conn:
            locked = conn.execute(lock_dataset_row(entry.id)).first()
            if locked is None:
                raise LedgerError(f"dataset: {key!r} was removed")
            rows = conn.execute(sa.select(releases).where(
                (releases.c.dataset_id == entry.id) & releases.c.status.in_(COUNTED))).all()
            before, after, fits = admits(entry.budget, [_cost(r) for r in rows], cost)
            if not fits:
                raise BudgetExceeded(refusal(entry.name, entry.budget, before, after, cost,
                                             _at_delta(cost, at_delta)))
            new_id = conn.execute(releases.insert().values(
                dataset_id=entry.id, status="reserved", mechanism=mechanism, knobs=knobs,
                workload_sha256=workload_sha256, privacy=privacy, cost_kind=cost.kind,
                rho=cost.rho, epsilon=cost.epsilon, delta=cost.delta,
                time=dt.datetime.now(dt.UTC), user=user)).inserted_primary_key[0]
        reservation = Reservation(int(new_id), entry, before, after)
        try:
            yield reservation
        except BaseException:
            self._settle(reservation, "failed")
            raise
        self._settle(reservation, "released")

    def _settle(self, reservation: Reservation, status: str) -> None:
        with self._guard("write to"), self.engine.begin() as conn:
            conn.execute(releases.update().where(releases.c.id == reservation.id).values(
                status=status, record_path=reservation.record_path,
                rounds=reservation.rounds))


def _archived(entry: DatasetEntry) -> str:
    return (f"dataset: {entry.name!r} is archived (its history is kept as evidence; it takes "
            f"no new release)")


def _at_delta(cost: Cost, at_delta: float | None) -> float:
    """The delta a refusal states the remaining budget at."""
    if at_delta is not None:
        return float(at_delta)
    return cost.delta if 0 < cost.delta < 1 else DEFAULT_DELTA


def lock_dataset_row(dataset_id: int) -> sa.Select:
    """``SELECT id FROM datasets WHERE id = ? FOR UPDATE``: on server databases the row lock
    serialises the releases of one data set (SQLite has no row locks and renders no FOR UPDATE:
    there ``BEGIN IMMEDIATE`` serialises every writer)."""
    return sa.select(datasets.c.id).where(datasets.c.id == dataset_id).with_for_update()


#: Alembic's command API keeps its context in module globals: one upgrade at a time per process.
_UPGRADING = threading.Lock()


def sqlite_transactions(engine: sa.Engine, *, write_lock_always: bool) -> None:
    """Let SQLAlchemy, not pysqlite, begin an SQLite engine's transactions, so DDL is
    transactional and a transaction can take the write lock at its start.

    pysqlite begins a transaction only before a data change, so a migration's ``CREATE TABLE``
    runs outside any transaction and two processes opening a new database both create it. With
    these listeners every transaction starts with ``BEGIN``, or ``BEGIN IMMEDIATE`` (the write
    lock, taken before the first read) when ``write_lock_always`` is set or the connection has
    the execution option ``write_lock=True``. Other databases are left alone.
    """
    if engine.dialect.name != "sqlite":
        return

    def manual(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    def begin(conn: sa.Connection) -> None:
        immediate = write_lock_always or conn.get_execution_options().get("write_lock", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    sa.event.listen(engine, "connect", manual)
    sa.event.listen(engine, "begin", begin)


def upgrade_schema(engine: sa.Engine, script_location: Path, *,
                   version_table: str = "alembic_version") -> None:
    """Bring the schema of the Alembic history at ``script_location`` to its newest revision,
    in one transaction that one process at a time runs.

    Several serving processes may open a new database at the same moment; each checks the
    version table and would create the same tables. The upgrade therefore holds the database's
    write lock (SQLite: ``BEGIN IMMEDIATE``, which needs :func:`sqlite_transactions` on the
    engine; PostgreSQL: a transaction-scoped advisory lock keyed by ``version_table``): the
    second process waits, then finds the schema current. ``script_location``'s ``env.py`` runs
    on ``config.attributes["connection"]`` and reads ``config.attributes["version_table"]``.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.attributes["version_table"] = version_table
    with _UPGRADING, engine.connect() as conn:
        conn.execution_options(write_lock=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": zlib.crc32(version_table.encode())})
            config.attributes["connection"] = conn
            command.upgrade(config, "head")


def _dataset(row: Any) -> DatasetEntry:
    return DatasetEntry(row.id, row.name, row.fingerprint,
                        Budget(row.budget_unit, row.budget_total, row.budget_delta),
                        row.domain, row.created, row.created_by, row.owner, row.archived)


def _cost(row: Any) -> Cost:
    return Cost(row.cost_kind, row.rho, row.epsilon, row.delta)


def _release(row: Any, dataset: str) -> ReleaseEntry:
    return ReleaseEntry(row.id, dataset, row.status, row.mechanism, _cost(row), row.time,
                        row.user, row.record_path, row.knobs, row.workload_sha256, row.privacy,
                        row.rounds)
