"""Command line: ``python -m engine validate|bound|compare|run|census`` (see CONTRACT.md).

Bad input exits with status 2 and one line on stderr that names the field.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.analysis.cost_model import (
    Cost,
    format_bytes,
    memory_limit,
    require,
    set_memory_limit,
)
from engine.analysis.svd_bound import svd_bound
from engine.cli.budget import add_budget_arguments, budget_command, format_budget
from engine.cli.census import add_census_arguments, census_command, format_census
from engine.cli.flags import (
    ArgumentParser,
    UsageError,
    add_executor_flags,
    add_memory_flag,
    add_privacy_flags,
    add_release_flags,
    executor_from_flags,
    local_user,
    privacy_from_flags,
)
from engine.data import Dataset, csv_header, load_adult, load_csv
from engine.errors import NotApplicable, SpecError
from engine.ledger import fingerprint_file
from engine.mechanisms import get, registry_names
from engine.noise import check_grid_exponent, seed_from_text
from engine.scenario import Scenario, parse_mechanisms
from engine.workflows.compare import compare, default_mechanisms
from engine.workflows.release import release
from engine.workflows.release_files import check_out_dir, data_file


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m engine``."""
    parser = ArgumentParser(prog="python -m engine",
                            description="DP matrix-mechanism workbench.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    v = sub.add_parser("validate", help="check a scenario spec and estimate its costs")
    v.add_argument("spec")
    v.add_argument("--mechanism", action="append", default=None, help="repeatable")
    v.add_argument("--json", action="store_true")
    b = sub.add_parser("bound", help="SVD lower bound of the workload")
    b.add_argument("spec")
    add_privacy_flags(b)
    b.add_argument("--json", action="store_true")
    c = sub.add_parser("compare", help="expected error of every mechanism")
    c.add_argument("spec")
    c.add_argument("--mechanism", action="append", default=None, help="repeatable")
    add_privacy_flags(c)
    add_executor_flags(c)
    c.add_argument("--json", action="store_true")
    r = sub.add_parser("run", help="run a mechanism on data")
    r.add_argument("spec")
    r.add_argument("--data", required=True, help="CSV with one column per attribute, "
                                                 "or 'adult' for the bundled data")
    r.add_argument("--mechanism", default=None)
    add_privacy_flags(r)
    add_release_flags(r)
    add_executor_flags(r)
    r.add_argument("--json", action="store_true")
    census = add_census_arguments(sub.add_parser("census",
                                                 help="hierarchical group-size release"))
    for command in (v, b, c, r, census):
        add_memory_flag(command)
    add_budget_arguments(sub.add_parser("budget", help="privacy budget ledger: register data "
                                        "sets, show spent and remaining, list releases"))
    return parser


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}" if abs(x) >= 1e5 else f"{x:.{digits}f}"


def cmd_validate(args: argparse.Namespace) -> dict[str, Any]:
    """The spec checked, and every mechanism's estimated cost."""
    s = Scenario.load(args.spec)
    names = (parse_mechanisms(args.mechanism, "--mechanism") if args.mechanism
             else s.mechanisms or default_mechanisms())
    costs: dict[str, Any] = {}
    for name in names:
        mech = get(name)
        if mech.data_dependent:
            continue
        try:
            mech.check(s.workload, s.privacy)
        except NotApplicable as exc:
            costs[name] = {"error": f"not applicable: {str(exc).splitlines()[0]}"}
            continue
        costs[name] = mech.estimate(s.workload, s.privacy).as_json()
    return {"valid": True, "queries": s.workload.num_queries, "domain_size": s.domain.size,
            "terms": len(s.workload.terms), "privacy": s.privacy.describe(),
            "memory_limit": memory_limit(), "estimates": costs}


def cmd_bound(args: argparse.Namespace) -> dict[str, Any]:
    """The SVD lower bound of the spec's workload."""
    s = Scenario.load(args.spec)
    privacy = privacy_from_flags(s.privacy, args)
    b = svd_bound(s.workload)
    return {"queries": s.workload.num_queries, "domain_size": s.domain.size,
            "noise": privacy.noise, "privacy": privacy.describe(), "method": b.method,
            "svd_bound": b.value, "svd_bound_rmse": b.rmse(s.workload, privacy),
            "svd_bound_kind": b.kind, **({"reason": b.reason} if b.kind != "exact" else {})}


