"""Monte Carlo error of the PGSR variants: per query, per level, per (size, level); #CV; time.

The post-processors are non-linear (non-negativity, integrality), so their error has no
closed form: each trial draws fresh noise, releases, and compares with the truth.

Definitions (one query per (size bucket, region), ``k |R|`` queries in all):

* ``rmse``: ``sqrt(mean over queries of (c^ - c)**2)`` in one trial; mean and sd over trials;
* ``rmse_by_level``: the same over the queries of one level;
* ``l1_by_level``: per region, the L1 distance between its released and true histograms,
  averaged over the regions of the level (the paper's per-level error is an L1 distance
  whose normalisation was lost; this one is per region);
* ``mse_size_level``: mean squared error per (size, level) cell, over regions and trials
  (the heat map);
* per (size, node) query: Monte Carlo mean error (bias), its spread (sd over trials) and
  the MSE;
* ``violations``: #CV of each trial (see :func:`.model.check_release`); runtime per trial.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import SpecError
from engine.executor import SerialExecutor, map_ordered, shared, worker_count
from engine.mechanisms.hierarchical.mechanism import VARIANTS, HierarchicalPGSR
from engine.mechanisms.hierarchical.model import Hierarchy, Release
from engine.noise import release_rng
from engine.progress import Progress


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Errors of one variant over Monte Carlo trials (see the module docstring).

    Arrays indexed by trial have length ``trials``; by level, length L.
    """

    variant: str
    epsilon: float
    trials: int
    rmse_trials: np.ndarray
    rmse_by_level_trials: np.ndarray       # (trials, L)
    l1_by_level_trials: np.ndarray         # (trials, L)
    violations_trials: np.ndarray          # (trials,)
    negative_trials: np.ndarray            # (trials,)
    seconds_trials: np.ndarray             # (trials,)
    mse_size_level: np.ndarray             # (L, k)
    query_bias: tuple[np.ndarray, ...]     # per level (regions, k)
    query_sd: tuple[np.ndarray, ...]
    query_mse: tuple[np.ndarray, ...]
    last_release: Release
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def rmse(self) -> float:
        """Mean over trials of the per-trial RMSE over all ``k |R|`` queries."""
        return float(self.rmse_trials.mean())

    @property
    def rmse_sd(self) -> float:
        """Sd over trials of the per-trial RMSE."""
        return float(self.rmse_trials.std(ddof=1)) if self.trials > 1 else 0.0

    @property
    def rmse_by_level(self) -> np.ndarray:
        """Mean over trials of the per-level RMSE."""
        return self.rmse_by_level_trials.mean(axis=0)

    @property
    def rmse_by_level_sd(self) -> np.ndarray:
        """Sd over trials of the per-level RMSE."""
        if self.trials < 2:
            return np.zeros(self.rmse_by_level_trials.shape[1])
        return self.rmse_by_level_trials.std(axis=0, ddof=1)

    @property
    def l1_by_level(self) -> np.ndarray:
        """Mean over trials of the per-region L1 distance, per level."""
        return self.l1_by_level_trials.mean(axis=0)

    @property
    def rmse_size_level(self) -> np.ndarray:
        """``(L, k)`` RMSE per (level, size) cell over regions and trials (the heat map)."""
        return np.sqrt(self.mse_size_level)

    def query_rmse(self, level: int) -> np.ndarray:
        """``(regions, k)`` Monte Carlo RMSE of every (size, region) query of a level."""
        return np.sqrt(self.query_mse[level])

    @property
    def violations(self) -> float:
        """Mean #CV over trials."""
        return float(self.violations_trials.mean())

    @property
    def seconds(self) -> float:
        """Mean runtime (noise + post-processing) per trial."""
        return float(self.seconds_trials.mean())

    def summary(self) -> dict[str, Any]:
        """The JSON document of the ``census`` CLI (plus extra keys, all JSON-able)."""
        return {"variant": self.variant, "violations": self.violations, "rmse": self.rmse,
                "rmse_by_level": [float(x) for x in self.rmse_by_level],
                "seconds": self.seconds, "rmse_sd": self.rmse_sd,
                "rmse_by_level_sd": [float(x) for x in self.rmse_by_level_sd],
                "l1_by_level": [float(x) for x in self.l1_by_level],
                "negative_cells": float(self.negative_trials.mean()),
                "epsilon": self.epsilon, "trials": self.trials,
                "privacy_unit": "individual", **self.report}


