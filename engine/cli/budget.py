"""The ``budget`` subcommand and the ledger's door in ``run`` / ``census``.

``python -m engine budget init --data CSV|adult --name NAME (--rho R | --epsilon E [--delta D])``
registers a data set (its file's SHA-256 and, with ``--domain FILE``, its public domain) with a
total budget; ``budget show [NAME] [--delta D]`` prints spent and remaining (in the budget's unit,
as rho and as eps at ``--delta``); ``budget history NAME`` lists the releases. Every form takes
``--ledger URL`` (default ``$DPWB_LEDGER_URL``, else the SQLite file under ``$DPWB_DATA_DIR``)
and ``--json``.

:func:`release_guard` is what ``run --out`` and ``census --out`` go through: a seeded run or a run
without ``--out`` (evaluation only) is not a release and says so on stderr; an unregistered data
set gets a one-line hint on stderr and the release proceeds (the ledger budgets registered data
sets; registering is the data owner's decision); a registered data set is charged before any
noise is drawn, and a release past its budget is refused (exit 2, one line: spent / requested /
total).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.errors import SpecError
from engine.ledger import (
    Budget,
    Cost,
    Ledger,
    Reservation,
    default_url,
    fingerprint_file,
    sqlite_file,
)
from engine.privacy import DEFAULT_DELTA


def add_ledger_flag(parser: argparse.ArgumentParser) -> None:
    """``--ledger URL`` on a subcommand."""
    parser.add_argument("--ledger", default=None, metavar="URL", help="SQLAlchemy URL of the "
                        "budget ledger (default: $DPWB_LEDGER_URL, else a SQLite file under "
                        "$DPWB_DATA_DIR, ~/.local/share/dpworkbench)")


def add_budget_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare ``budget {init,show,history}`` on ``parser`` (returned)."""
    sub = parser.add_subparsers(dest="budget_command", required=True,
                                parser_class=type(parser))
    init = sub.add_parser("init", help="register a data set with a total budget")
    init.add_argument("--data", required=True, help="the data file (CSV), or 'adult'")
    init.add_argument("--name", required=True, help="a name for the data set")
    init.add_argument("--rho", type=float, default=None, help="total zCDP rho")
    init.add_argument("--epsilon", type=float, default=None, help="total eps (pure, or with "
                      "--delta an (eps, delta) total)")
    init.add_argument("--delta", type=float, default=None, help="delta of an (eps, delta) total")
    init.add_argument("--domain", default=None, metavar="FILE", help="the public domain "
                      "(JSON or YAML) kept with the data set")
    show = sub.add_parser("show", help="spent and remaining budget")
    show.add_argument("name", nargs="?", default=None)
    show.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                      help="report the remaining budget as eps at this delta "
                           f"(default {DEFAULT_DELTA:g})")
    history = sub.add_parser("history", help="the releases charged to a data set")
    history.add_argument("name")
    for p in (init, show, history):
        add_ledger_flag(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def data_file(data: str) -> Path:
    """The file behind ``--data`` (``adult`` is the bundled CSV)."""
    if data == "adult":
        from engine.data.bundled import DATA_DIR

        return DATA_DIR / "adult.csv"
    return Path(data)


def budget_from_flags(rho: float | None, epsilon: float | None, delta: float | None) -> Budget:
    """The total of ``budget init``: exactly one of ``--rho`` / ``--epsilon`` (one line)."""
    if (rho is None) == (epsilon is None):
        raise SpecError("--rho/--epsilon: give exactly one total budget")
    if rho is not None:
        if delta is not None:
            raise SpecError("--delta: a rho budget has no delta (report it with budget show "
                            "--delta)")
        return Budget("rho", rho)
    return Budget("epsilon" if delta is None else "epsilon-delta", epsilon, delta)


def local_user() -> str | None:
    """The OS login running the command, as ``local:NAME`` (not an authenticated identity)."""
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):
        return None


def _domain(path: str | None) -> Any:
    if path is None:
        return None
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        first = (getattr(exc, "strerror", None) or str(exc)).splitlines()[0]
        raise SpecError(f"--domain: cannot read {path!r} ({first})") from None