def cmd_compare(args: argparse.Namespace) -> dict[str, Any]:
    """Plan every mechanism (progress on stderr); the ``compare --json`` document, with
    ``best`` (the mechanism of least RMSE, or null) and ``order`` (mechanisms best first,
    then the not applicable ones) added."""
    s = Scenario.load(args.spec)
    privacy = privacy_from_flags(s.privacy, args)
    mechs = parse_mechanisms(args.mechanism, "--mechanism") if args.mechanism else (
        s.mechanisms or list(registry_names()))
    total = len(mechs)
    done = [0]

    def report(row: Any) -> None:
        done[0] += 1
        outcome = (f"RMSE {_fmt(row.rmse)}" if row.rmse is not None
                   else (row.error or "not applicable"))
        print(f"[{done[0]}/{total}] {row.mechanism}: {outcome} ({row.seconds:.1f} s)",
              file=sys.stderr, flush=True)
        if done[0] < total:
            print(f"planning {mechs[done[0]]} ...", file=sys.stderr, flush=True)

    # the cluster first: a bad --scheduler is the only line on stderr
    with executor_from_flags(args) as executor:
        print(f"planning {total} mechanisms for {s.workload.num_queries:,} queries over "
              f"{s.domain.size:,} cells; planning {mechs[0]} ...", file=sys.stderr, flush=True)
        comparison = compare(s.workload, privacy, mechs, executor=executor, on_row=report)
    doc = comparison.to_json()
    best = comparison.best()
    doc["best"] = best.mechanism if best is not None else None
    doc["order"] = [r["mechanism"] for r in _best_first(doc["results"])]
    return doc


