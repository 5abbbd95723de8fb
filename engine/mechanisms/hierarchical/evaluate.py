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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import SpecError
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


def evaluate(hierarchy: Hierarchy, mechanism: HierarchicalPGSR | str, epsilon: float,
             trials: int = 10, seed: int | None = None, progress: Progress | None = None,
             on_trial: Callable[[int, int], None] | None = None) -> Evaluation:
    """Run ``trials`` independent releases and summarise their errors.

    Args:
        hierarchy: the true data.
        mechanism: a configured mechanism, or a variant name (default knobs).
        epsilon: total privacy budget per release.
        trials: Monte Carlo repetitions (>= 1).
        seed: None (default) draws every trial's noise from OS entropy; an integer makes
            trial t use ``np.random.default_rng([seed, t])`` (reproducible, not private).
        progress: reports one step per trial (cancellable between trials and inside).
        on_trial: called as ``on_trial(done, trials)`` after every trial.
    """
    mech = HierarchicalPGSR(variant=mechanism) if isinstance(mechanism, str) else mechanism
    if not isinstance(trials, int | np.integer) or trials < 1:
        raise SpecError(f"trials: must be an integer >= 1, got {trials!r}")
    L, k = hierarchy.tree.depth, hierarchy.sizes.k
    rmse = np.empty(trials)
    by_level = np.empty((trials, L))
    l1 = np.empty((trials, L))
    viol = np.empty(trials)
    neg = np.empty(trials)
    secs = np.empty(trials)
    err_sum = [np.zeros(a.shape) for a in hierarchy.levels]
    err_sq = [np.zeros(a.shape) for a in hierarchy.levels]
    release = None
    for t in range(trials):
        start = time.perf_counter()
        rng = release_rng() if seed is None else np.random.default_rng([seed, t])
        release = mech.release(hierarchy, epsilon, rng, progress)
        secs[t] = time.perf_counter() - start
        stats = release_errors(release, hierarchy)
        rmse[t], by_level[t], l1[t] = stats["rmse"], stats["rmse_by_level"], stats["l1_by_level"]
        checks = release.checks
        viol[t], neg[t] = checks["violations"], checks["negative"]
        for lev, (a, b) in enumerate(zip(release.levels, hierarchy.levels, strict=True)):
            e = np.asarray(a, float) - b
            err_sum[lev] += e
            err_sq[lev] += e * e
        if progress is not None:
            progress.report(t + 1, float(rmse[t]), f"trial {t + 1}/{trials}")
        if on_trial is not None:
            on_trial(t + 1, trials)
    mse = tuple(s / trials for s in err_sq)
    bias = tuple(s / trials for s in err_sum)
    sd = tuple(np.sqrt(np.maximum(m - b * b, 0.0) * (trials / max(trials - 1, 1)))
               for m, b in zip(mse, bias, strict=True))
    heat = np.stack([m.mean(axis=0) for m in mse]) if k else np.zeros((L, 0))
    report = {key: release.report[key] for key in ("title", "measurement", "noise",
                                                   "epsilon_by_level", "scale_by_level",
                                                   "eps_dp") if key in release.report}
    if "warning" in release.report:
        report["warning"] = release.report["warning"]
    return Evaluation(mech.variant, float(epsilon), trials, rmse, by_level, l1, viol, neg,
                      secs, heat, bias, sd, mse, release, report)


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