def release_errors(release: Release, truth: Hierarchy) -> dict[str, np.ndarray]:
    """Per-trial error statistics of one release against the truth."""
    sq = [(np.asarray(a, float) - b) ** 2 for a, b in zip(release.levels, truth.levels,
                                                             strict=True)]
    per_level_cells = np.array([s.size for s in sq], dtype=float)
    per_level_sse = np.array([s.sum() for s in sq])
    l1 = np.array([np.abs(np.asarray(a, float) - b).sum(axis=1).mean()
                   for a, b in zip(release.levels, truth.levels, strict=True)])
    return {"rmse": np.sqrt(per_level_sse.sum() / per_level_cells.sum()),
            "rmse_by_level": np.sqrt(per_level_sse / per_level_cells), "l1_by_level": l1,
            "sq": sq}


@dataclass(frozen=True, eq=False)
class TrialBatch:
    """Trials ``first .. first + len(rmse) - 1`` of one variant: per-trial statistics and the
    errors summed over the batch (what :func:`summarise` needs, not every release)."""

    first: int
    rmse: np.ndarray                       # (n,)
    by_level: np.ndarray                   # (n, L)
    l1: np.ndarray                         # (n, L)
    violations: np.ndarray                 # (n,)
    negative: np.ndarray                   # (n,)
    seconds: np.ndarray                    # (n,)
    err_sum: tuple[np.ndarray, ...]        # per level (regions, k)
    err_sq: tuple[np.ndarray, ...]
    last_release: Release


def run_trials(hierarchy: Hierarchy, mech: HierarchicalPGSR, epsilon: float, first: int,
               stop: int, seed: int | None, progress: Progress | None = None,
               on_trial: Callable[[int, int], None] | None = None) -> TrialBatch:
    """Releases ``first .. stop - 1`` of ``mech``, scored against ``hierarchy``.

    Trial t draws its noise from ``np.random.default_rng([seed, t])`` (OS entropy when
    ``seed`` is None), so a trial's values do not depend on which batch or process ran it.
    ``progress`` reports and ``on_trial(t + 1, stop)`` is called after every trial.
    """
    n, L = stop - first, hierarchy.tree.depth
    rmse, viol, neg, secs = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    by_level, l1 = np.empty((n, L)), np.empty((n, L))
    err_sum = [np.zeros(a.shape) for a in hierarchy.levels]
    err_sq = [np.zeros(a.shape) for a in hierarchy.levels]
    release = None
    for i, t in enumerate(range(first, stop)):
        start = time.perf_counter()
        rng = release_rng() if seed is None else np.random.default_rng([seed, t])
        release = mech.release(hierarchy, epsilon, rng, progress)
        secs[i] = time.perf_counter() - start
        stats = release_errors(release, hierarchy)
        rmse[i], by_level[i], l1[i] = stats["rmse"], stats["rmse_by_level"], stats["l1_by_level"]
        viol[i], neg[i] = release.checks["violations"], release.checks["negative"]
        for lev, (a, b) in enumerate(zip(release.levels, hierarchy.levels, strict=True)):
            e = np.asarray(a, float) - b
            err_sum[lev] += e
            err_sq[lev] += e * e
        if progress is not None:
            progress.report(t + 1, float(rmse[i]), f"trial {t + 1}/{stop}")
        if on_trial is not None:
            on_trial(t + 1, stop)
    if release is None:
        raise SpecError(f"trials: an empty batch ({first}..{stop})")
    return TrialBatch(first, rmse, by_level, l1, viol, neg, secs, tuple(err_sum), tuple(err_sq),
                      release)


def run_trials_task(args: tuple[Hierarchy, HierarchicalPGSR, float, int, int, int | None]
                    ) -> TrialBatch:
    """:func:`run_trials` of one ``(hierarchy, mech, epsilon, first, stop, seed)`` tuple (an
    executor's item)."""
    return run_trials(*args)


