"""Runs that compare private releases with the truth: the adaptive marginal comparison and the
census Monte-Carlo trials.

Both read the true data to score what a mechanism released. The scores are evaluation only,
never a private output. The explorer's adaptive and census pages call these functions and only
draw what they return; the ``census`` CLI calls :func:`census_trials` too.

* :func:`compare_adaptive`: AIM+GReM against the batch ResidualPlanner and, when the optional
  ``mbi`` package is installed, AIM+PGM, on the same data and budget, with workload errors
  against the true marginals (:class:`AdaptiveComparison`).
* :func:`census_trials`: Monte-Carlo trials of hierarchical-pgsr variants on a region
  hierarchy (:class:`CensusTrials`); :func:`load_hierarchy`, :func:`synthetic_hierarchy` and
  :func:`example_hierarchy` give the hierarchies.

Randomness: ``rng=None`` (adaptive) and ``seed=None`` (census) mean fresh OS entropy.

Example:
    >>> import numpy as np
    >>> from engine.data import Dataset
    >>> from engine.domain import Domain
    >>> from engine.privacy import Privacy
    >>> from engine.workloads import Workload
    >>> d = Domain.from_sizes([2, 3, 2])
    >>> data = Dataset.synthetic(d, 500, rng=0, correlation=0.5)
    >>> runs = compare_adaptive(data, Workload.marginals(d, k=2), Privacy(noise="zcdp", rho=1.0),
    ...                         rng=np.random.default_rng(1))
    >>> [run.method for run in runs.runs]
    ['AIM+GReM', 'ResidualPlanner (batch)']
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import NotApplicable, SpecError, suggest
from engine.executor import SerialExecutor, map_ordered, shared
from engine.mechanisms.aim_grem import (
    POST_PROCESSING,
    AdaptiveResult,
    AIMGReM,
    RoundRecord,
    WorkloadErrors,
    run_residual_planner,
)
from engine.mechanisms.aim_grem.mechanism import marginal_counter, marginal_sets, zcdp_budget
from engine.mechanisms.aim_grem.pgm import INSTALL_HINT, aim_pgm, available
from engine.mechanisms.hierarchical import (
    VARIANT_TITLES,
    VARIANTS,
    HierarchicalPGSR,
    Hierarchy,
    running_example,
    synthetic_census,
)
from engine.mechanisms.hierarchical.io import load_hierarchy_csv
from engine.mechanisms.hierarchical.monte_carlo import (
    Evaluation,
    TrialBatch,
    evaluate,
    executor_batches,
    run_trials_task,
    summarise,
)
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

# ----- adaptive marginal release ---------------------------------------------------------------
AIM_GREM = "AIM+GReM"
RESIDUAL_PLANNER = "ResidualPlanner (batch)"
AIM_PGM = "AIM+PGM"

#: ``on_round(record, share)``: one AIM+GReM round and the share of the budget spent (0..1).
RoundObserver = Callable[[RoundRecord, float], None]


@dataclass(frozen=True)
class AdaptiveRun:
    """One method's release and its errors against the true marginals.

    Attributes:
        method: display name (:data:`AIM_GREM`, :data:`RESIDUAL_PLANNER` or :data:`AIM_PGM`).
        result: the release (raw estimates, rounds, ledger, seconds).
        errors: workload errors of the post-processed estimates (counts and per record).
        post_processing: the post-processing the errors were computed after (``raw``: none).
    """

    method: str
    result: AdaptiveResult
    errors: WorkloadErrors
    post_processing: str

    def row(self) -> dict[str, Any]:
        """A table row: method, seconds, rounds, rho spent, post-processing and the errors."""
        row: dict[str, Any] = {"method": self.method, "seconds": round(self.result.seconds, 3),
                               "rounds": len(self.result.rounds),
                               "rho spent": self.result.rho_spent,
                               "post-processing": self.post_processing}
        row.update(self.errors.as_dict())
        return row


@dataclass(frozen=True)
class AdaptiveComparison:
    """The methods of :func:`compare_adaptive` on one data set, workload and budget.

    Attributes:
        workload: the marginal workload released.
        privacy: the privacy level asked for.
        rho: its zCDP budget, which every run spends exactly.
        runs: one per method, AIM+GReM first.
    """

    workload: Workload
    privacy: Privacy
    rho: float
    runs: tuple[AdaptiveRun, ...]

    def rows(self) -> list[dict[str, Any]]:
        """The comparison table, one row per method (see :meth:`AdaptiveRun.row`)."""
        return [run.row() for run in self.runs]


def pgm_available() -> bool:
    """True when AIM+PGM can run (the optional ``mbi`` package and JAX are installed)."""
    return available()


def compare_adaptive(data: Any, workload: Workload, privacy: Privacy, *,
                     max_rounds: int | None = None, residual_planner: bool = True,
                     pgm: bool = False, post_processing: str = "raw",
                     rng: np.random.Generator | None = None, progress: Progress | None = None,
                     on_round: RoundObserver | None = None,
                     on_method: Callable[[str], None] | None = None,
                     released: AdaptiveResult | None = None) -> AdaptiveComparison:
    """Release ``workload`` from ``data`` with AIM+GReM and the chosen comparisons.

    Every method gets the whole budget and its own random stream, spawned from ``rng`` in a
    fixed order (AIM+GReM, ResidualPlanner, AIM+PGM), so ticking a comparison on or off does
    not change the others' noise.

    Args:
        data: an ``engine.data.Dataset`` over the workload's domain (the true records).
        workload: a marginal workload (all k-way marginals or explicit attribute sets).
        privacy: gaussian (eps, delta) or zcdp rho; converted to the zCDP budget rho.
        max_rounds: AIM+GReM's rounds cap (None: the paper's schedule).
        residual_planner: also run the batch ResidualPlanner.
        pgm: also run AIM+PGM (needs the optional ``mbi`` package).
        post_processing: applied to the estimates before scoring: one of
            :data:`~engine.mechanisms.aim_grem.POST_PROCESSING` (``raw`` is the paper's).
        rng: the random generator (None: fresh OS entropy).
        progress: reported by every run; ``progress.cancel()`` stops the comparison with
            ``engine.errors.Cancelled`` (nothing is returned).
        on_round: called after every AIM+GReM round (live charts).
        on_method: called with a method's display name before it runs (status lines).
        released: AIM+GReM's result when it was already released (through
            :func:`engine.workflows.release.release`, which charges the ledger); None runs it
            here.

    Raises:
        SpecError: an unknown post-processing, or data whose domain is not the workload's.
        NotApplicable: a non-marginal workload, Laplace noise, or AIM+PGM without ``mbi``.
    """
    if post_processing not in POST_PROCESSING:
        raise SpecError(f"post_processing: unknown {post_processing!r}"
                        f"{suggest(post_processing, POST_PROCESSING)}; allowed: "
                        f"{', '.join(POST_PROCESSING)}")
    if pgm and not available():
        raise NotApplicable(INSTALL_HINT)
    sets, _ = marginal_sets(workload)
    rho = zcdp_budget(privacy)
    truth = marginal_counter(data, workload.domain)
    aim_stream, rp_stream, pgm_stream = (np.random.default_rng() if rng is None
                                         else rng).spawn(3)

    def started(method: str) -> None:
        if on_method is not None:
            on_method(method)

    def scored(method: str, result: AdaptiveResult) -> AdaptiveRun:
        return AdaptiveRun(method, result,
                           result.errors(truth, post_processing=post_processing),
                           post_processing)

    def observe(record: RoundRecord) -> None:
        if on_round is not None:
            on_round(record, min(1.0, record.rho_used / rho))

    if released is None:
        started(AIM_GREM)
        released = AIMGReM(max_rounds=max_rounds).run(workload, privacy, data, aim_stream,
                                                       progress=progress, on_round=observe)
    runs = [scored(AIM_GREM, released)]
    if residual_planner:
        started(RESIDUAL_PLANNER)
        runs.append(scored(RESIDUAL_PLANNER, run_residual_planner(
            workload, privacy, data, rp_stream, progress=progress)))
    if pgm:
        started(AIM_PGM)
        runs.append(scored(AIM_PGM, aim_pgm(workload.domain, sets, truth, rho, pgm_stream,
                                            progress=progress)))
    return AdaptiveComparison(workload, privacy, rho, tuple(runs))


# ----- census Monte-Carlo trials ----------------------------------------------------------------
#: The hierarchical-pgsr variants, in the order tables list them.
CENSUS_VARIANTS = VARIANTS
#: What each variant runs, in words with its paper name (e.g. ``M_H^R (relaxed QP + rounding)``).
CENSUS_VARIANT_TITLES = VARIANT_TITLES


def load_hierarchy(source: str | Path | io.TextIOBase, max_size: int | None = None
                   ) -> Hierarchy:
    """A region hierarchy from a CSV file, path or text stream.

    The header names the levels from the root down, then ``size`` and optionally ``count``
    (see :mod:`engine.mechanisms.hierarchical.io`); ``max_size`` fixes the top size bucket.

    Raises:
        SpecError: a malformed file (one line naming the row and column).
    """
    return load_hierarchy_csv(source, max_size=max_size)


def synthetic_hierarchy(spec: str) -> Hierarchy:
    """A generated census, e.g. ``levels=1,6,30;groups=20000;max_size=50;seed=0``.

    Raises:
        SpecError: a bad spec (one line naming the field).
    """
    return synthetic_census(spec)


def example_hierarchy() -> Hierarchy:
    """The paper's running example: US -> {GA, NY}, sizes {1, 2, 3}, n = 6."""
    return running_example()