def budget_command(args: argparse.Namespace) -> dict[str, Any]:
    """Run ``budget init|show|history`` and return its JSON document."""
    ledger = Ledger(args.ledger)
    try:
        if args.budget_command == "init":
            budget = budget_from_flags(args.rho, args.epsilon, args.delta)
            domain = _domain(args.domain)
            if domain is None and args.data == "adult":
                from engine.data import adult_domain

                domain = adult_domain().to_spec()
            entry = ledger.register(args.name, fingerprint_file(data_file(args.data)), budget,
                                    domain=domain, user=local_user())
            return {"budget_command": "init", "name": entry.name,
                    "fingerprint": entry.fingerprint, "unit": budget.unit,
                    "total": budget.total, "budget_delta": budget.delta, "ledger": ledger.url}
        if args.budget_command == "show":
            if not 0 < args.delta < 1:
                raise SpecError(f"--delta: must lie strictly between 0 and 1, got {args.delta}")
            names = [args.name] if args.name else [d.name for d in ledger.datasets()]
            return {"budget_command": "show", "ledger": ledger.url,
                    "datasets": [ledger.status(n, args.delta).as_json() | {
                        "line": ledger.status(n, args.delta).line()} for n in names]}
        rows = ledger.history(args.name)
        return {"budget_command": "history", "name": args.name, "releases": [
            {"id": r.id, "time": r.time.isoformat(timespec="seconds"), "status": r.status,
             "mechanism": r.mechanism, "cost": r.cost.describe(), "rho": r.cost.rho,
             "epsilon": r.cost.epsilon, "delta": r.cost.delta, "user": r.user,
             "record": r.record_path} for r in rows]}
    finally:
        ledger.close()


def format_budget(doc: dict[str, Any]) -> str:
    """Human-readable text of :func:`budget_command`'s document."""
    if doc["budget_command"] == "init":
        return (f"registered {doc['name']} ({doc['fingerprint'][:12]}) with "
                f"{Budget(doc['unit'], doc['total'], doc['budget_delta']).describe()} "
                f"in {doc['ledger']}")
    if doc["budget_command"] == "show":
        return "\n".join(d["line"] for d in doc["datasets"]) or "no data set is registered"
    lines = [f"{r['id']:>4}  {r['time']}  {r['status']:<8}  {r['mechanism']:<18}  "
             f"{r['cost']:<24}  {r['user'] or '-'}  {r['record'] or '-'}"
             for r in doc["releases"]]
    return "\n".join(lines) or f"{doc['name']}: no releases"


@contextmanager
def release_guard(*, ledger_url: str | None, data: str | None, cost: Cost, seeded: bool,
                  out: str | None, mechanism: str, knobs: Any = None,
                  workload_sha256: str | None = None,
                  privacy: Any = None) -> Iterator[Reservation | None]:
    """Charge a CLI release to the ledger before its noise is drawn (module docstring).

    Yields the :class:`Reservation` (set ``record_path`` / ``rounds`` on it) or None when
    nothing is charged.

    Raises:
        BudgetExceeded: the release does not fit the data set's remaining budget.
        LedgerError: the ledger cannot be used (one line).
    """
    if seeded:
        _note("seeded run: not a private release; the budget ledger is not charged")
        yield None
        return
    if out is None:
        _note("evaluation only (no --out): nothing is released; the budget ledger is not "
              "charged")
        yield None
        return
    if data is None:
        _note("synthetic data: nothing private is released; the budget ledger is not charged")
        yield None
        return
    fingerprint = fingerprint_file(data_file(data))
    url = ledger_url or default_url()
    path = sqlite_file(url)
    ledger = None if path is not None and not path.exists() else Ledger(url)
    entry = None if ledger is None else ledger.dataset(fingerprint)
    if ledger is None or entry is None:
        _note(f"data set not registered in the budget ledger: this release ({cost.describe()}) "
              f"is not budgeted; register it with `python -m engine budget init --data {data} "
              f"--name NAME --rho R`")
        yield None
        return
    try:
        with ledger.reserve(entry.fingerprint, cost, mechanism=mechanism, knobs=knobs,
                            workload_sha256=workload_sha256, privacy=privacy,
                            user=local_user()) as reservation:
            reservation.record_path = str(Path(out).resolve())
            yield reservation
        after = ledger.status(entry.name)
        _note(f"charged {cost.describe()} to {entry.name}: spent {after.spent.spent:.6g} of "
              f"{entry.budget.describe()}")
    finally:
        ledger.close()


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)

