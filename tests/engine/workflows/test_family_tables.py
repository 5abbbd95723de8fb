"""The published tables of AIM+GReM and census hierarchy releases: labelled, whole,
non-negative, exactly consistent counts; margins whose raw intervals cover the truth about
95 % of the time; and methods that never claim a consistency the counts lack."""

from __future__ import annotations

import numpy as np
import pytest

from engine.data import Dataset
from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hierarchical import HierarchicalPGSR
from engine.mechanisms.hierarchical.level_noise import halfwidth_95, sample_noise
from engine.mechanisms.hierarchical.synthetic import synthetic_census
from engine.privacy import Privacy
from engine.workflows.adaptive_tables import SAMPLER_VARIANCE_FACTOR, adaptive_tables
from engine.workflows.census_tables import hierarchy_tables
from engine.workflows.tables import MARGIN_Z
from engine.workloads.workload import Workload

DOMAIN = Domain.from_spec({"sex": {"labels": ["female", "male"]},
                           "age": {"kind": "numeric", "bin_edges": [0, 30, 40, 50, 65, 100]},
                           "smoker": {"labels": ["no", "yes"]}})
ZCDP = Privacy(noise="zcdp", rho=0.5)
HIERARCHY = synthetic_census("levels=1,3,8;groups=600;max_size=6;seed=3")


def _aim(seed: int, data: Dataset, workload: Workload):
    return get("aim-grem", max_rounds=4).run(workload, ZCDP, data, np.random.default_rng(seed))


@pytest.mark.parametrize(("fit_space", "route"), [
    ("auto", "consistent: whole counts fitted to the released GReM-MLE marginals by raking"),
    ("cells", "consistent: one non-negative estimate of the data"),
    ("marginals", "consistent: non-negative 1- and 2-way tables")])
def test_aim_grem_tables_are_labelled_whole_and_agree_exactly(fit_space, route) -> None:
    data = Dataset.synthetic(DOMAIN, 500, rng=1, correlation=0.6)
    workload = Workload.marginals(DOMAIN, k=2)
    result = _aim(0, data, workload)
    tables = adaptive_tables(workload, result, fit_space=fit_space)
    assert list(tables.frames) == ["sex x age", "sex x smoker", "age x smoker"]
    pair = tables.frames["sex x age"]
    assert list(pair.columns) == ["sex", "age", "estimate", "margin_95", "raw"]
    assert pair["sex"].tolist() == ["female"] * 5 + ["male"] * 5
    assert pair["age"].tolist() == ["0-29", "30-39", "40-49", "50-64", "65-99"] * 2
    totals = set()
    for frame in tables.frames.values():
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        totals.add(int(frame["estimate"].sum()))
    assert len(totals) == 1 and abs(totals.pop() - 500) < 40
    # every 1-way marginal is the same from each 2-way table that holds it
    for attr, tables_with in (("sex", ["sex x age", "sex x smoker"]),
                              ("age", ["sex x age", "age x smoker"]),
                              ("smoker", ["sex x smoker", "age x smoker"])):
        sums = [tables.frames[t].groupby(attr, sort=False)["estimate"].sum().tolist()
                for t in tables_with]
        assert sums[0] == sums[1]
    # raw is the mechanism's own estimate; the margin its 1.96 sd
    gamma = (0, 1)
    assert np.allclose(pair["raw"], result.estimates[gamma].reshape(-1), rtol=0, atol=1e-12)
    sd = np.sqrt(SAMPLER_VARIANCE_FACTOR * result.details["cell_variance"][gamma])
    assert pair["margin_95"].iloc[0] == pytest.approx(round(MARGIN_Z["zcdp"] * sd, 2), abs=0)
    assert tables.method.startswith(route)
    assert "the released GReM-MLE marginals" in tables.method


def test_aim_grem_method_names_the_tables_with_unmeasured_residuals() -> None:
    data = Dataset.synthetic(DOMAIN, 500, rng=1, correlation=0.6)
    workload = Workload.marginals(DOMAIN, k=2)
    result = get("aim-grem", max_rounds=1).run(workload, ZCDP, data, np.random.default_rng(2))
    unmeasured = [result.label(g) for g, taus in result.details["unmeasured"].items() if taus]
    assert len(unmeasured) >= 2  # one round measures at most one 2-way residual
    tables = adaptive_tables(workload, result)
    assert f"in {', '.join(unmeasured)} some residuals were never measured" in tables.method


def test_aim_grem_raw_post_processing_keeps_only_raw_and_margins() -> None:
    data = Dataset.synthetic(DOMAIN, 300, rng=4)
    workload = Workload.marginals(DOMAIN, k=1)
    tables = adaptive_tables(workload, _aim(1, data, workload), post_process="raw")
    assert list(tables.frames["age"].columns) == ["age", "margin_95", "raw"]
    assert tables.method.startswith("raw: ")


def test_aim_grem_raw_one_way_intervals_cover_about_95_percent() -> None:
    # every 1-way residual is measured at the start, so the 1-way raw estimates are unbiased
    data = Dataset.synthetic(DOMAIN, 400, rng=5, correlation=0.5)
    workload = Workload.marginals(DOMAIN, upto=1)
    truth = {name: np.asarray(data.marginal([name]), float) for name in DOMAIN.names}
    hits = cells = 0
    for seed in range(150):
        tables = adaptive_tables(workload, _aim(seed, data, workload), post_process="raw")
        for name in DOMAIN.names:
            frame = tables.frames[name]
            hits += int(np.sum(np.abs(frame["raw"] - truth[name]) <= frame["margin_95"]))
            cells += len(frame)
    # 1,350 intervals: 95 % +- 3 standard errors (0.6 %)
    assert 0.93 <= hits / cells <= 0.97, hits / cells