def census_row(evaluation: Evaluation) -> dict[str, Any]:
    """A table row of one variant's trials: RMSE (mean, sd, per level), consistency
    violations, negative cells and seconds per release; titles of variants that are not
    eps-DP say so."""
    s = evaluation.summary()
    row = {"variant": evaluation.variant, "mechanism": s.get("title", evaluation.variant),
           "rmse": s["rmse"], "rmse_sd": s["rmse_sd"], "violations": s["violations"],
           "negative_cells": s["negative_cells"], "seconds": s["seconds"]}
    for level, value in enumerate(s["rmse_by_level"]):
        row[f"rmse_level_{level + 1}"] = value
    if not s.get("eps_dp", True):
        row["mechanism"] += " (NOT eps-DP)"
    return row


@dataclass(frozen=True)
class CensusTrials:
    """Monte-Carlo trials of hierarchical-pgsr variants on one hierarchy.

    Attributes:
        hierarchy: the true data.
        epsilon: the total budget of each release (pure eps-DP, individual unit).
        trials: releases per variant.
        evaluations: variant -> its errors, violations and runtimes, in the order run.
    """

    hierarchy: Hierarchy
    epsilon: float
    trials: int
    evaluations: Mapping[str, Evaluation]

    def rows(self) -> list[dict[str, Any]]:
        """The summary table, one row per variant (see :func:`census_row`)."""
        return [census_row(ev) for ev in self.evaluations.values()]


