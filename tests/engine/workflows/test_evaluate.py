"""Runs against the truth: the adaptive comparison and the census Monte-Carlo trials, each
checked against the same numbers computed directly from the releases and the true data."""

from __future__ import annotations

import io

import numpy as np
import pytest

from engine.cli.census import census_command
from engine.data import Dataset
from engine.domain import Domain
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.executor import SerialExecutor, local_pool
from engine.mechanisms import get
from engine.mechanisms.aim_grem import run_residual_planner
from engine.mechanisms.hierarchical import HierarchicalPGSR
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from engine.mechanisms.hierarchical.monte_carlo import executor_batches
from engine.privacy import Privacy, cdp_rho
from engine.progress import Progress
from engine.workflows.evaluate import (
    AIM_GREM,
    CENSUS_VARIANTS,
    RESIDUAL_PLANNER,
    census_row,
    census_trials,
    compare_adaptive,
    example_hierarchy,
    load_hierarchy,
    pgm_available,
    synthetic_hierarchy,
)
from engine.workloads import PrefixBlock, Workload

DOMAIN = Domain.from_sizes([3, 2, 4, 2], ["a", "b", "c", "d"])
RHO = Privacy(noise="zcdp", rho=0.8)


@pytest.fixture(scope="module")
def data() -> Dataset:
    return Dataset.synthetic(DOMAIN, 2000, rng=3, correlation=0.4)


def direct_errors(estimates, data: Dataset, workload: Workload, clip: bool = False):
    """Mean L1, mean L2, max L1 (counts) of the estimates against counted true marginals."""
    l1s, l2s = [], []
    for term in workload.terms:
        true = data.marginal([DOMAIN.names[i] for i in term.attrs])
        est = np.asarray(estimates[term.attrs], dtype=float)
        diff = (np.maximum(est, 0.0) if clip else est) - true
        l1s.append(np.abs(diff).sum())
        l2s.append(np.sqrt((diff**2).sum()))
    return np.mean(l1s), np.mean(l2s), np.max(l1s)


# ----- adaptive comparison ---------------------------------------------------------------------
def test_adaptive_errors_are_the_direct_ones(data):
    workload = Workload.marginals(DOMAIN, k=2)
    rounds, methods = [], []
    result = compare_adaptive(data, workload, RHO, max_rounds=6,
                              rng=np.random.default_rng(5),
                              on_round=lambda record, share: rounds.append(share),
                              on_method=methods.append)
    assert [run.method for run in result.runs] == [AIM_GREM, RESIDUAL_PLANNER] == methods
    assert result.rho == 0.8
    for run in result.runs:
        assert run.result.rho_spent == pytest.approx(0.8, rel=1e-12)
        mean_l1, mean_l2, max_l1 = direct_errors(run.result.estimates, data, workload)
        assert run.errors.mean_l1 == pytest.approx(mean_l1, rel=1e-12)
        assert run.errors.mean_l2 == pytest.approx(mean_l2, rel=1e-12)
        assert run.errors.max_l1 == pytest.approx(max_l1, rel=1e-12)
        assert run.errors.records == 2000 and run.errors.marginals == 6
        row = run.row()
        assert row["mean L1 / N"] == pytest.approx(mean_l1 / 2000, rel=1e-12)
        assert row["rounds"] == len(run.result.rounds) and row["post-processing"] == "raw"
    assert result.rows() == [run.row() for run in result.runs]
    # one report per AIM+GReM round, the budget share growing to all of it
    assert len(rounds) == len(result.runs[0].result.rounds) >= 1
    assert rounds == sorted(rounds) and rounds[-1] == pytest.approx(1.0, rel=1e-12)


def test_each_method_has_its_own_spawned_stream(data):
    workload = Workload.marginals(DOMAIN, k=2)
    both = compare_adaptive(data, workload, RHO, max_rounds=4, rng=np.random.default_rng(9))
    alone = compare_adaptive(data, workload, RHO, max_rounds=4, rng=np.random.default_rng(9),
                             residual_planner=False)
    aim_stream, rp_stream, _ = np.random.default_rng(9).spawn(3)
    direct = get("aim-grem", max_rounds=4).run(workload, RHO, data, aim_stream)
    for gamma, estimate in direct.estimates.items():
        np.testing.assert_array_equal(both.runs[0].result.estimates[gamma], estimate)
        np.testing.assert_array_equal(alone.runs[0].result.estimates[gamma], estimate)
    rp = run_residual_planner(workload, RHO, data, rp_stream)
    for gamma, estimate in rp.estimates.items():
        np.testing.assert_array_equal(both.runs[1].result.estimates[gamma], estimate)
    assert len(alone.runs) == 1


