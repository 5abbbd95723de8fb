"""Command line: ``python -m engine validate|bound|compare|run|census`` (see CONTRACT.md).

Bad input exits with status 2 and one line on stderr that names the field.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from typing import Any, NoReturn

import numpy as np

from engine.errors import NotApplicable, SpecError
from engine.executor import (
    SCHEDULER_VARIABLE,
    executor_for,
    map_ordered,
    scheduler_from_environment,
)
from engine.privacy import DEFAULT_DELTA, NOISE_TYPES, Privacy
from engine.scenario import Scenario, parse_mechanisms


class UsageError(Exception):
    """A command-line mistake (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _memory_limit(text: str) -> float:
    from engine.analysis.cost_model import parse_size

    try:
        return parse_size(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--memory-limit: ")) from None


def _add_memory_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory-limit", dest="memory_limit", type=_memory_limit, default=None,
                   help="refuse plans whose estimated memory exceeds this (e.g. 4GB; default: "
                        "$DPWB_MEMORY_LIMIT or half the available memory)")


def _add_privacy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise", choices=NOISE_TYPES, help="noise family")
    p.add_argument("--epsilon", type=float, help="privacy loss eps (> 0)")
    p.add_argument("--delta", type=float, help="delta in (0, 1) for gaussian noise")
    p.add_argument("--rho", type=float, help="zCDP rho (> 0)")


def _add_release_flags(p: argparse.ArgumentParser) -> None:
    """``--seed`` (teaching only), ``--grid`` and ``--out`` of a releasing subcommand."""
    p.add_argument("--seed", default=None, help="integer seed for a reproducible run (teaching "
                   "and tests: the output is then labelled not a private release); default: "
                   "OS entropy")
    p.add_argument("--grid", default=None, help="exponent k of the release grid 2**-k for "
                   "real-valued strategy answers (0..40; default: the coarsest grid that "
                   "enlarges the sensitivity by at most 2**-10)")
    p.add_argument("--out", default=None, metavar="DIR", help="write answers.csv and "
                   "release.json (the release record) into DIR")
    from engine.cli.budget import add_ledger_flag

    add_ledger_flag(p)


def add_executor_flags(p: argparse.ArgumentParser) -> None:
    """``--workers N`` (a local process pool) and ``--scheduler ADDRESS`` (a Dask cluster)."""
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run independent pieces on N local processes (default: serial, or "
                        "the planner's own choice)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run independent pieces on an existing Dask cluster, e.g. "
                        f"tcp://127.0.0.1:8786 (default: ${SCHEDULER_VARIABLE}; needs the "
                        "'dask' extra)")


@contextlib.contextmanager
def executor_from_flags(args: argparse.Namespace) -> Iterator[Executor | None]:
    """The executor that ``--workers`` / ``--scheduler`` / ``$DPWB_SCHEDULER`` ask for (None:
    plan in this process), shut down on exit."""
    workers = getattr(args, "workers", None)
    scheduler = getattr(args, "scheduler", None)
    if workers is not None and workers < 1:
        raise SpecError(f"--workers: must be >= 1, got {workers}")
    if workers is not None and scheduler:
        raise SpecError("--workers: give --workers or --scheduler, not both")
    field = "--scheduler"
    if workers is None and scheduler is None:
        scheduler, field = scheduler_from_environment(), SCHEDULER_VARIABLE
    with executor_for(workers, scheduler, field) as executor:
        yield executor


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m engine``."""
    parser = _Parser(prog="python -m engine", description="DP matrix-mechanism workbench.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser("validate", help="check a scenario spec and estimate its costs")
    v.add_argument("spec")
    v.add_argument("--mechanism", action="append", default=None, help="repeatable")
    v.add_argument("--json", action="store_true")
    b = sub.add_parser("bound", help="SVD lower bound of the workload")
    b.add_argument("spec")
    _add_privacy_flags(b)
    b.add_argument("--json", action="store_true")
    c = sub.add_parser("compare", help="expected error of every mechanism")
    c.add_argument("spec")
    c.add_argument("--mechanism", action="append", default=None, help="repeatable")
    _add_privacy_flags(c)
    add_executor_flags(c)
    c.add_argument("--json", action="store_true")
    r = sub.add_parser("run", help="run a mechanism on data")
    r.add_argument("spec")
    r.add_argument("--data", required=True, help="CSV with one column per attribute, "
                                                 "or 'adult' for the bundled data")
    r.add_argument("--mechanism", default=None)
    _add_privacy_flags(r)
    _add_release_flags(r)
    add_executor_flags(r)
    r.add_argument("--json", action="store_true")
    from engine.cli.census import add_census_arguments

    census = add_census_arguments(sub.add_parser("census",
                                                 help="hierarchical group-size release"))
    for command in (v, b, c, r, census):
        _add_memory_flag(command)
    from engine.cli.budget import add_budget_arguments

    add_budget_arguments(sub.add_parser("budget", help="privacy budget ledger: register data "
                                        "sets, show spent and remaining, list releases"))
    return parser


def privacy_from_flags(base: Privacy, args: argparse.Namespace) -> Privacy:
    """The spec's privacy level overridden by ``--noise/--epsilon/--delta/--rho``."""
    values: dict[str, Any] = base.to_spec()
    noise = args.noise or ("zcdp" if args.rho is not None and args.epsilon is None
                           else values["noise"])
    spec: dict[str, Any] = {"noise": noise}
    if noise in ("laplace", "gaussian"):
        spec["epsilon"] = args.epsilon if args.epsilon is not None else values.get("epsilon",
                                                                                   1.0)
    if noise == "gaussian":
        spec["delta"] = args.delta if args.delta is not None else values.get("delta", DEFAULT_DELTA)
        if "calibration" in values:
            spec["calibration"] = values["calibration"]
    if noise == "zcdp":
        spec["rho"] = args.rho if args.rho is not None else values.get("rho", 0.5)
    for flag in ("epsilon", "delta", "rho"):
        if getattr(args, flag) is not None and flag not in spec:
            raise SpecError(f"--{flag}: not a parameter of {noise} noise")
    try:
        return _in_range(Privacy.from_spec(spec), args)
    except SpecError as exc:
        # name the flag when the bad value came from the command line, not the spec
        msg = str(exc)
        for flag in ("epsilon", "delta", "rho"):
            if getattr(args, flag) is not None and msg.startswith(f"privacy.{flag}:"):
                raise SpecError(f"--{flag}:" + msg[len(f"privacy.{flag}:"):]) from None
        raise


def _in_range(privacy: Privacy, args: argparse.Namespace) -> Privacy:
    """``privacy`` when its noise scale and zCDP rho are finite and positive (eps of 1e300 or
    1e-300 overflow them); a SpecError naming the flag or spec key otherwise."""
    try:
        scales = [privacy.sigma(), privacy.unit_variance(), privacy.zcdp_rho()]
    except (OverflowError, ZeroDivisionError):
        scales = [math.inf]
    if all(math.isfinite(s) and s > 0 for s in scales):
        return privacy
    key = "rho" if privacy.noise == "zcdp" else "epsilon"
    where = f"--{key}" if getattr(args, key, None) is not None else f"privacy.{key}"
    raise SpecError(f"{where}: {getattr(privacy, key):g} puts the noise scale out of a "
                    "float's range")


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}" if abs(x) >= 1e5 else f"{x:.{digits}f}"