def census_trials(hierarchy: Hierarchy, variants: Sequence[str], epsilon: float,
                  trials: int = 5, *, noise: str = "geometric", split: str = "uniform",
                  level_weights: Sequence[float] = (), seed: int | None = None,
                  progress: Progress | None = None,
                  on_trial: Callable[[str, int, float], None] | None = None,
                  on_variant: Callable[[Evaluation], None] | None = None,
                  executor: Executor | None = None) -> CensusTrials:
    """Run ``trials`` releases of every variant and score them against ``hierarchy``.

    Every variant sees the same noise seeds (trial t of each uses ``default_rng([seed, t])``),
    so differences between variants are not differences of luck.

    Args:
        hierarchy: the true group-size histograms.
        variants: names among :data:`CENSUS_VARIANTS`, run in :data:`CENSUS_VARIANTS` order.
        epsilon: total privacy budget of one release (eps > 0).
        trials: releases per variant (>= 1).
        noise: ``geometric`` (integer double-geometric) or ``laplace``.
        split: how eps is split over the levels (``uniform``, ``user``, ``inverse-variance``).
        level_weights: one weight per level, root first, for ``split="user"``.
        seed: the trials' seed (None: fresh OS entropy).
        progress: cancellable between and inside trials (``engine.errors.Cancelled``).
        on_trial: called as ``on_trial(variant, trial, share)`` after each trial: the
            variant's trials done so far and the share (0..1) of all trials done.
        on_variant: called with each variant's evaluation as it finishes (so a caller keeps
            the finished ones when a later variant is cancelled).
        executor: runs batches of trials of every variant at once on any
            ``concurrent.futures.Executor`` (a local pool, a Dask cluster); None runs them
            here, one after the other. Seeded trial values are the same either way; progress
            then moves per batch and a cancel stops the batches not yet started.

    Raises:
        SpecError: no or unknown variants, a bad knob or budget split.
    """
    chosen = [v for v in CENSUS_VARIANTS if v in variants]
    unknown = [v for v in variants if v not in CENSUS_VARIANTS]
    if unknown:
        raise SpecError(f"variants: unknown {unknown[0]!r}{suggest(unknown[0], VARIANTS)}; "
                        f"allowed: {', '.join(CENSUS_VARIANTS)}")
    if not chosen:
        raise SpecError("variants: choose at least one variant")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    mechanisms = {v: HierarchicalPGSR(variant=v, noise=noise, split=split,
                                      level_weights=list(level_weights)) for v in chosen}
    total = len(chosen) * trials
    evaluations: dict[str, Evaluation] = {}
    if executor is not None and not isinstance(executor, SerialExecutor):
        ranges = executor_batches(trials, executor, len(chosen))
        data = shared(executor, hierarchy)
        tasks = [(data, mechanisms[v], epsilon, a, b, seed) for v in chosen for a, b in ranges]
        batches: dict[str, list[TrialBatch]] = {v: [] for v in chosen}
        done = dict.fromkeys(chosen, 0)

        def finished(index: int, batch: TrialBatch) -> None:
            variant = chosen[index // len(ranges)]
            batches[variant].append(batch)
            done[variant] += len(batch.rmse)
            if on_trial is not None:
                on_trial(variant, done[variant], sum(done.values()) / total)
            if done[variant] == trials:
                ordered = sorted(batches[variant], key=lambda b: b.first)
                evaluations[variant] = summarise(mechanisms[variant], epsilon, ordered)
                if on_variant is not None:
                    on_variant(evaluations[variant])

        map_ordered(executor, run_trials_task, tasks, finished, progress)
        return CensusTrials(hierarchy, float(epsilon), trials,
                            {v: evaluations[v] for v in chosen})
    for j, variant in enumerate(chosen):
        def tick(done: int, _trials: int, j: int = j, variant: str = variant) -> None:
            if on_trial is not None:
                on_trial(variant, done, (j * trials + done) / total)

        evaluation = evaluate(hierarchy, mechanisms[variant], epsilon, trials, seed, progress,
                              on_trial=tick)
        evaluations[variant] = evaluation
        if on_variant is not None:
            on_variant(evaluation)
    return CensusTrials(hierarchy, float(epsilon), trials, evaluations)