@pytest.mark.parametrize("variant", ["dp", "cdp", "chain", "topdown"])
def test_consistent_census_variants_publish_whole_consistent_counts(variant) -> None:
    mech = HierarchicalPGSR(variant=variant)
    measurement = mech.measure(HIERARCHY, 1.0, np.random.default_rng(7))
    released = mech.postprocess(HIERARCHY.tree, HIERARCHY.sizes, HIERARCHY.total, measurement)
    tables = hierarchy_tables(released, measurement)
    assert list(tables.frames) == ["nation", "state", "county"]
    county = tables.frames["county"]
    assert list(county.columns) == ["nation", "state", "county", "size", "estimate",
                                    "margin_95", "raw"]
    assert county["size"].tolist()[:7] == ["0", "1", "2", "3", "4", "5", "6+"]
    for frame in tables.frames.values():
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        assert int(frame["estimate"].sum()) == 600 and (frame["margin_95"] > 0).all()
    state = tables.frames["state"]
    children = county.groupby(["state", "size"], sort=False)["estimate"].sum()
    assert children.tolist() == state["estimate"].tolist()
    by_size = state.groupby("size", sort=False)["estimate"].sum()
    assert by_size.tolist() == tables.frames["nation"]["estimate"].tolist()
    assert "is consistent: every parent count equals the sum of its children's" in tables.method
    assert "whole counts; non-negative" in tables.method


def test_relaxed_and_gls_do_not_claim_what_they_lack() -> None:
    rng = np.random.default_rng(3)
    gls = HierarchicalPGSR(variant="gls")
    m = gls.measure(HIERARCHY, 0.5, rng)
    tables = hierarchy_tables(gls.postprocess(HIERARCHY.tree, HIERARCHY.sizes, 600, m), m)
    assert "estimate" not in tables.frames["county"].columns
    assert "'fitted' column is consistent" in tables.method
    assert "not whole counts" in tables.method
    relaxed = HierarchicalPGSR(variant="relaxed")
    for seed in range(20):
        m = relaxed.measure(HIERARCHY, 0.5, np.random.default_rng(seed))
        released = relaxed.postprocess(HIERARCHY.tree, HIERARCHY.sizes, 600, m)
        if released.violations:
            break
    else:
        pytest.fail("the relaxed QP's rounding kept every parent consistent 20 times")
    method = hierarchy_tables(released, m).method
    assert f"NOT consistent: {released.checks['consistency']:,} parent counts differ" in method
    assert "is consistent" not in method


@pytest.mark.parametrize(("kind", "scale", "draws"), [
    ("geometric", 2.0, 1), ("geometric", 2.0, 2), ("geometric", 25.0, 2),
    ("laplace", 3.0, 1), ("laplace", 3.0, 2)])
def test_halfwidth_is_the_smallest_95_percent_bound(kind, scale, draws) -> None:
    t = halfwidth_95(kind, scale, draws)
    step = 1.0 if kind == "geometric" else 2.0**-10
    if kind == "laplace" and draws == 1:
        assert t == pytest.approx(scale * np.log(20.0), abs=step)  # the continuous one
    rng = np.random.default_rng(11)
    noise = sample_noise(kind, scale, 400_000, rng)
    if draws == 2:
        noise = noise - sample_noise(kind, scale, 400_000, rng)
    inside, below = np.mean(np.abs(noise) <= t), np.mean(np.abs(noise) <= t - step)
    assert inside >= 0.948 and below <= 0.952  # +- 3 standard errors (0.1 %)


@pytest.mark.parametrize("variant", ["dp", "cdp", "chain"])
def test_census_raw_intervals_cover_at_least_95_percent(variant) -> None:
    # plain, cumulative and level-prefix measurements: one draw or a difference of two
    mech = HierarchicalPGSR(variant=variant)
    truth = np.concatenate([a.reshape(-1) for a in HIERARCHY.levels])
    hits = cells = 0
    for seed in range(30):
        m = mech.measure(HIERARCHY, 1.0, np.random.default_rng(seed))
        frames = hierarchy_tables(mech.postprocess(HIERARCHY.tree, HIERARCHY.sizes, 600, m),
                                  m).frames.values()
        raw = np.concatenate([f["raw"].to_numpy() for f in frames])
        margin = np.concatenate([f["margin_95"].to_numpy() for f in frames])
        hits += int(np.sum(np.abs(raw - truth) <= margin))
        cells += truth.size
    # 2,520 intervals; the exact discrete bound covers 95 % or a little more
    assert 0.94 <= hits / cells <= 0.975, hits / cells


def test_aim_grem_on_a_domain_too_large_without_mbi_publishes_raw_and_says_why(monkeypatch
                                                                              ) -> None:
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 10)
    monkeypatch.setattr("engine.workflows.model_tables.model_available", lambda: False)
    data = Dataset.synthetic(DOMAIN, 300, rng=4)
    workload = Workload.marginals(DOMAIN, k=3)  # 1- and 2-way tables would need no model
    tables = adaptive_tables(workload, _aim(3, data, workload))
    assert list(tables.frames["sex x age x smoker"].columns) == ["sex", "age", "smoker",
                                                                 "margin_95", "raw"]
    assert tables.method.startswith("raw: ")
    assert tables.method.endswith(
        "The domain has 20 cells, more than the 10 whose one count per cell fits in memory: "
        "raw only; install the pgm extra (pip install 'dpworkbench[pgm]': mbi with JAX) to "
        "publish consistent whole counts from a graphical model instead.")