def cmd_validate(args: argparse.Namespace) -> dict[str, Any]:
    from engine.analysis.cost_model import memory_limit
    from engine.mechanisms import get
    from engine.workflows.compare import default_mechanisms

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
    from engine.analysis.svd_bound import svd_bound

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
    from engine.mechanisms import registry_names
    from engine.workflows.compare import compare

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
    from engine.data import csv_header, load_adult, load_csv

    if path == "adult":
        data = load_adult()
        missing = [n for n in domain.names if n not in data.domain.names]
        if missing:
            raise SpecError(f"--data adult: the spec's attributes {missing} are not in Adult")
        from engine.data import Dataset

        # the spec's attribute order decides the data vector's order
        return Dataset.from_dataframe(data.df[list(domain.names)], domain)
    ignored = [c for c in csv_header(path) if c not in domain.names]
    data = load_csv(path, domain, ignore_extra=True)
    if ignored:
        print(f"note: --data: ignored columns {', '.join(ignored)} (not attributes of the spec)",
              file=sys.stderr)
    return data


def plan_on(mech: Any, workload: Any, privacy: Privacy, executor: Executor | None) -> Any:
    """``mech``'s plan, made with ``executor`` (None: in this process).

    A mechanism with an ``executor`` knob (QuerySmasher, ResidualPlanner, the HDMM family)
    runs its independent pieces on it; any other one is planned whole as one task there, so
    that its optimisation leaves this process. Either way the plan is the in-process one.
    """
    if executor is None:
        return mech.plan(workload, privacy)
    if "executor" in mech.param:
        mech.executor = executor
        return mech.plan(workload, privacy)
    return map_ordered(executor, _plan_task, [(mech, workload, privacy)])[0]


