"""Publishable tables: whole non-negative counts that agree across tables exactly, cells
named in the domain's values, margins whose 95 % intervals cover the raw estimates' truth
95 % of the time, and atomic CSV writing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from engine.domain import Domain
from engine.errors import SpecError
from engine.linalg.matrix import Dense, Identity
from engine.mechanisms import get
from engine.noise import SEEDED_LABEL
from engine.privacy import Privacy
from engine.workflows.tables import (
    MARGIN_Z,
    file_stems,
    forget_workloads,
    max_cells,
    publishable_tables,
)
from engine.workloads.blocks import IdentityBlock
from engine.workloads.spec import parse_workload
from engine.workloads.workload import Workload

GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
DOMAIN = Domain.from_spec({
    "age": {"bin_edges": [0, 10, 20, 30, 40, 50, 60], "kind": "numeric"},
    "sex": {"labels": ["female", "male"]},
    "race": {"labels": ["a", "b", "c", "d"]},
})


def _data(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(2.0, size=DOMAIN.size).astype(float)
    x[rng.random(DOMAIN.size) < 0.4] = 0.0  # sparse, as real cross-tabulations are
    return x


def _release(workload: Workload, mechanism: str, x: np.ndarray, seed: int, **options):
    plan = get(mechanism).plan(workload, GAUSSIAN)
    measurement = plan.measure(x, np.random.default_rng(seed))
    return plan, publishable_tables(
        workload, strategy=plan.strategy, measurements=measurement.y,
        noise_variances=np.asarray(measurement.noise_std) ** 2, total=int(x.sum()),
        per_query_variance=plan.variances(), **options)


@pytest.mark.parametrize("mechanism", ["identity", "hdmm-kron"])
def test_marginal_tables_are_whole_non_negative_and_consistent(mechanism):
    workload = Workload.marginals(DOMAIN, upto=2)
    x = _data()
    _, tables = _release(workload, mechanism, x, seed=1, raw_column=True)
    assert list(tables.frames) == ["total", "age", "sex", "race", "age x sex", "age x race",
                                   "sex x race"]
    total = int(x.sum())
    for name, frame in tables.frames.items():
        assert frame["estimate"].dtype == np.int64, name
        assert frame["estimate"].min() >= 0, name
        assert int(frame["estimate"].sum()) == total, name
        assert list(frame.columns[-3:]) == ["estimate", "margin_95", "raw"]
    for one in ("age", "sex", "race"):
        single = tables.frames[one].set_index(one)["estimate"]
        for name, frame in tables.frames.items():
            if " x " in name and one in name.split(" x "):
                summed = frame.groupby(one, sort=False)["estimate"].sum()
                assert summed.reindex(single.index).tolist() == single.tolist(), (one, name)


def test_cells_are_named_in_the_domains_values():
    workload = Workload.marginals(DOMAIN, upto=2)
    _, tables = _release(workload, "identity", _data(), seed=2)
    frames = tables.frames
    assert frames["total"]["total"].tolist() == ["total"]
    assert frames["age"]["age"].tolist() == ["0-9", "10-19", "20-29", "30-39", "40-49",
                                             "50-59"]
    assert frames["sex"]["sex"].tolist() == ["female", "male"]
    cross = frames["age x sex"]
    assert cross[["age", "sex"]].head(3).values.tolist() == [["0-9", "female"],
                                                            ["0-9", "male"],
                                                            ["10-19", "female"]]
    assert set(frames["sex x race"]["race"]) == {"a", "b", "c", "d"}
    assert all(isinstance(v, str) for v in cross["age"])


def test_ranges_prefixes_and_non_product_terms_stay_consistent():
    workload = parse_workload([{"product": {"age": "prefix", "sex": "total"}},
                               {"product": {"age": "identity", "sex": "identity"}},
                               {"affine": ["age", "race"]}], DOMAIN)
    x = _data(3)
    _, tables = _release(workload, "identity", x, seed=4)
    prefix = tables.frames["prefix(age) x total(sex)"]
    assert prefix["age"].tolist() == ["0-9", "0-19", "0-29", "0-39", "0-49", "total"]
    assert prefix["sex"].tolist() == ["total"] * 6
    cells = tables.frames["age x sex"]
    by_age = cells.groupby("age", sort=False)["estimate"].sum().to_numpy()
    np.testing.assert_array_equal(prefix["estimate"].to_numpy(), np.cumsum(by_age))
    assert prefix["estimate"].iloc[-1] == int(x.sum())
    affine = tables.frames["age + race <= c"]
    assert list(affine.columns) == ["query", "estimate", "margin_95"]
    assert affine["estimate"].dtype == np.int64
    assert affine["estimate"].is_monotonic_increasing
    assert affine["estimate"].iloc[-1] == int(x.sum())


def test_margins_are_the_plans_standard_deviations_in_counts():
    workload = Workload.marginals(DOMAIN, upto=1)
    plan, tables = _release(workload, "hdmm-kron", _data(), seed=5)
    sd = np.sqrt(plan.variances())
    margins = np.concatenate([f["margin_95"].to_numpy() for f in tables.frames.values()])
    # published to the hundredth of a person
    np.testing.assert_array_equal(margins, np.round(1.959963984540054 * sd, 2))
    assert MARGIN_Z["laplace"] == pytest.approx(2.1183, abs=1e-4)
    assert "unbiased raw estimate" in tables.method and "no privacy" in tables.method


def test_raw_intervals_cover_the_truth_95_percent():
    # Seeded Gaussian noise (tests only): over 300 releases of 33 marginal cells, the raw
    # estimate's 95 % interval holds the true count 95 % of the time, two-sided.
    workload = Workload.marginals(DOMAIN, upto=2)
    plan = get("hdmm-kron").plan(workload, GAUSSIAN)
    x = _data(6)
    truth = workload.answer(x)
    rng = np.random.default_rng(7)
    sd = plan.noise_std()
    inside = total = 0
    for _ in range(300):
        y = plan.strategy.matvec(x) + rng.normal(0.0, sd, size=plan.strategy.shape[0])
        tables = publishable_tables(workload, strategy=plan.strategy, measurements=y,
                                    noise_variances=sd**2, total=None,
                                    per_query_variance=plan.variances(),
                                    post_process="raw")
        raw = np.concatenate([f["raw"].to_numpy() for f in tables.frames.values()])
        margin = np.concatenate([f["margin_95"].to_numpy() for f in tables.frames.values()])
        inside += int((np.abs(raw - truth) <= margin).sum())
        total += raw.size
    assert 0.94 <= inside / total <= 0.96


def test_raw_keeps_only_the_unbiased_estimates():
    workload = Workload.marginals(DOMAIN, k=1)
    plan = get("identity").plan(workload, GAUSSIAN)
    y = Identity(DOMAIN.size).matvec(_data()) + 0.25
    tables = publishable_tables(workload, strategy=plan.strategy, measurements=y,
                                noise_variances=1.0, total=None,
                                per_query_variance=plan.variances(), post_process="raw")
    sex = tables.frames["sex"]
    assert list(sex.columns) == ["sex", "margin_95", "raw"]
    expected = workload.answer(y)[6:8]
    np.testing.assert_allclose(sex["raw"], expected, rtol=1e-12)
    assert tables.method.startswith("raw:")


def test_answers_without_a_strategy_are_fitted_as_they_are():
    # e.g. a mechanism that reconstructs its own way: the workload's answers are the data
    workload = Workload.marginals(DOMAIN, k=1)
    answers = workload.answer(_data(8)) + np.random.default_rng(9).normal(0, 2.0, 12)
    tables = publishable_tables(workload, strategy=None, measurements=answers,
                                noise_variances=4.0, total=None,
                                per_query_variance=np.full(12, 4.0))
    totals = {int(f["estimate"].sum()) for f in tables.frames.values()}
    assert len(totals) == 1
    assert abs(totals.pop() - answers.sum() / 3) <= 3


def test_weighted_terms_publish_plain_counts():
    workload = parse_workload([{"marginals": {"k": 1}, "weight": 2.0}], DOMAIN)
    x = _data(10)
    _, tables = _release(workload, "identity", x, seed=11, raw_column=True)
    sex = tables.frames["sex"]
    assert int(sex["estimate"].sum()) == int(x.sum())
    assert abs(sex["raw"].sum() - x.sum()) < 10 * sex["margin_95"].iloc[0]


def test_write_is_atomic_csv_with_labels(tmp_path):
    workload = Workload.marginals(DOMAIN, upto=2)
    _, tables = _release(workload, "identity", _data(), seed=12)
    paths = tables.write(tmp_path / "out")
    csvs = [p for p in paths if p.suffix == ".csv"]
    assert [p.name for p in csvs] == ["total.csv", "age.csv", "sex.csv", "race.csv",
                                      "age_x_sex.csv", "age_x_race.csv", "sex_x_race.csv"]
    back = pd.read_csv(tmp_path / "out" / "age_x_sex.csv")
    assert back.columns.tolist() == ["age", "sex", "estimate", "margin_95"]
    assert back["estimate"].tolist() == tables.frames["age x sex"]["estimate"].tolist()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
    tables.write(tmp_path / "seeded", notice=SEEDED_LABEL)
    text = (tmp_path / "seeded" / "sex.csv").read_text().splitlines()
    assert text[:2] == [f"# {SEEDED_LABEL}", "sex,estimate,margin_95"]


def test_write_refuses_a_file_as_directory(tmp_path):
    tables = publishable_tables(Workload.marginals(DOMAIN, k=1), strategy=Identity(48),
                                measurements=np.ones(48), noise_variances=1.0, total=48,
                                per_query_variance=np.ones(12))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SpecError, match="tables: cannot create"):
        tables.write(blocker)


def test_file_stems_are_distinct():
    assert file_stems(["age x sex", "age x sex", "|a - b| <= c"]) == ["age_x_sex",
                                                                      "age_x_sex_2",
                                                                      "a_-_b_c"]


def test_bad_input_gets_one_line_naming_the_field():
    workload = Workload.marginals(DOMAIN, k=1)
    common = dict(strategy=Identity(48), measurements=np.ones(48), noise_variances=1.0,
                  total=48)
    with pytest.raises(SpecError, match="post_process: unknown 'rounded'"):
        publishable_tables(workload, per_query_variance=np.ones(12), post_process="rounded",
                           **common)
    with pytest.raises(SpecError, match="per_query_variance: expected 12"):
        publishable_tables(workload, per_query_variance=np.ones(3), **common)
    with pytest.raises(SpecError, match="noise: unknown"):
        publishable_tables(workload, per_query_variance=np.ones(12), noise="cauchy", **common)


def test_a_domain_too_large_for_a_data_vector_is_refused(monkeypatch):
    big = Domain.from_sizes([10**5] * 4)
    workload = Workload.marginals(big, k=1)
    # W A^+ y needs the data vector
    with pytest.raises(SpecError, match=r"tables: the domain has 1e\+20 cells; .* at most "):
        publishable_tables(workload, strategy=workload.matrix, measurements=np.ones(4 * 10**5),
                           noise_variances=1.0, total=None,
                           per_query_variance=np.ones(4 * 10**5))
    # a 3-way table without mbi: the raw answers, and why
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 10)
    monkeypatch.setattr("engine.workflows.model_tables.model_available", lambda: False)
    three = Workload.marginals(DOMAIN, k=3)
    tables = publishable_tables(three, strategy=None, measurements=np.ones(48),
                                noise_variances=1.0, total=None, per_query_variance=np.ones(48))
    assert list(tables.frames["age x sex x race"].columns) == ["age", "sex", "race",
                                                               "margin_95", "raw"]
    assert tables.method.startswith("raw: ")
    assert tables.method.endswith(
        "The domain has 48 cells, more than the 10 whose one count per cell fits in memory: "
        "raw only; install the pgm extra (pip install 'dpworkbench[pgm]': mbi with JAX) to "
        "publish consistent whole counts from a graphical model instead.")
    monkeypatch.undo()
    assert 0 < max_cells() <= 50_000_000
    assert math.isfinite(max_cells())


def test_a_domain_too_large_with_tables_that_are_not_marginals_publishes_raw(monkeypatch):
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 10)
    workload = parse_workload([{"product": {"age": "prefix", "sex": "total"}}], DOMAIN)
    tables = publishable_tables(workload, strategy=None, measurements=np.arange(6.0),
                                noise_variances=1.0, total=None, per_query_variance=np.ones(6))
    assert tables.method.endswith(
        "The domain has 48 cells, more than the 10 whose one count per cell fits in memory: "
        "raw only; the graphical-model route takes plain marginal tables only.")


def test_every_work_limit_gives_consistent_counts_and_says_how_far_the_fit_went():
    workload = Workload.marginals(DOMAIN, upto=2)
    x = _data(13)
    _, exact = _release(workload, "hdmm-kron", x, seed=14, work_limit=None)
    _, quick = _release(workload, "hdmm-kron", x, seed=14, work_limit=0)
    assert "converged to the optimum" in exact.method
    assert "projected onto non-negative counts" in quick.method
    for tables in (exact, quick):
        assert {int(f["estimate"].sum()) for f in tables.frames.values()} == {int(x.sum())}
        sex = tables.frames["sex"].set_index("sex")["estimate"]
        by_sex = tables.frames["sex x race"].groupby("sex")["estimate"].sum()
        assert by_sex.reindex(sex.index).tolist() == sex.tolist()


def test_without_a_public_total_every_table_sums_to_the_least_squares_total():
    # 10,000 cells, 2,000 records: clipping the noisy least-squares start at zero keeps the
    # positive noise of every empty cell, and a fit stopped at its work limit over the
    # orthant alone stays far above (or, later, below) the data's total; the fit therefore
    # takes the least-squares total first (the TopDown route's top level)
    domain = Domain.from_spec({a: {"size": 10, "kind": "categorical"} for a in "abcd"})
    workload = Workload.marginals(domain, upto=2)
    rng = np.random.default_rng(21)
    x = np.bincount(rng.integers(0, 400, size=2000) * 25, minlength=domain.size).astype(float)
    plan = get("hdmm-kron").plan(workload, GAUSSIAN)
    measurement = plan.measure(x, np.random.default_rng(22))
    variances = np.asarray(measurement.noise_std) ** 2
    common = dict(strategy=plan.strategy, measurements=measurement.y, noise_variances=variances,
                  per_query_variance=plan.variances(), work_limit=6 * domain.size,
                  fit_space="cells")
    hidden = publishable_tables(workload, total=None, **common)
    public = publishable_tables(workload, total=2000, **common)
    estimate = float(np.asarray(plan.strategy.pinv().matvec(measurement.y)).sum())
    assert {int(f["estimate"].sum()) for f in hidden.frames.values()} == {round(estimate)}
    assert abs(round(estimate) - 2000) < 60  # the total's standard deviation is about 10
    assert f"summing to {round(estimate):,}, the least-squares estimate of the total" in (
        hidden.method)
    truth = workload.answer(x)
    errors = [np.abs(np.concatenate([f["estimate"] for f in t.frames.values()]) - truth).mean()
              for t in (hidden, public)]
    assert errors[0] == pytest.approx(errors[1], rel=0.1)


def test_default_raw_weights_measurements_by_their_noise():
    # two measurements of one cell, the second 100 times noisier: the raw estimate is the
    # inverse-variance mean, not the plain one
    workload = Workload.one_dim(IdentityBlock(1))
    A = Dense(np.array([[1.0], [1.0]]))
    tables = publishable_tables(workload, strategy=A, measurements=np.array([10.0, 20.0]),
                                noise_variances=np.array([1.0, 100.0]), total=None,
                                per_query_variance=np.array([100 / 101]), post_process="raw")
    frame = next(iter(tables.frames.values()))
    assert frame["raw"].iloc[0] == pytest.approx((10 + 20 / 100) / (1 + 1 / 100), rel=1e-9)


def test_parquet_beside_csv_when_pyarrow_is_installed(tmp_path):
    pytest.importorskip("pyarrow")
    workload = Workload.marginals(DOMAIN, k=1)
    _, tables = _release(workload, "identity", _data(), seed=15)
    paths = tables.write(tmp_path)
    assert sorted(p.suffix for p in paths) == [".csv"] * 3 + [".parquet"] * 3
    back = pd.read_parquet(tmp_path / "sex.parquet")
    assert back["sex"].tolist() == ["female", "male"]
    assert back["estimate"].tolist() == tables.frames["sex"]["estimate"].tolist()


@pytest.mark.parametrize("occupied", [3, 40])
def test_tables_of_a_sparse_and_a_dense_estimate_are_its_exact_marginals(occupied):
    # whole non-negative measurements on the total are their own fit: every table must be
    # the data's marginal, whether summed from the few occupied cells or through the domain
    rng = np.random.default_rng(occupied)
    x = np.zeros(DOMAIN.size)
    x[rng.choice(DOMAIN.size, occupied, replace=False)] = rng.integers(1, 50, occupied)
    workload = Workload.marginals(DOMAIN, upto=3)
    tables = publishable_tables(workload, strategy=Identity(DOMAIN.size), measurements=x,
                                noise_variances=1.0, total=int(x.sum()),
                                per_query_variance=np.ones(workload.num_queries))
    cube = x.reshape(DOMAIN.shape)
    for term, frame in zip(workload.terms, tables.frames.values(), strict=True):
        drop = tuple(i for i in range(len(DOMAIN.shape)) if i not in term.attrs)
        expected = cube.sum(axis=drop).reshape(-1).astype(np.int64)
        assert frame["estimate"].dtype == np.int64
        np.testing.assert_array_equal(frame["estimate"].to_numpy(), expected)


def test_label_columns_of_mixed_factors_spread_each_attributes_values() -> None:
    # an identity factor's values shared across tables of the same sizes around it, a
    # prefix factor's by position: each attribute's values repeated by the sizes after it
    # and tiled by those before, whatever the route
    workload = parse_workload([{"product": {"sex": "identity", "age": "prefix",
                                            "race": "identity"}},
                               {"product": {"age": "identity", "race": "identity"}}], DOMAIN)
    forget_workloads()
    _, tables = _release(workload, "identity", _data(5), seed=6)
    mixed = tables.frames["prefix(age) x identity(sex) x identity(race)"]
    prefixes = ["0-9", "0-19", "0-29", "0-39", "0-49", "total"]
    assert mixed["age"].tolist() == [p for p in prefixes for _ in range(8)]
    assert mixed["sex"].tolist() == (["female"] * 4 + ["male"] * 4) * 6
    assert mixed["race"].tolist() == ["a", "b", "c", "d"] * 12
    pairs = tables.frames["age x race"]
    assert pairs["race"].tolist() == ["a", "b", "c", "d"] * 6
    assert [str(d) for d in mixed.dtypes][:3] == ["str"] * 3