def test_post_processing_is_applied_before_scoring():
    few = Dataset.synthetic(DOMAIN, 40, rng=1)  # small counts: the noise makes some negative
    workload = Workload.marginals(DOMAIN, k=2)
    clipped = compare_adaptive(few, workload, Privacy(noise="zcdp", rho=0.01),
                               post_processing="clip", max_rounds=3,
                               rng=np.random.default_rng(3))
    for run in clipped.runs:
        assert run.post_processing == "clip"
        mean_l1, _, _ = direct_errors(run.result.estimates, few, workload, clip=True)
        assert run.errors.mean_l1 == pytest.approx(mean_l1, rel=1e-12)
        raw_l1, _, _ = direct_errors(run.result.estimates, few, workload)
        assert any((m < 0).any() for m in run.result.estimates.values())  # something to clip
        assert run.errors.mean_l1 < raw_l1  # clipping at 0 only moves counts towards the truth


def test_gaussian_budget_and_fresh_entropy(data):
    workload = Workload.marginals(DOMAIN, k=2)
    privacy = Privacy(noise="gaussian", epsilon=1.0, delta=1e-9)
    first = compare_adaptive(data, workload, privacy, max_rounds=3, residual_planner=False)
    second = compare_adaptive(data, workload, privacy, max_rounds=3, residual_planner=False)
    assert first.rho == pytest.approx(cdp_rho(1.0, 1e-9), rel=1e-12)
    assert first.runs[0].result.rho_spent == pytest.approx(first.rho, rel=1e-12)
    gamma = next(iter(first.runs[0].result.estimates))
    # rng=None draws OS entropy: two runs add different noise
    assert not np.array_equal(first.runs[0].result.estimates[gamma],
                              second.runs[0].result.estimates[gamma])


def test_adaptive_input_errors(data):
    workload = Workload.marginals(DOMAIN, k=2)
    with pytest.raises(SpecError, match=r"^post_processing: unknown 'clamp'"):
        compare_adaptive(data, workload, RHO, post_processing="clamp")
    with pytest.raises(NotApplicable, match="not pure eps-DP"):
        compare_adaptive(data, workload, Privacy(noise="laplace"))
    with pytest.raises(NotApplicable, match="answers marginal workloads only"):
        compare_adaptive(data, Workload.one_dim(PrefixBlock(4)), RHO)
    other = Dataset.synthetic(Domain.from_sizes([3, 2], ["a", "b"]), 10, rng=0)
    with pytest.raises(SpecError, match=r"^data: its domain"):
        compare_adaptive(other, workload, RHO)
    if not pgm_available():
        with pytest.raises(NotApplicable, match=r"install \.\[pgm\]"):
            compare_adaptive(data, workload, RHO, pgm=True)


def test_a_cancelled_comparison_returns_nothing(data):
    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        compare_adaptive(data, Workload.marginals(DOMAIN, k=2), RHO, progress=progress,
                         rng=np.random.default_rng(0))


# ----- census trials ---------------------------------------------------------------------------
SPEC = "levels=1,2,4;groups=200;max_size=5;seed=0"


def direct_rmse(release, hierarchy) -> float:
    cells = sum(np.asarray(t).size for t in hierarchy.levels)
    sse = sum(((np.asarray(r, float) - t) ** 2).sum()
              for r, t in zip(release.levels, hierarchy.levels, strict=True))
    return float(np.sqrt(sse / cells))


