"""The ``budget`` subcommand: the privacy budget ledger from the command line.

``python -m engine budget init --data CSV --name NAME (--rho R | --epsilon E [--delta D])``
registers a data set under any name (its file's SHA-256 and, with ``--domain FILE``, its public
domain read as YAML 1.2 or JSON by :mod:`engine.specfile`) with a total budget, owned by the OS
login running it; ``budget show [NAME] [--delta D]`` prints spent and remaining (in the budget's
unit, as rho and as eps at ``--delta``); ``budget history NAME`` lists the releases; ``budget
archive NAME`` archives a data set (its history is kept as evidence; it takes no new release).
Every form takes ``--ledger URL`` (default ``$DPWB_LEDGER_URL``, else the SQLite file under
``$DPWB_DATA_DIR``) and ``--json``.

Bundled demo data (``--data adult``) runs in the teaching sandbox and is never charged, so it
cannot be registered. Releases are charged by the release pipeline
(:func:`engine.workflows.release.release`), never here.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.cli.flags import add_ledger_flag, local_user
from engine.errors import SpecError
from engine.ledger import Budget, Ledger, fingerprint_file
from engine.privacy import DEFAULT_DELTA
from engine.specfile import load_text
from engine.workflows.release_files import data_file


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
    archive = sub.add_parser("archive", help="archive a data set: its history is kept, it "
                             "takes no new release")
    archive.add_argument("name")
    for p in (init, show, history, archive):
        add_ledger_flag(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


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


def _domain(path: str | None) -> Any:
    """The public domain file of ``--domain`` (YAML 1.2 or JSON; None without the flag)."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        first = (getattr(exc, "strerror", None) or str(exc)).splitlines()[0]
        raise SpecError(f"--domain: cannot read {path!r} ({first})") from None
    fmt = "json" if path.lower().endswith(".json") else "yaml"
    try:
        return load_text(text, fmt, where="--domain")
    except SpecError as exc:
        raise SpecError(str(exc).splitlines()[0]) from None


def budget_command(args: argparse.Namespace) -> dict[str, Any]:
    """Run ``budget init|show|history|archive`` and return its JSON document."""
    if args.budget_command == "init":
        budget = budget_from_flags(args.rho, args.epsilon, args.delta)
        path, bundled = data_file(args.data)
        if bundled:
            raise SpecError(f"--data: {args.data!r} is bundled demo data: it runs in the "
                            "teaching sandbox and is never charged; register your own CSV")
        fingerprint = fingerprint_file(path)
        domain = _domain(args.domain)
    with Ledger(args.ledger) as ledger:
        if args.budget_command == "init":
            entry = ledger.register(args.name, fingerprint, budget, domain=domain,
                                    user=local_user())
            return {"budget_command": "init", "name": entry.name, "owner": entry.owner,
                    "fingerprint": entry.fingerprint, "unit": budget.unit,
                    "total": budget.total, "budget_delta": budget.delta, "ledger": ledger.url}
        if args.budget_command == "show":
            if not 0 < args.delta < 1:
                raise SpecError(f"--delta: must lie strictly between 0 and 1, got {args.delta}")
            names = [args.name] if args.name else [d.name for d in ledger.datasets()]
            statuses = [ledger.status(n, args.delta) for n in names]
            return {"budget_command": "show", "ledger": ledger.url,
                    "datasets": [s.as_json() | {"line": s.line()} for s in statuses]}
        if args.budget_command == "archive":
            entry = ledger.archive(args.name, user=local_user())
            return {"budget_command": "archive", "name": entry.name, "owner": entry.owner,
                    "archived": entry.archived.isoformat(timespec="seconds")}
        rows = ledger.history(args.name)
        return {"budget_command": "history", "name": args.name, "releases": [
            {"id": r.id, "time": r.time.isoformat(timespec="seconds"), "status": r.status,
             "mechanism": r.mechanism, "cost": r.cost.describe(), "rho": r.cost.rho,
             "epsilon": r.cost.epsilon, "delta": r.cost.delta, "user": r.user,
             "record": r.record_path} for r in rows]}


def format_budget(doc: dict[str, Any]) -> str:
    """Human-readable text of :func:`budget_command`'s document."""
    if doc["budget_command"] == "init":
        return (f"registered {doc['name']} ({doc['fingerprint'][:12]}) with "
                f"{Budget(doc['unit'], doc['total'], doc['budget_delta']).describe()} "
                f"in {doc['ledger']}")
    if doc["budget_command"] == "archive":
        return (f"archived {doc['name']} ({doc['archived']}): its history is kept; it takes no "
                "new release")
    if doc["budget_command"] == "show":
        return "\n".join(d["line"] for d in doc["datasets"]) or "no data set is registered"
    lines = [f"{r['id']:>4}  {r['time']}  {r['status']:<8}  {r['mechanism']:<18}  "
             f"{r['cost']:<24}  {r['user'] or '-'}  {r['record'] or '-'}"
             for r in doc["releases"]]
    return "\n".join(lines) or f"{doc['name']}: no releases"