def trial_batches(trials: int, pieces: int) -> list[tuple[int, int]]:
    """``trials`` split into at most ``pieces`` contiguous ``(first, stop)`` ranges."""
    pieces = max(1, min(int(pieces), trials))
    edges = np.linspace(0, trials, pieces + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


#: Batches of trials per worker of an executor (over all variants of one run). Two, not
#: more: trials cost the same, so two already let a worker that others' load slowed hand
#: work to the rest and give progress a few steps; each further batch costs Dask about 4 ms
#: of scheduler and worker CPU (a process pool 0.3 ms), a visible share of a 200-trial census
#: run of 0.9 s CPU.
BATCHES_PER_WORKER = 2


def executor_batches(trials: int, executor: Executor, variants: int = 1) -> list[tuple[int, int]]:
    """The ``(first, stop)`` ranges that one variant's ``trials`` run in on ``executor``, when
    ``variants`` variants share it: :data:`BATCHES_PER_WORKER` batches per worker in all."""
    per_variant = -(-BATCHES_PER_WORKER * worker_count(executor) // max(1, variants))
    return trial_batches(trials, per_variant)


def summarise(mech: HierarchicalPGSR, epsilon: float, batches: Sequence[TrialBatch]
              ) -> Evaluation:
    """One variant's :class:`Evaluation` from its trial batches (in trial order)."""
    trials = sum(len(b.rmse) for b in batches)
    levels = len(batches[0].err_sum)
    err_sum = [sum(b.err_sum[lev] for b in batches) for lev in range(levels)]
    err_sq = [sum(b.err_sq[lev] for b in batches) for lev in range(levels)]
    mse = tuple(s / trials for s in err_sq)
    bias = tuple(s / trials for s in err_sum)
    sd = tuple(np.sqrt(np.maximum(m - b * b, 0.0) * (trials / max(trials - 1, 1)))
               for m, b in zip(mse, bias, strict=True))
    k = mse[0].shape[1] if mse[0].ndim == 2 else 0
    heat = np.stack([m.mean(axis=0) for m in mse]) if k else np.zeros((levels, 0))
    release = batches[-1].last_release
    report = {key: release.report[key] for key in ("title", "measurement", "noise",
                                                   "epsilon_by_level", "scale_by_level",
                                                   "eps_dp") if key in release.report}
    if "warning" in release.report:
        report["warning"] = release.report["warning"]

    def joined(attr: str) -> np.ndarray:
        return np.concatenate([getattr(b, attr) for b in batches])

    return Evaluation(mech.variant, float(epsilon), trials, joined("rmse"), joined("by_level"),
                      joined("l1"), joined("violations"), joined("negative"), joined("seconds"),
                      heat, bias, sd, mse, release, report)


def evaluate(hierarchy: Hierarchy, mechanism: HierarchicalPGSR | str, epsilon: float,
             trials: int = 10, seed: int | None = None, progress: Progress | None = None,
             on_trial: Callable[[int, int], None] | None = None,
             executor: Executor | None = None) -> Evaluation:
    """Run ``trials`` independent releases and summarise their errors.

    Args:
        hierarchy: the true data.
        mechanism: a configured mechanism, or a variant name (default knobs).
        epsilon: total privacy budget per release.
        trials: Monte Carlo repetitions (>= 1).
        seed: None (default) draws every trial's noise from OS entropy; an integer makes
            trial t use ``np.random.default_rng([seed, t])`` (reproducible, not private).
        progress: reports one step per trial (cancellable between trials and inside; on an
            executor, between batches).
        on_trial: called as ``on_trial(done, trials)`` after every trial (every batch on an
            executor).
        executor: runs batches of trials on any ``concurrent.futures.Executor``; None runs
            them here. Seeded trials give the same values either way.
    """
    mech = HierarchicalPGSR(variant=mechanism) if isinstance(mechanism, str) else mechanism
    if not isinstance(trials, int | np.integer) or trials < 1:
        raise SpecError(f"trials: must be an integer >= 1, got {trials!r}")
    trials = int(trials)
    if executor is None or isinstance(executor, SerialExecutor):
        return summarise(mech, epsilon, [run_trials(hierarchy, mech, epsilon, 0, trials, seed,
                                                    progress, on_trial)])
    ranges = executor_batches(trials, executor)
    done = 0

    def finished(index: int, batch: TrialBatch) -> None:
        nonlocal done
        done += len(batch.rmse)
        if on_trial is not None:
            on_trial(done, trials)

    data = shared(executor, hierarchy)
    tasks = [(data, mech, epsilon, a, b, seed) for a, b in ranges]
    return summarise(mech, epsilon, map_ordered(executor, run_trials_task, tasks, finished,
                                                progress))


def compare_variants(hierarchy: Hierarchy, variants: Sequence[str], epsilon: float,
                     trials: int = 10, seed: int | None = None, progress: Progress | None = None,
                     **knobs: Any) -> list[Evaluation]:
    """:func:`evaluate` for several variants with shared knobs (split, noise, ...)."""
    out = []
    for v in variants:
        if v not in VARIANTS:
            raise SpecError(f"variants: unknown {v!r}; allowed: {', '.join(VARIANTS)}")
        out.append(evaluate(hierarchy, HierarchicalPGSR(variant=v, **knobs), epsilon, trials,
                            seed, progress))
    return out