def test_census_trials_are_the_direct_releases():
    hierarchy = synthetic_hierarchy(SPEC)
    ticks, finished = [], []
    run = census_trials(hierarchy, ["topdown", "dp"], 1.0, 3, seed=7,
                        on_trial=lambda v, t, share: ticks.append((v, t, share)),
                        on_variant=lambda ev: finished.append(ev.variant))
    assert list(run.evaluations) == ["dp", "topdown"] == finished  # CENSUS_VARIANTS order
    assert [(v, t) for v, t, _ in ticks] == [("dp", 1), ("dp", 2), ("dp", 3), ("topdown", 1),
                                             ("topdown", 2), ("topdown", 3)]
    assert [share for *_, share in ticks] == pytest.approx([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6,
                                                            1.0])
    for variant, ev in run.evaluations.items():
        mech = HierarchicalPGSR(variant=variant)
        direct = [direct_rmse(mech.release(hierarchy, 1.0, np.random.default_rng([7, t])),
                              hierarchy) for t in range(3)]
        np.testing.assert_allclose(ev.rmse_trials, direct, rtol=1e-12)
        assert ev.rmse == pytest.approx(np.mean(direct), rel=1e-12)
    rows = run.rows()
    assert [r["variant"] for r in rows] == ["dp", "topdown"]
    assert rows[0] == census_row(run.evaluations["dp"])
    assert rows[0]["rmse"] == pytest.approx(run.evaluations["dp"].rmse, rel=1e-15)
    assert {"rmse_level_1", "rmse_level_2", "rmse_level_3"} <= set(rows[0])
    assert rows[0]["violations"] == 0  # M_DP releases are consistent


def test_census_batches_are_two_per_worker_over_all_variants():
    # one variant on two workers: four contiguous batches covering every trial once; two
    # or three variants share the four (rounded up per variant); never an empty batch
    with local_pool(2) as pool:
        assert executor_batches(200, pool) == [(0, 50), (50, 100), (100, 150), (150, 200)]
        assert executor_batches(9, pool, variants=2) == [(0, 4), (4, 9)]
        assert executor_batches(9, pool, variants=3) == [(0, 4), (4, 9)]
        assert executor_batches(1, pool) == [(0, 1)]
    assert executor_batches(7, SerialExecutor()) == [(0, 4), (4, 7)]


def test_census_trials_match_the_cli():
    class Args:
        variant, epsilon, trials, seed, synthetic, split = "cdp", 0.5, 2, 4, SPEC, "uniform"

    document = census_command(Args())
    run = census_trials(synthetic_hierarchy(SPEC), ["cdp"], 0.5, 2, seed=4)
    assert document["rmse"] == pytest.approx(run.evaluations["cdp"].rmse, rel=1e-15)
    assert document["rmse_by_level"] == pytest.approx(
        run.evaluations["cdp"].rmse_by_level.tolist(), rel=1e-15)


def test_census_seed_none_draws_fresh_entropy():
    hierarchy = synthetic_hierarchy(SPEC)
    first = census_trials(hierarchy, ["dp"], 1.0, 1).evaluations["dp"]
    second = census_trials(hierarchy, ["dp"], 1.0, 1).evaluations["dp"]
    assert first.rmse_trials[0] != second.rmse_trials[0]


def test_hierarchies_load_and_bad_choices_are_one_line_errors():
    hierarchy = synthetic_hierarchy(SPEC)
    text = io.StringIO()
    write_hierarchy_csv(hierarchy, text)
    again = load_hierarchy(io.StringIO(text.getvalue()))
    assert again.tree.level_sizes == hierarchy.tree.level_sizes
    for a, b in zip(again.levels, hierarchy.levels, strict=True):
        np.testing.assert_array_equal(a, b)
    assert example_hierarchy().total == 6
    assert tuple(CENSUS_VARIANTS) == ("dp", "cdp", "chain", "relaxed", "topdown", "gls")
    with pytest.raises(SpecError, match=r"^variants: unknown 'dpp' \(did you mean 'dp'\?\)"):
        census_trials(hierarchy, ["dpp"], 1.0, 1)
    with pytest.raises(SpecError, match=r"^variants: choose at least one variant$"):
        census_trials(hierarchy, [], 1.0, 1)
    with pytest.raises(SpecError, match=r"^trials: must be an integer >= 1"):
        census_trials(hierarchy, ["dp"], 1.0, 0, seed=1)
    with pytest.raises(SpecError, match=r"^synthetic"):
        synthetic_hierarchy("levels=2,3")