def _best_first(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Result rows by RMSE, least first; the not applicable ones after, in their order."""
    return sorted(results, key=lambda r: (r["rmse"] is None, r["rmse"] or 0.0))


def workload_errors(workload: Any, estimate: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """RMSE over queries, and mean L1 / mean L2 / max L1 over the workload's terms (tables)."""
    err = np.asarray(estimate, float) - np.asarray(truth, float)
    parts = workload.split(err)
    l1 = np.array([np.abs(p).sum() for p in parts])
    l2 = np.array([np.sqrt((p**2).sum()) for p in parts])
    return {"rmse": float(np.sqrt(np.mean(err**2))), "mean_l1": float(l1.mean()),
            "mean_l2": float(l2.mean()), "max_l1": float(l1.max())}


def _load_data(path: str, domain: Any) -> Any:
    if path == "adult":
        data = load_adult()
        missing = [n for n in domain.names if n not in data.domain.names]
        if missing:
            raise SpecError(f"--data adult: the spec's attributes {missing} are not in Adult")
        # the spec's attribute order decides the data vector's order
        return Dataset.from_dataframe(data.df[list(domain.names)], domain)
    ignored = [c for c in csv_header(path) if c not in domain.names]
    data = load_csv(path, domain, ignore_extra=True)
    if ignored:
        print(f"note: --data: ignored columns {', '.join(ignored)} (not attributes of the spec)",
              file=sys.stderr)
    return data


def cmd_run(args: argparse.Namespace) -> dict[str, Any]:
    """Release one mechanism's answers on data through the release pipeline
    (``--workers``/``--scheduler`` plan it); the errors against the truth are evaluation."""
    s = Scenario.load(args.spec)
    privacy = privacy_from_flags(s.privacy, args)
    name = args.mechanism or (s.mechanisms[0] if s.mechanisms else "hdmm")
    parse_mechanisms([name], "--mechanism")
    if name == "hierarchical-pgsr":
        raise NotApplicable("hierarchical-pgsr releases region hierarchies: use "
                            "`python -m engine census`")
    seed = seed_from_text(args.seed, "--seed")
    grid = None if args.grid is None else check_grid_exponent(args.grid, "--grid")
    if args.out is not None:
        check_out_dir(args.out)
    mech = get(name)
    if not mech.data_dependent:  # before the data is read: a plan too large says so first
        mech.check(s.workload, privacy)
        require(mech.estimate(s.workload, privacy), name, "run")
    # the cluster first: a bad --scheduler is the only line on stderr, before any note on
    # the data or the ledger
    with executor_from_flags(args) as executor:
        data = _load_data(args.data, s.domain)
        path, bundled = data_file(args.data)
        released = release(name, data=data, workload=s.workload, privacy=privacy,
                           fingerprint=fingerprint_file(path), bundled=bundled, seed=seed,
                           teaching=args.teaching,
                           out=args.out, ledger=args.ledger, user=local_user(), grid=grid,
                           executor=executor,
                           post_process="raw" if args.raw else "consistent",
                           fit_space=args.fit_space)
    for note in released.notes:
        print(f"note: {note}", file=sys.stderr)
    record = released.record
    return {"mechanism": name, "records": data.records, "rho_spent": record["rho_spent"],
            "seconds": record["seconds"], "errors": _errors(s.workload, data, released),
            "seeded": record["seeded"], "notice": record["notice"], "release": record}


def _errors(workload: Any, data: Any, released: Any) -> dict[str, float]:
    """The released answers' errors against the true data (evaluation, not private)."""
    names = workload.domain.names

    def truth(gamma: tuple[int, ...]) -> np.ndarray:
        return data.marginal([names[i] for i in gamma])

    if isinstance(released.result, np.ndarray):
        return workload_errors(workload, released.result, workload.answer_from_marginals(truth))
    result = released.result
    diffs = np.concatenate([(np.asarray(est, float) - truth(g)).ravel()
                            for g, est in result.estimates.items()])
    return {"rmse": float(np.sqrt(np.mean(diffs**2))), **result.errors(truth).as_json()}


def cmd_census(args: argparse.Namespace) -> dict[str, Any]:
    """Run a hierarchical group-size release (see engine.cli.census)."""
    doc = census_command(args)
    for note in doc.pop("notes"):
        print(f"note: {note}", file=sys.stderr)
    return doc


def cmd_budget(args: argparse.Namespace) -> dict[str, Any]:
    """The budget ledger's ``init|show|history|archive`` (see engine.cli.budget)."""
    return budget_command(args)


COMMANDS = {"validate": cmd_validate, "bound": cmd_bound, "compare": cmd_compare,
            "run": cmd_run, "census": cmd_census, "budget": cmd_budget}


def _print_validate(doc: dict[str, Any]) -> None:
    print(f"valid: {doc['queries']:,} queries over {doc['domain_size']:,} cells "
          f"({doc['terms']} terms), {doc['privacy']}")
    if not doc["estimates"]:
        return
    limit = doc["memory_limit"]
    print(f"estimated cost (memory limit {format_bytes(limit)}):")
    width = max(len(name) for name in doc["estimates"])
    for name, est in doc["estimates"].items():
        if "error" in est:
            print(f"  {name:<{width}}  {est['error']}")
            continue
        cost = Cost(**est)
        over = "  OVER THE LIMIT" if cost.peak_bytes > limit else ""
        print(f"  {name:<{width}}  {cost.describe()}{over}")


def _print_table(command: str, doc: dict[str, Any]) -> None:
    if command == "compare":
        bound = doc["svd_bound_rmse"]
        best = next((r for r in doc["results"] if r["mechanism"] == doc["best"]), None)
        if best is None:
            verdict = "best: none (no mechanism applies)"
        elif bound:
            verdict = (f"best: {best['mechanism']} at RMSE {_fmt(best['rmse'])}, "
                       f"{_fmt(best['rmse'] / bound, 3)} x the bound")
        else:
            verdict = f"best: {best['mechanism']} at RMSE {_fmt(best['rmse'])}"
        kind = {"floor": " (a certified floor under the exact bound, not the bound itself)"}
        print(f"{doc['queries']:,} queries over {doc['domain_size']:,} cells, {doc['noise']} "
              f"noise; SVD bound RMSE {_fmt(bound)}{kind.get(doc.get('svd_bound_kind'), '')}; "
              f"{verdict}")
        width = max(len(r["mechanism"]) for r in doc["results"])
        print(f"{'mechanism':<{width}}  {'rmse':>12}  {'x bound':>8}  {'plan s':>8}")
        for r in _best_first(doc["results"]):
            if r.get("error"):
                print(f"{r['mechanism']:<{width}}  {r['error']}")
                continue
            ratio = r.get("ratio_to_bound")
            print(f"{r['mechanism']:<{width}}  {_fmt(r['rmse']):>12}  {_fmt(ratio, 3):>8}  "
                  f"{r['plan_seconds']:>8.3f}")
        return
    if command == "budget":
        print(format_budget(doc))
        return
    if command == "census":
        print(format_census(doc))
        return
    for key, value in doc.items():
        if key == "release" or value is None:  # the record goes to --json / --out
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                print(f"{key}.{k}: {_fmt(v) if isinstance(v, float) else v}")
        else:
            print(f"{key}: {_fmt(value) if isinstance(value, float) else value}")


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has neither)."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, 1 for not applicable)."""
    args = None
    try:
        args = build_parser().parse_args(argv)
        set_memory_limit(getattr(args, "memory_limit", None))  # budget has no plans
        doc = COMMANDS[args.command](args)
    except (UsageError, SpecError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except NotApplicable as exc:
        print(f"not applicable: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except (OverflowError, MemoryError, RecursionError) as exc:
        # the cost model and the field checks should catch these first; never a traceback
        command = getattr(args, "command", "engine")
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {command}: a number or size in the input is out of range ({reason})",
              file=sys.stderr)
        return 2
    finally:
        set_memory_limit(None)
    if getattr(args, "json", False):
        print(json.dumps(_finite(doc), allow_nan=False))
    elif args.command == "validate":
        _print_validate(doc)
    else:
        _print_table(args.command, doc)
    return 0
