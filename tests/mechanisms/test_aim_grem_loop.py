"""Spec aim_grem.md R13-R15 and end-to-end AIM+GReM runs: budget accounting exact to 1e-12,
recovery at a huge budget, the correlated toy against an independent baseline, the registered
mechanism, progress and cancellation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from engine.data import Dataset
from engine.domain import Domain
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.mechanisms import get, registry_names
from engine.mechanisms.aim_grem import (
    aim_grem,
    fixed_sequence,
    independent,
    residual_planner,
    run_residual_planner,
)
from engine.mechanisms.aim_grem.aim import (
    candidate_weights,
    exponential_probabilities,
    final_round,
    schedule,
)
from engine.mechanisms.aim_grem.baseline import residual_planner_variances
from engine.mechanisms.aim_grem.pgm import INSTALL_HINT, aim_pgm, available
from engine.privacy import Privacy, cdp_delta, cdp_rho
from engine.progress import Progress
from engine.workloads import PrefixBlock, Workload


def assert_budget(result, rho):
    """The ledger (initialisation + every round) sums to rho to 1e-12 relative."""
    assert abs(result.rho_spent - rho) <= 1e-12 * rho
    assert result.rho == rho


def counter(data):
    names = data.domain.names
    return lambda axes: data.marginal([names[i] for i in axes])


@pytest.fixture(scope="module")
def toy6():
    domain = Domain.from_sizes([3, 4, 2, 5, 3, 2])
    return Dataset.synthetic(domain, 2000, rng=1, correlation=0.6)


ALL3_6 = list(itertools.combinations(range(6), 3))

R13 = [(0.01, 2.095434396e-06), (0.1, 1.771384472e-04), (0.3, 1.476745361e-03),
       (1, 1.497305767e-02), (3, 1.205824289e-01), (10, 1.090785704), (30, 6.984532021),
       (100, 42.38021172)]


@pytest.mark.parametrize(("eps", "rho"), R13)
def test_r13_eps_delta_to_rho(eps, rho):
    assert cdp_rho(eps, 1e-9) == pytest.approx(rho, rel=1e-9)
    assert Privacy(noise="gaussian", epsilon=eps, delta=1e-9).zcdp_rho() == \
        pytest.approx(rho, rel=1e-9)


def test_r13_delta_of_rho():
    assert cdp_delta(0.5, 5.0) == pytest.approx(2.896123e-06, rel=1e-6)


def test_r14a_adult_parameters():
    rho = cdp_rho(1.0, 1e-9)
    s = schedule(rho, K=576, d=15)
    assert rho == pytest.approx(0.01497306, rel=1e-6)
    assert s.sigma0_sq == pytest.approx(42743.44, rel=1e-7)
    assert math.sqrt(s.sigma0_sq) == pytest.approx(206.745, rel=1e-6)
    assert s.rho_init == pytest.approx(1.169770e-05, rel=1e-6)
    assert 15 * s.rho_init == pytest.approx(1.754655e-04, rel=1e-6)
    assert s.epsilon0 == pytest.approx(3.224586e-03, rel=1e-6)
    assert s.round_cost == pytest.approx(1.299745e-05, rel=1e-6)
    assert s.round_cost == pytest.approx(rho / (2 * 576), rel=1e-12)
    pgm = schedule(rho, K=8 * 15, d=15)  # AIM+PGM's T = 16 d units
    assert pgm.sigma0_sq == pytest.approx(8904.883, rel=1e-6)
    assert pgm.epsilon0 == pytest.approx(7.064715e-03, rel=1e-6)


def test_r14b_toy_parameters():
    s = schedule(1.0, K=26, d=5)
    assert s.sigma0_sq == pytest.approx(28.888889, rel=1e-7)
    assert s.rho_init == pytest.approx(0.017308, rel=1e-4)
    assert 5 * s.rho_init == pytest.approx(0.086538, rel=1e-5)
    assert s.epsilon0 == pytest.approx(0.124035, rel=1e-5)
    assert s.round_cost == pytest.approx(1 / 52, rel=1e-12)
    assert (1.0 - 5 * s.rho_init) / s.round_cost == pytest.approx(2 * 26 - 0.9 * 5)


def test_r14c_final_round_spends_the_remainder():
    eps, sigma2 = final_round(0.01)
    assert eps == pytest.approx(0.0894427191, rel=1e-10)
    assert sigma2 == pytest.approx(55.5555555556, rel=1e-10)
    assert eps ** 2 / 8 + 1 / (2 * sigma2) == pytest.approx(0.01, rel=1e-15)


def test_r14d_weights_for_all_three_way():
    d = 15
    workload = list(itertools.combinations(range(d), 3))
    w = candidate_weights([(0,), (0, 1), (0, 1, 2)], workload)
    assert w.tolist() == [91, 182, 273]
    assert w.tolist() == [k * math.comb(d - 1, 2) for k in (1, 2, 3)]


def test_r15_exponential_mechanism():
    probs = exponential_probabilities(np.array([100.0, 90.0, 50.0]), 0.2, 10.0)
    np.testing.assert_allclose(probs, [0.398189, 0.360297, 0.241514], atol=5e-7)
    assert math.sqrt(2 / math.pi) == pytest.approx(0.7978846, abs=1e-7)
    with pytest.raises(ValueError, match="sensitivity"):
        exponential_probabilities(np.array([1.0]), 1.0, 0.0)


@pytest.mark.parametrize("rho", [0.001, 0.01, 0.1, 1.0])
def test_r14c_end_to_end_budget_and_error_decrease(toy6, rho):
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(0))
    assert_budget(result, rho)
    init = [c for what, c in result.ledger if what.startswith("init")]
    assert len(init) == 6 and init[0] == pytest.approx(0.45 * rho / 42, rel=1e-12)
    assert result.rounds[-1].final and not any(r.final for r in result.rounds[:-1])
    assert result.rounds[-1].rho_used == pytest.approx(rho, rel=1e-12)
    assert result.details["K"] == 42
    assert sum(r.rho_round for r in result.rounds) + sum(init) == pytest.approx(rho, rel=1e-12)


def test_error_decreases_with_rho(toy6):
    errors = []
    for rho in (0.001, 0.01, 0.1, 1.0):
        result = aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(0))
        assert_budget(result, rho)
        errors.append(result.errors(counter(toy6)).per_record("mean_l1"))
    assert errors == sorted(errors, reverse=True)


def test_huge_budget_recovers_every_marginal_within_one_count(toy6):
    rho = 1e4
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(2))
    assert_budget(result, rho)
    for gamma in ALL3_6:
        assert np.abs(result.estimates[gamma] - counter(toy6)(gamma)).max() < 1.0


def correlated_toy(records=3000, seed=7):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, size=records)
    noisy = rng.random((records, 2)) < 0.05  # 5% of values replaced at random
    y = np.where(noisy[:, 0], rng.integers(0, 3, size=records), x)
    z = np.where(noisy[:, 1], rng.integers(0, 3, size=records), (x + 1) % 3)
    domain = Domain.from_sizes([3, 3, 3], names=["a", "b", "c"])
    return Dataset.from_dataframe(pd.DataFrame({"a": x, "b": y, "c": z}), domain)


def test_correlated_toy_beats_independent_baseline_by_20x():
    data = correlated_toy()
    rho = 5.0
    workload = [(0, 1, 2)]
    ours = aim_grem(data.domain, workload, counter(data), rho, np.random.default_rng(3))
    base = independent(data.domain, workload, counter(data), rho, np.random.default_rng(3))
    assert_budget(ours, rho)
    assert_budget(base, rho)
    e_ours = ours.errors(counter(data)).mean_l1
    e_base = base.errors(counter(data)).mean_l1
    assert e_ours < 0.05 * e_base


@pytest.mark.parametrize(("measurement", "update"), [("crp", "lazy"), ("iid", "lazy"),
                                                     ("crp", "full"), ("iid", "full")])
def test_variants_spend_exactly_rho(toy6, measurement, update):
    rho = 0.3
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(4),
                      measurement=measurement, update=update)
    assert_budget(result, rho)
    if measurement == "iid":
        assert all(not r.skipped for r in result.rounds)


def test_lazy_and_full_updates_give_the_same_release(toy6):
    rho = 0.2
    runs = [aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(5),
                     update=u) for u in ("lazy", "full")]
    for r in runs:
        assert_budget(r, rho)
    assert [r.marginal for r in runs[0].rounds] == [r.marginal for r in runs[1].rounds]
    for g in ALL3_6:
        assert np.abs(runs[0].estimates[g] - runs[1].estimates[g]).max() < 1e-8


def test_seeded_runs_are_reproducible(toy6):
    a, b = (aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.1, np.random.default_rng(6))
            for _ in range(2))
    assert_budget(a, 0.1)
    assert a.round_table() == [dict(row, seconds=r["seconds"]) for row, r in
                               zip(b.round_table(), a.round_table(), strict=True)]
    for g in ALL3_6:
        assert np.array_equal(a.estimates[g], b.estimates[g])


def test_rounds_cap_spends_everything_by_the_last_round(toy6):
    rho = 1.0
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(7),
                      max_rounds=5)
    assert_budget(result, rho)
    assert len(result.rounds) <= 5 and result.rounds[-1].final
    assert result.details["units"] == pytest.approx(5 + 0.9 * 6)


def test_k_without_the_empty_set(toy6):
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.5, np.random.default_rng(8),
                      include_empty_in_K=False)
    assert_budget(result, 0.5)
    assert result.details["K"] == 41
    assert result.details["sigma0_sq"] == pytest.approx(41 / (0.9 * 0.5))


def test_progress_callback_and_cancellation(toy6):
    seen = []
    progress = Progress(lambda i, loss, msg: seen.append((i, loss, msg)))
    records = []
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.1, np.random.default_rng(9),
                      progress=progress, on_round=records.append)
    assert_budget(result, 0.1)
    assert [i for i, _, _ in seen] == list(range(1, len(result.rounds) + 1))
    assert records == list(result.rounds)
    assert seen[-1][1] == pytest.approx(result.errors(counter(toy6)).mean_l1, rel=1e-9)

    def stop_at_three(i, loss, msg):
        if i == 3:
            cancelling.cancel()

    cancelling = Progress(stop_at_three)
    with pytest.raises(Cancelled):
        aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.1, np.random.default_rng(9),
                 progress=cancelling)
    assert cancelling.iterations == 3


def test_round_log_fields(toy6):
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.05, np.random.default_rng(10))
    assert_budget(result, 0.05)
    rows = result.round_table()
    assert {"round", "marginal", "rho_round", "rho_used", "sigma", "expected_l1",
            "workload_error"} <= set(rows[0])
    used = [r.rho_used for r in result.rounds]
    assert used == sorted(used)
    for r in result.rounds:
        assert set(r.measured) | set(r.skipped) <= set(
            itertools.chain.from_iterable(
                itertools.combinations(r.marginal, k) for k in range(len(r.marginal) + 1)))
        assert r.expected_l1 > 0


def test_registered_mechanism_runs_on_a_dataset(toy6):
    assert "aim-grem" in registry_names()
    mech = get("aim-grem")
    assert mech.data_dependent
    workload = Workload.marginals(toy6.domain, k=2)
    privacy = Privacy(noise="gaussian", epsilon=1.0, delta=1e-9)
    with pytest.raises(NotApplicable, match="data-dependent"):
        mech.plan(workload, privacy)
    result = mech.run(workload, privacy, toy6, np.random.default_rng(11))
    rho = cdp_rho(1.0, 1e-9)
    assert_budget(result, rho)
    assert result.privacy is privacy
    assert set(result.estimates) == set(itertools.combinations(range(6), 2))
    errors = result.errors(counter(toy6))
    assert errors.records == 2000 and errors.marginals == 15
    assert set(errors.as_dict()) == {"mean L1 (counts)", "mean L2 (counts)", "max L1 (counts)",
                                     "mean L1 / N", "mean L2 / N", "max L1 / N"}
    baseline = run_residual_planner(workload, privacy, toy6, np.random.default_rng(11))
    assert_budget(baseline, rho)


def test_mechanism_refuses_what_it_cannot_serve(toy6):
    mech = get("aim-grem")
    rng = np.random.default_rng(0)
    prefix = Workload.product(toy6.domain, {"a1": PrefixBlock(3)})
    with pytest.raises(NotApplicable, match="marginal workloads only"):
        mech.run(prefix, Privacy(noise="zcdp", rho=1.0), toy6, rng)
    with pytest.raises(NotApplicable, match="pure eps-DP|laplace"):
        mech.run(Workload.marginals(toy6.domain, k=2), Privacy(noise="laplace"), toy6, rng)
    other = Dataset.synthetic(Domain.from_sizes([2, 2]), 10, rng=0)
    with pytest.raises(SpecError, match="differs"):
        mech.run(Workload.marginals(toy6.domain, k=2), Privacy(noise="zcdp", rho=1.0), other,
                 rng)


def test_residual_planner_baseline_budget_and_noise(toy6):
    rho = 0.7
    sigma2 = residual_planner_variances(ALL3_6, None, toy6.domain.shape, rho)
    assert len(sigma2) == 42
    result = residual_planner(toy6.domain, ALL3_6, counter(toy6), rho, np.random.default_rng(1))
    assert_budget(result, rho)
    # with a huge budget the batch baseline is exact too
    exact = residual_planner(toy6.domain, ALL3_6, counter(toy6), 1e9, np.random.default_rng(1))
    assert_budget(exact, 1e9)
    assert exact.errors(counter(toy6)).max_l1 < 0.5


def test_fixed_sequence_ablation_variants(toy6):
    rho = 0.4
    sequence = ALL3_6[::3]
    runs = {}
    for measurement, update in [("crp", "lazy"), ("iid", "lazy"), ("iid", "full")]:
        r = fixed_sequence(toy6.domain, ALL3_6, counter(toy6), rho, sequence,
                           np.random.default_rng(12), measurement=measurement, update=update)
        assert_budget(r, rho)
        runs[(measurement, update)] = r
    assert runs[("crp", "lazy")].details["skipped_residuals"] > 0
    lazy, full = runs[("iid", "lazy")], runs[("iid", "full")]
    for g in ALL3_6:  # same seed, same noise: lazy and full reconstruction agree
        assert np.abs(lazy.estimates[g] - full.estimates[g]).max() < 1e-8


def test_post_processing_is_labelled_and_keeps_raw_output(toy6):
    result = aim_grem(toy6.domain, ALL3_6, counter(toy6), 0.01, np.random.default_rng(13))
    assert_budget(result, 0.01)
    raw = result.post_processed("raw")
    assert any((m < 0).any() for m in raw.values())  # the paper's output may be negative
    clipped = result.post_processed("clip+rescale")
    for m in clipped.values():
        assert (m >= 0).all() and m.sum() == pytest.approx(result.total, rel=1e-9)
    frame = result.estimates_frame("clip")
    assert len(frame) == sum(m.size for m in raw.values())
    with pytest.raises(ValueError, match="allowed"):
        result.post_processed("round")


@pytest.mark.skipif(available(), reason="mbi is installed")
def test_aim_pgm_without_mbi_is_not_applicable(toy6):
    with pytest.raises(NotApplicable, match=r"install \.\[pgm\]"):
        aim_pgm(toy6.domain, ALL3_6, counter(toy6), 1.0, np.random.default_rng(0))
    assert "install .[pgm]" in INSTALL_HINT