def _plan_task(task: tuple[Any, Any, Privacy]) -> Any:
    mech, workload, privacy = task
    return mech.plan(workload, privacy)


def cmd_run(args: argparse.Namespace) -> dict[str, Any]:
    """Release one mechanism's answers on data (``--workers``/``--scheduler`` plan it)."""
    from engine.noise import check_grid_exponent, seed_from_text
    from engine.workflows.release import check_out_dir

    s = Scenario.load(args.spec)
    privacy = privacy_from_flags(s.privacy, args)
    name = args.mechanism or (s.mechanisms[0] if s.mechanisms else "hdmm")
    parse_mechanisms([name], "--mechanism")
    seed = seed_from_text(args.seed, "--seed")
    grid = None if args.grid is None else check_grid_exponent(args.grid, "--grid")
    if args.out is not None:
        check_out_dir(args.out)
    # the cluster first: a bad --scheduler is the only line on stderr, before any note on
    # the data or the ledger
    with executor_from_flags(args) as executor:
        return _release(args, s, privacy, name, seed, grid, executor)


def _release(args: argparse.Namespace, s: Scenario, privacy: Privacy, name: str,
             seed: int | None, grid: int | None, executor: Executor | None) -> dict[str, Any]:
    """Plan (on ``executor`` when given), consult the ledger, measure and release."""
    from engine.cli.budget import release_guard
    from engine.ledger.charge import release_cost
    from engine.mechanisms import get
    from engine.noise import release_rng
    from engine.workflows.release import base_record, workload_summary, write_release

    mech = get(name)
    if not mech.data_dependent and name != "hierarchical-pgsr":
        from engine.analysis.cost_model import require

        mech.check(s.workload, privacy)
        require(mech.estimate(s.workload, privacy), name, "run")
    data = _load_data(args.data, s.domain)
    rng = release_rng(seed)
    start = time.perf_counter()
    names = s.domain.names
    record = base_record(name, seed)
    record.update(knobs=_knobs(mech), workload=workload_summary(s.domain, s.workload),
                  privacy_unit="one record (add/remove) of the data",
                  privacy=privacy.to_spec())
    if name == "hierarchical-pgsr":
        raise NotApplicable("hierarchical-pgsr releases region hierarchies: use "
                            "`python -m engine census`")
    plan = None if mech.data_dependent else plan_on(mech, s.workload, privacy, executor)
    guarantee = None
    if plan is not None and plan.measurer is None:  # the exact sampler's own guarantee
        gridded = plan if grid is None else dataclasses.replace(plan, grid_exponent=grid)
        guarantee = gridded.exact_noise().guarantee
    with release_guard(ledger_url=args.ledger, data=args.data,
                       cost=release_cost(privacy, guarantee), seeded=seed is not None,
                       out=args.out, mechanism=name, knobs=record["knobs"],
                       workload_sha256=record["workload"]["sha256"],
                       privacy=record["privacy"]) as reservation:
        if mech.data_dependent:
            result = mech.run(s.workload, privacy, data, rng)

            def truth(gamma: tuple[int, ...]) -> np.ndarray:
                return data.marginal([names[i] for i in gamma])

            diffs = np.concatenate([(np.asarray(est, float) - truth(g)).ravel()
                                    for g, est in result.estimates.items()])
            errors = {"rmse": float(np.sqrt(np.mean(diffs**2))),
                      **result.errors(truth).as_json()}
            rho = result.rho_spent
            record.update(noise=dict(result.details["noise"]),
                          ledger=[{"charge": what, "rho": cost} for what, cost in result.ledger])
            header = ["marginal", "cell", "answer"]
            rows = [[result.label(g), i, float(v)] for g, est in result.estimates.items()
                    for i, v in enumerate(np.asarray(est, float).ravel())]
        else:
            measurement = plan.measure(data, rng, grid_exponent=grid)
            estimate = plan.reconstruct(measurement)
            truth = s.workload.answer_from_marginals(
                lambda ax: data.marginal([names[i] for i in ax]))
            errors = workload_errors(s.workload, estimate, truth)
            rho = privacy.zcdp_rho()
            noise = measurement.noise
            record["noise"] = noise.record()
            # data-independent, so public: the plan's RMSE at the sigma the sampler used
            record["expected_rmse"] = plan.rmse() * math.sqrt(noise.variance_factor)
            if "rho" in noise.guarantee:
                rho = noise.guarantee["rho"]
            labels = [t.label for t in s.workload.terms for _ in range(t.num_queries)]
            header = ["query", "term", "answer"]
            rows = [[i, label, float(v)] for i, (label, v) in enumerate(zip(labels, estimate,
                                                                             strict=True))]
        record.update(rho_spent=rho, seconds=time.perf_counter() - start)
        if args.out is not None:
            write_release(args.out, header, rows, record)
        if reservation is not None:  # the AIM round-by-round ledger, kept with the charge
            reservation.rounds = record.get("ledger")
    return {"mechanism": name, "records": data.records, "rho_spent": rho,
            "seconds": record["seconds"], "errors": errors,
            "seeded": record["seeded"], "notice": record["notice"], "release": record}


def _knobs(mech: Any) -> dict[str, Any]:
    """A mechanism's constructor knobs as JSON values (param values, ``name`` excluded)."""
    values = mech.param.values()
    return {k: v for k, v in values.items() if k != "name"
            and isinstance(v, int | float | str | bool | type(None) | list | tuple)}


def cmd_census(args: argparse.Namespace) -> dict[str, Any]:
    """Run a hierarchical group-size release (see engine.cli.census)."""
    from engine.cli.census import census_command

    return census_command(args)


def cmd_budget(args: argparse.Namespace) -> dict[str, Any]:
    """The budget ledger's ``init|show|history`` (see engine.cli.budget)."""
    from engine.cli.budget import budget_command

    return budget_command(args)


COMMANDS = {"validate": cmd_validate, "bound": cmd_bound, "compare": cmd_compare,
            "run": cmd_run, "census": cmd_census, "budget": cmd_budget}


def _print_validate(doc: dict[str, Any]) -> None:
    from engine.analysis.cost_model import Cost, format_bytes

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
        from engine.cli.budget import format_budget

        print(format_budget(doc))
        return
    if command == "census":
        from engine.cli.census import format_census

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
    from engine.analysis.cost_model import set_memory_limit

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
