"""The ``census`` subcommand: run hierarchical-pgsr on a hierarchy and report its errors.

``python -m engine census [--data CSV --max-size K | --synthetic SPEC] --variant NAME
[privacy flags] [--trials T] [--seed S] [--out DIR] [--json]`` (CONTRACT.md).
:func:`census_command` takes the parsed arguments and returns the JSON document
``{"variant", "violations", "rmse", "rmse_by_level": [...], "seconds", ...}`` averaged over
the trials (extra keys: sds, per-level L1, the privacy unit, the hierarchy's shape).
:func:`add_census_arguments` declares the flags on an argparse (sub)parser.

Privacy: pure eps-DP at the *individual* level (one person joining or leaving a group); the
``--noise`` flag must be ``laplace`` (the pure-eps family; the integer double-geometric
sampler is used unless ``--sampler laplace``); ``--delta`` and ``--rho`` are ignored, so a
shared privacy-flag parser may pass its defaults. Bad input raises ``SpecError`` with one line
naming the flag.

Releases draw their noise from OS entropy; ``--seed`` makes the trials reproducible and the
output then says "seeded: reproducible, not a private release". The size range is part of the
public domain: with ``--data`` the top bucket comes from ``--max-size`` (required), never from
the private CSV. The reported errors compare with the true data and are not private.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from engine.analysis.cost_model import estimate_census, require
from engine.cli.flags import (
    add_executor_flags,
    add_ledger_flag,
    add_teaching_flag,
    executor_from_flags,
    local_user,
)
from engine.errors import SpecError, suggest
from engine.ledger import fingerprint_file
from engine.mechanisms.hierarchical.io import load_hierarchy_csv
from engine.mechanisms.hierarchical.level_noise import NOISE_KINDS, SPLITS
from engine.mechanisms.hierarchical.mechanism import VARIANTS
from engine.mechanisms.hierarchical.model import Hierarchy
from engine.mechanisms.hierarchical.synthetic import synthetic_census
from engine.noise import seed_from_text
from engine.privacy import Privacy
from engine.workflows.evaluate import census_trials
from engine.workflows.release import release
from engine.workflows.release_files import check_out_dir

DEFAULT_SYNTHETIC = "levels=1,6,30;groups=20000;max_size=50;seed=0"
#: Smallest total eps: below it the noise scale passes the integers a float holds exactly.
MIN_EPSILON = 1e-12
#: Most Monte Carlo trials of one command.
MAX_TRIALS = 100_000


def add_census_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare the ``census`` flags on ``parser`` (returned for chaining)."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="CSV", help="hierarchy CSV (see engine."
                        "mechanisms.hierarchical.io for the format)")
    source.add_argument("--synthetic", metavar="SPEC", help="synthetic census spec, e.g. "
                        f"'{DEFAULT_SYNTHETIC}' (default) or 'preset=toy'")
    parser.add_argument("--variant", default="dp", help=f"one of {', '.join(VARIANTS)}")
    parser.add_argument("--noise", default=None, help="privacy family: laplace (pure eps; "
                        "the only one supported)")
    parser.add_argument("--epsilon", type=float, default=None, help="total eps (default 1)")
    parser.add_argument("--delta", type=float, default=None,
                        help="ignored: the release is pure eps-DP")
    parser.add_argument("--rho", type=float, default=None,
                        help="ignored: the release is pure eps-DP")
    parser.add_argument("--trials", type=int, default=5, help="Monte Carlo trials (default 5)")
    parser.add_argument("--seed", default=None, help="integer seed for reproducible trials "
                        "(teaching and tests: labelled not a private release); default: OS "
                        "entropy")
    parser.add_argument("--out", default=None, metavar="DIR", help="release the hierarchy "
                        "once through the release pipeline and write its tables (one CSV per "
                        "level: regions named, whole counts, margin_95, raw) and its record "
                        "(release.json) to DIR")
    parser.add_argument("--split", default="uniform", help=f"budget split: {', '.join(SPLITS)}")
    parser.add_argument("--weights", default=None,
                        help="per-level budget weights for --split user, e.g. 1,2,4")
    parser.add_argument("--sampler", default="geometric",
                        help=f"noise sampler: {', '.join(NOISE_KINDS)}")
    parser.add_argument("--max-size", dest="max_size", default=None,
                        help="top size bucket k (sizes >= k share it); required with --data: "
                        "the domain must be public, never read from the private CSV")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_ledger_flag(parser)
    add_teaching_flag(parser)
    add_executor_flags(parser)
    return parser


def census_command(args: argparse.Namespace) -> dict[str, Any]:
    """Run the ``census`` subcommand and return its JSON document.

    Args:
        args: parsed flags (missing optional attributes take the defaults above).

    Raises:
        SpecError: bad input (one line naming the flag).
    """
    variant = getattr(args, "variant", "dp") or "dp"
    if variant not in VARIANTS:
        raise SpecError(f"--variant: unknown {variant!r}{suggest(variant, VARIANTS)}; "
                        f"allowed: {', '.join(VARIANTS)}")
    noise = getattr(args, "noise", None)
    if noise not in (None, "laplace"):
        raise SpecError(f"--noise: hierarchical-pgsr is pure eps-DP; use --noise laplace "
                        f"(got {noise!r})")
    epsilon = getattr(args, "epsilon", None)
    epsilon = 1.0 if epsilon is None else float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= MIN_EPSILON):
        raise SpecError(f"--epsilon: must be a finite number >= {MIN_EPSILON:g} (smaller "
                        f"budgets need noise past a float's exact integers), got {epsilon!r}")
    trials = getattr(args, "trials", 5)
    trials = 5 if trials is None else int(trials)
    if not 1 <= trials <= MAX_TRIALS:
        raise SpecError(f"--trials: must be 1..{MAX_TRIALS:,}, got {trials}")
    seed = seed_from_text(getattr(args, "seed", None), "--seed")
    out = getattr(args, "out", None)
    if out is not None:
        check_out_dir(out)
    split = getattr(args, "split", "uniform") or "uniform"
    if split not in SPLITS:
        raise SpecError(f"--split: unknown {split!r}{suggest(split, SPLITS)}; allowed: "
                        f"{', '.join(SPLITS)}")
    weights = _weights(getattr(args, "weights", None))
    if split == "user" and weights is None:
        raise SpecError("--weights: required with --split user (one number per level)")
    if split != "user" and weights is not None:
        raise SpecError(f"--weights: only used with --split user (the split is {split!r})")
    sampler = getattr(args, "sampler", "geometric") or "geometric"
    if sampler not in NOISE_KINDS:
        raise SpecError(f"--sampler: unknown {sampler!r}; allowed: {', '.join(NOISE_KINDS)}")
    hierarchy = load_census_hierarchy(getattr(args, "data", None),
                                      getattr(args, "synthetic", None),
                                      public_max_size(getattr(args, "max_size", None),
                                                      getattr(args, "data", None)))
    regions = float(sum(hierarchy.tree.level_sizes))
    require(estimate_census(regions, float(hierarchy.sizes.k), float(trials)), "--trials",
            "run")
    if weights is not None and len(weights) != hierarchy.tree.depth:
        raise SpecError(f"--weights: expected {hierarchy.tree.depth} numbers (one per level), "
                        f"got {len(weights)}")
    knobs = {"variant": variant, "split": split, "noise": sampler, "level_weights": weights or []}
    data = getattr(args, "data", None)
    # the cluster first: a bad --scheduler fails before the ledger is consulted
    with executor_from_flags(args) as executor:
        # the release (charged first, refused before any noise), then the evaluation trials
        released = release("hierarchical-pgsr", data=hierarchy, knobs=knobs,
                           privacy=Privacy(noise="laplace", epsilon=epsilon),
                           fingerprint=None if data is None else fingerprint_file(data),
                           seed=seed, teaching=bool(getattr(args, "teaching", False)),
                           out=out, ledger=getattr(args, "ledger", None),
                           user=local_user())
        run = census_trials(hierarchy, [variant], epsilon, trials, noise=sampler, split=split,
                            level_weights=weights or (), seed=seed, executor=executor)
    result = run.evaluations[variant].summary()
    result.update({"hierarchy": hierarchy.name or "csv",
                   "regions_by_level": list(hierarchy.tree.level_sizes),
                   "size_buckets": hierarchy.sizes.k, "groups": hierarchy.total})
    record = released.record | {"trials": trials,
                                "evaluation": "errors are against the true data (over the "
                                              "trials, not the release): not private"}
    result.update(seeded=record["seeded"], notice=record["notice"], release=record,
                  notes=list(released.notes))
    return result


def public_max_size(text: str | int | None, data: str | None) -> int | None:
    """``--max-size`` as an integer >= 1; required with ``--data`` (a public domain bound).

    Raises:
        SpecError: one line naming ``--max-size``.
    """
    if text is None:
        if data:
            raise SpecError("--max-size: required with --data (the size range must be public, "
                            "not read from the private CSV), e.g. --max-size 7")
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise SpecError(f"--max-size: expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise SpecError(f"--max-size: expected an integer >= 1, got {value}")
    return value


def load_census_hierarchy(data: str | None, synthetic: str | None,
                          max_size: int | None = None) -> Hierarchy:
    """The hierarchy named by ``--data`` or ``--synthetic`` (default: a small synthetic)."""
    if data and synthetic:
        raise SpecError("--data/--synthetic: give one of them, not both")
    if data:
        return load_hierarchy_csv(data, max_size=max_size)
    try:
        return synthetic_census(synthetic or DEFAULT_SYNTHETIC)
    except SpecError as exc:
        raise SpecError(f"--synthetic: {exc}") from None


def _weights(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        weights = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SpecError(f"--weights: expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise SpecError(f"--weights: every weight must be a positive finite number, got {text!r}")
    return weights


def format_census(result: dict[str, Any]) -> str:
    """A short human-readable report of :func:`census_command`'s document."""
    levels = ", ".join(f"{x:.3g}" for x in result["rmse_by_level"])
    notice = f"{result['notice']}\n" if result.get("notice") else ""
    return notice + (
        f"{result['variant']} ({result.get('title', '')}) at eps={result['epsilon']:g}, "
        f"{result['trials']} trials, privacy unit: {result['privacy_unit']}\n"
        f"  RMSE per (size, region) query: {result['rmse']:.4g} "
        f"(sd {result['rmse_sd']:.2g}); by level: {levels}\n"
        f"  consistency violations: {result['violations']:g}; "
        f"seconds per release: {result['seconds']:.3g}")
