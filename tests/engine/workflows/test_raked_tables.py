"""Raked tables (``rake_marginals``, AIM+GReM's default post-processing): from raw 1- and
2-way tables that agree, whole non-negative counts that agree exactly and share one total, the
truth back without noise, a fallback to a least-squares fit for tables that disagree, and on
the Adaptive page's default Adult release counts closer to the truth than the raw estimates
and than the cell fit, on every seeded draw."""

from __future__ import annotations

import numpy as np
import pytest

from engine.data import Dataset, load_adult
from engine.domain import Domain
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workflows.adaptive_tables import adaptive_tables
from engine.workflows.marginal_fit import rake_marginals, tables_agree
from engine.workloads.workload import Workload

SHAPE = (6, 2, 4, 3)
#: a term in reverse attribute order, a 1-way term and the total beside the 2-way ones
TERMS = [(0, 1), (2, 0), (1, 2), (1, 3), (2, 3), (0,), (3,), ()]
ADAPTIVE_ATTRIBUTES = ("age", "workclass", "education-num", "sex", "race", "income>50K")


def _margins(x: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """Every term's table of ``x`` (axes in the term's order)."""
    tables = {}
    for attrs in TERMS:
        summed = x.sum(axis=tuple(a for a in range(x.ndim) if a not in attrs))
        tables[attrs] = np.transpose(summed, np.argsort(np.argsort(attrs))) if attrs else summed
    return tables


def test_raked_tables_are_whole_non_negative_and_agree_exactly() -> None:
    rng = np.random.default_rng(3)
    # a signed, fractional "estimate": its margins agree but hold negative cells
    x = rng.poisson(2.0, size=SHAPE) + rng.normal(0.0, 2.0, size=SHAPE)
    raw = _margins(x)
    assert tables_agree(raw) and min(t.min() for t in raw.values() if t.size > 1) < 0
    fit = rake_marginals(raw)
    total = round(float(x.sum()))
    assert fit.total == total and fit.raked
    assert sorted(fit.tables) == [(0,), (0, 1), (0, 2), (1,), (1, 2), (1, 3), (2,), (2, 3), (3,)]
    for attrs, table in fit.tables.items():
        assert table.dtype == np.int64 and (table >= 0).all() and table.sum() == total
        for i, a in enumerate(attrs):  # every 2-way table sums to its 1-way tables exactly
            assert np.array_equal(table.sum(axis=tuple(j for j in range(len(attrs)) if j != i)),
                                  fit.tables[(a,)])
    assert np.array_equal(fit.over((2, 0)), fit.tables[(0, 2)].T)
    assert fit.over(()).tolist() == [total]
    # each 1-way table: the estimate's, negative cells set to 0, scaled to the total and
    # rounded (every cell within 1 of that)
    for a in range(len(SHAPE)):
        share = np.clip(x.sum(axis=tuple(j for j in range(len(SHAPE)) if j != a)), 0, None)
        assert np.abs(fit.tables[(a,)] - share * total / share.sum()).max() < 1.0


def test_without_noise_raking_gives_the_truth_back() -> None:
    x = np.random.default_rng(4).poisson(1.5, size=SHAPE).astype(float)
    fit = rake_marginals(_margins(x))
    for attrs, table in _margins(x).items():
        assert np.array_equal(fit.over(attrs), table.astype(np.int64).reshape(-1)
                              if not attrs else table.astype(np.int64))


def test_tables_that_disagree_are_not_raked() -> None:
    raw = _margins(np.random.default_rng(5).normal(3.0, 1.0, size=SHAPE))
    assert tables_agree(raw)
    raw[(1, 3)] = raw[(1, 3)] + np.array([[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]])  # same total
    assert not tables_agree(raw)
    with pytest.raises(ValueError, match="^tables: raking takes 0-, 1- and 2-way"):
        rake_marginals({(0, 1, 2): np.zeros((6, 2, 4))})


def test_aim_grem_tables_that_disagree_fall_back_to_the_cell_fit() -> None:
    domain = Domain.from_sizes([3, 4, 2])
    data = Dataset.synthetic(domain, 300, rng=1, correlation=0.5)
    workload = Workload.marginals(domain, k=2)
    result = get("aim-grem", max_rounds=3).run(workload, Privacy(noise="zcdp", rho=1.0), data,
                                               np.random.default_rng(0))
    assert adaptive_tables(workload, result).method.startswith(
        "consistent: whole counts fitted to the released GReM-MLE marginals by raking")
    result.estimates[(0, 1)][0, 0] += 5.0  # no longer a margin of one estimate
    tables = adaptive_tables(workload, result)
    assert tables.method.startswith("consistent: one non-negative estimate of the data")
    assert len({int(f["estimate"].sum()) for f in tables.frames.values()}) == 1


def _adult_errors(epsilon: float, seeds: range) -> np.ndarray:
    """Per seeded draw of the Adaptive page's default release (Adult, six attributes, all
    2-way marginals, delta 1e-9): the mean absolute error over every cell of the raw
    estimates, the raked counts and the cell fit's counts."""
    data = load_adult().project(ADAPTIVE_ATTRIBUTES)
    workload = Workload.marginals(data.domain, k=2)
    names = data.domain.names
    truth = np.concatenate([np.asarray(data.marginal([names[a] for a in t.attrs]), float)
                            .reshape(-1) for t in workload.terms])
    privacy = Privacy(noise="gaussian", epsilon=epsilon, delta=1e-9)
    errors = []
    for seed in seeds:
        result = get("aim-grem").run(workload, privacy, data, np.random.default_rng(seed))
        row = []
        for fit_space in ("auto", "cells"):
            frames = adaptive_tables(workload, result, fit_space=fit_space).frames.values()
            if fit_space == "auto":
                raw = np.concatenate([f["raw"].to_numpy() for f in frames])
                row.append(np.abs(raw - truth).mean())
            counts = np.concatenate([f["estimate"].to_numpy() for f in frames])
            row.append(np.abs(counts - truth).mean())
        errors.append(row)
    return np.array(errors)


@pytest.mark.slow
@pytest.mark.parametrize(("epsilon", "seeds", "to_raw", "to_cells"), [
    (1.0, range(5), (0.64, 0.72), (0.93, 0.99)),
    (4.0, range(3), (0.70, 0.80), (0.48, 0.58))])
def test_raked_adult_counts_beat_the_raw_estimates_and_the_cell_fit(epsilon, seeds, to_raw,
                                                                    to_cells) -> None:
    raw, raked, cells = _adult_errors(epsilon, seeds).T
    assert (raked < raw).all() and (raked < cells).all()
    assert to_raw[0] <= raked.mean() / raw.mean() <= to_raw[1], raked.mean() / raw.mean()
    assert to_cells[0] <= raked.mean() / cells.mean() <= to_cells[1], raked.mean() / cells.mean()
