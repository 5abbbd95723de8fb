"""The flags the subcommands share, declared and read in one place.

``main``, ``census`` and ``budget`` import this module and never each other's flags:
privacy (``--noise/--epsilon/--delta/--rho``), executor (``--workers/--scheduler``), memory
(``--memory-limit``), ledger (``--ledger``) and release (``--seed/--grid/--out``) flags, the
parser that turns argparse's complaints into :class:`UsageError` (exit status 2), and
:func:`privacy_from_flags` / :func:`executor_from_flags` that read them back.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import math
from collections.abc import Iterator
from concurrent.futures import Executor
from typing import Any, NoReturn

from engine.analysis.cost_model import parse_size
from engine.errors import SpecError
from engine.executor import SCHEDULER_VARIABLE, executor_for, scheduler_from_environment
from engine.privacy import DEFAULT_DELTA, NOISE_TYPES, Privacy
from engine.workflows.tables import FIT_SPACES


class UsageError(Exception):
    """A command-line mistake (exit status 2)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _memory_limit(text: str) -> float:
    try:
        return parse_size(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--memory-limit: ")) from None


def add_memory_flag(p: argparse.ArgumentParser) -> None:
    """``--memory-limit SIZE`` (bytes, or with a unit such as ``4GB``)."""
    p.add_argument("--memory-limit", dest="memory_limit", type=_memory_limit, default=None,
                   help="refuse plans whose estimated memory exceeds this (e.g. 4GB; default: "
                        "$DPWB_MEMORY_LIMIT or half the available memory)")


def add_privacy_flags(p: argparse.ArgumentParser) -> None:
    """``--noise --epsilon --delta --rho`` (they override the spec's ``privacy:``)."""
    p.add_argument("--noise", choices=NOISE_TYPES, help="noise family")
    p.add_argument("--epsilon", type=float, help="privacy loss eps (> 0)")
    p.add_argument("--delta", type=float, help="delta in (0, 1) for gaussian noise")
    p.add_argument("--rho", type=float, help="zCDP rho (> 0)")


def add_ledger_flag(parser: argparse.ArgumentParser) -> None:
    """``--ledger URL`` on a subcommand."""
    parser.add_argument("--ledger", default=None, metavar="URL", help="SQLAlchemy URL of the "
                        "budget ledger (default: $DPWB_LEDGER_URL, else a SQLite file under "
                        "$DPWB_DATA_DIR, ~/.local/share/dpworkbench)")


def local_user() -> str | None:
    """The OS login running the command, as ``local:NAME`` (not an authenticated identity)."""
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):
        return None


def add_teaching_flag(p: argparse.ArgumentParser) -> None:
    """``--teaching``: the run is a lesson, never charged, labelled not a private release."""
    p.add_argument("--teaching", action="store_true", help="a teaching run: never charged to "
                   "the budget ledger, every output says 'teaching: not a private release' "
                   "(runs on bundled demo data always are)")


def add_release_flags(p: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--teaching`` (teaching only), ``--grid``, ``--out``, ``--raw`` and
    ``--ledger`` of ``run``."""
    p.add_argument("--seed", default=None, help="integer seed for a reproducible run (teaching "
                   "and tests: the output is then labelled not a private release); default: "
                   "OS entropy")
    add_teaching_flag(p)
    p.add_argument("--grid", default=None, help="exponent k of the release grid 2**-k for "
                   "real-valued strategy answers (0..40; default: the coarsest grid that "
                   "enlarges the sensitivity by at most 2**-10)")
    p.add_argument("--out", default=None, metavar="DIR", help="write the released tables and "
                   "release.json (the release record) into DIR: one CSV per workload term "
                   "with a column per attribute in the domain's values, estimate (whole "
                   "non-negative counts that agree across tables), margin_95 (half-width of "
                   "the 95%% interval of the unbiased estimate) and raw (that estimate); a "
                   "Parquet copy beside each CSV when pyarrow is installed (aim-grem too: "
                   "one table per workload marginal)")
    p.add_argument("--raw", action="store_true", help="publish the unbiased least-squares "
                   "estimates only (margin_95 and raw: fractional, possibly negative, tables "
                   "may disagree) instead of consistent whole counts; post-processing costs "
                   "no privacy either way")
    p.add_argument("--fit-space", choices=FIT_SPACES, default="auto",
                   help="where the consistent counts are fitted: auto (default: three-way "
                   "for 1- and 2-way marginal tables over three or more attributes of a "
                   "Kronecker plan on a domain of more than 100,000 cells, else cells), one "
                   "count per cell (cells), or, for 1- and 2-way marginal tables, the tables "
                   "themselves (marginals), or as the margins of agreeing non-negative 3-way "
                   "tables (three-way: more accurate than cells on the benchmarks' HDMM plans "
                   "at a thirtieth of their post-processing; see benchmarks/README.md)")
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
