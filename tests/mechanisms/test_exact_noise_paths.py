"""Exact noise in the release paths outside the matrix mechanisms: the PGSR ``laplace`` kind
(discrete Laplace on the grid 2**-10) and AIM+PGM's measurements and selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from noise_checks import discrete_gaussian_pmf
from scipy import stats

from engine.mechanisms.aim_grem.aim import exponential_probabilities
from engine.mechanisms.aim_grem.pgm import noisy_counts, select_allowed
from engine.mechanisms.hierarchical.level_noise import (
    LAPLACE_GRID_EXPONENT,
    laplace_variance,
    sample_noise,
)
from engine.noise import release_rng


def test_pgsr_laplace_kind_is_discrete_laplace_on_the_grid() -> None:
    scale = 3.5
    draws = sample_noise("laplace", scale, (400, 500), release_rng(31))
    assert draws.shape == (400, 500) and draws.dtype == np.float64
    units = draws * 2**LAPLACE_GRID_EXPONENT
    assert np.array_equal(units, np.round(units))
    # variance below 2 lambda**2 by (g / lambda)**2 / 12 relatively: the continuous figure
    assert draws.var() == pytest.approx(laplace_variance(scale), rel=0.01)
    assert float(np.mean(np.abs(draws))) == pytest.approx(scale, rel=0.01)
    again = sample_noise("laplace", scale, 1000, release_rng(31))
    assert np.array_equal(again, sample_noise("laplace", scale, 1000, release_rng(31)))
    assert not np.array_equal(sample_noise("laplace", scale, 1000, release_rng()),
                              sample_noise("laplace", scale, 1000, release_rng()))


def test_pgm_measurements_add_discrete_gaussian_integers() -> None:
    counts = np.arange(200_000, dtype=float) % 37
    sigma2 = 6.25
    noisy = noisy_counts(counts, sigma2, release_rng(32))
    noise = noisy - counts
    assert np.array_equal(noise, np.round(noise))
    values, observed = np.unique(noise.astype(np.int64), return_counts=True)
    expected = counts.size * discrete_gaussian_pmf(values, math.sqrt(sigma2))
    keep = expected >= 5
    pooled = np.concatenate([observed[keep], [observed[~keep].sum()]])
    pooled_expected = np.concatenate([expected[keep], [counts.size - expected[keep].sum()]])
    assert stats.chisquare(pooled, pooled_expected).pvalue > 1e-4
    assert np.array_equal(noisy_counts(counts[:50], sigma2, release_rng(3)),
                          noisy_counts(counts[:50], sigma2, release_rng(3)))
    assert not np.array_equal(noisy_counts(counts[:50], sigma2, release_rng()),
                              noisy_counts(counts[:50], sigma2, release_rng()))


def test_pgm_selection_is_the_exponential_mechanism_over_allowed_candidates() -> None:
    scores = np.array([100.0, 95.0, 60.0, 99.0, 80.0])
    allowed = np.array([False, True, True, True, True])
    eps, sensitivity = 0.3, 10.0
    rng = release_rng(33)
    n = 20_000
    picks = np.bincount([select_allowed(scores, allowed, eps, sensitivity, rng)
                         for _ in range(n)], minlength=scores.size)
    assert picks[0] == 0  # never a disallowed candidate, however high its score
    p = exponential_probabilities(scores[allowed], eps, sensitivity)
    assert stats.chisquare(picks[allowed], n * p).pvalue > 1e-4


def test_adaptive_release_record_states_the_exact_noise(tmp_path) -> None:
    from engine.data import Dataset
    from engine.domain import Domain
    from engine.privacy import Privacy
    from engine.workflows.release import release
    from engine.workloads import Workload

    d = Domain.from_sizes([2, 3, 2])
    workload = Workload.marginals(d, k=2)
    privacy = Privacy(noise="zcdp", rho=1.0)
    data = Dataset.synthetic(d, 500, rng=0, correlation=0.5)
    record = release("aim-grem", data=data, workload=workload, privacy=privacy,
                     out=tmp_path / "release").record
    assert record["noise"]["sampler"] == "discrete_gaussian" and record["noise"]["exact"]
    assert "exponential_mechanism" in record["noise"]["selection"]
    assert sum(row["rho"] for row in record["ledger"]) == pytest.approx(1.0, abs=1e-12)
