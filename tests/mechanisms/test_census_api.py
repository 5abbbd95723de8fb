"""Model validation, CSV I/O, synthetic data, budget splits, the mechanism API, evaluation,
the matrix-mechanism bridge and the census CLI command."""

from __future__ import annotations

import argparse
import io
import json

import numpy as np
import pytest

from engine.cli.census import add_census_arguments, census_command, format_census
from engine.errors import NotApplicable, SpecError
from engine.mechanisms import get, registry_names
from engine.mechanisms.hierarchical.bridge import (
    data_vector,
    hierarchical_workload,
    individual_sensitivity,
)
from engine.mechanisms.hierarchical.io import load_hierarchy_csv, write_hierarchy_csv
from engine.mechanisms.hierarchical.level_noise import noise_plan, split_budget
from engine.mechanisms.hierarchical.mechanism import HierarchicalPGSR
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet
from engine.mechanisms.hierarchical.monte_carlo import compare_variants, evaluate
from engine.mechanisms.hierarchical.synthetic import (
    parse_spec,
    running_example,
    synthetic_census,
)
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads import PrefixBlock, Workload

SMALL = "levels=1,3,8;groups=600;max_size=6;seed=3"


# ----- model ---------------------------------------------------------------------------------
def test_tree_from_paths_orders_children_contiguously():
    tree = RegionTree.from_paths([("US", "GA", "a"), ("US", "NY", "b"), ("US", "GA", "c")],
                                 ("nation", "state", "county"))
    assert tree.level_sizes == (1, 2, 3)
    assert tree.names[2] == ("a", "c", "b")
    assert tree.parents[1].tolist() == [0, 0, 1]
    assert tree.label(2, 2) == "US/NY/b"
    levs, idxs = tree.postorder
    assert list(zip(levs.tolist(), idxs.tolist(), strict=True)) == [
        (2, 0), (2, 1), (1, 0), (2, 2), (1, 1), (0, 0)]


@pytest.mark.parametrize("paths, match", [
    ([("US", "GA"), ("US", "NY", "x")], "ragged"),
    ([("US", "GA"), ("CA", "ON")], "one root"),
    ([("US", "GA"), ("US", "GA")], "twice"),
    ([("US", ""), ("US", "NY")], "ragged"),
])
def test_tree_validation_errors_are_one_line(paths, match):
    with pytest.raises(SpecError, match=match) as info:
        RegionTree.from_paths(paths)
    assert "\n" not in str(info.value)


def test_tree_rejects_childless_internal_regions():
    with pytest.raises(SpecError, match="ragged"):
        RegionTree((("US",), ("GA", "NY"), ("a",)), (np.array([0, 0]), np.array([0])))


def test_hierarchy_validation():
    tree = running_example().tree
    sizes = SizeSet(3, zero=False, open_top=False)
    with pytest.raises(SpecError, match="negative count -1 for region 'US/NY', size 2"):
        Hierarchy(tree, sizes, [[2, 0, 1], [1, -1, 1]])
    with pytest.raises(SpecError, match="shape"):
        Hierarchy(tree, sizes, [[2, 0], [1, 1]])
    with pytest.raises(SpecError, match="integers"):
        Hierarchy(tree, sizes, [[2, 0.5, 1], [1, 1, 1]])
    h = running_example()
    assert h.total == 6 and h.individuals == 11 and h.num_queries == 9


def test_size_set_buckets_and_edges():
    s = SizeSet(3)
    assert s.k == 4 and s.labels == ["0", "1", "2", "3+"]
    assert s.bucket([0, 1, 3, 9]).tolist() == [0, 1, 3, 3]
    closed = SizeSet(3, zero=False, open_top=False)
    assert closed.bucket([1, 3]).tolist() == [0, 2]
    with pytest.raises(SpecError, match="group size 4 is outside the size set"):
        closed.bucket([1, 4])
    with pytest.raises(SpecError, match="group size 0 is outside"):
        closed.bucket([0])
    with pytest.raises(SpecError, match="max_size"):
        SizeSet(0)


# ----- CSV and synthetic data ------------------------------------------------------------------
def test_csv_round_trip_and_group_rows(tmp_path):
    h = synthetic_census(SMALL)
    path = tmp_path / "h.csv"
    write_hierarchy_csv(h, path)
    back = load_hierarchy_csv(path, max_size=6)
    assert np.array_equal(back.leaf_counts, h.leaf_counts)
    assert back.tree.level_names == ("nation", "state", "county")
    groups = io.StringIO("nation,state,size\nUS,GA,1\nUS,GA,1\nUS,GA,3\nUS,NY,3\nUS,NY,1\n"
                         "US,NY,2\n")
    g = load_hierarchy_csv(groups, zero=False, open_top=False)
    assert g.levels[1].tolist() == [[2, 0, 1], [1, 1, 1]]


@pytest.mark.parametrize("text, match", [
    ("nation,state,size,count\nUS,GA,1,-2\n", "row 2: count -2 is negative"),
    ("nation,state,size\nUS,GA,1\nUS,,2\n", "row 3 has an empty 'state'"),
    ("nation,state,size\nUS,GA,x\n", "row 2: size 'x' is not an integer"),
    ("nation,state,size\nUS,GA,1\nUS,NY,5\n", "row 3: size: group size 5 is outside"),
    ("nation,state\nUS,GA\n", "'size' column"),
    ("nation,state,size,weight\nUS,GA,1,2\n", "unexpected columns"),
    ("nation,state,size\nUS,GA\n", "row 2 has 2 fields"),
    ("nation,state,size\nUS,GA,1\nCA,ON,1\n", "one root"),
])
def test_csv_errors_name_the_row(text, match):
    with pytest.raises(SpecError, match=match):
        load_hierarchy_csv(io.StringIO(text), max_size=3, open_top=False)


def test_synthetic_census_is_seeded_and_shaped():
    a = synthetic_census(SMALL)
    b = synthetic_census(SMALL)
    assert np.array_equal(a.leaf_counts, b.leaf_counts)
    assert a.tree.level_sizes == (1, 3, 8) and a.total == 600 and a.sizes.k == 7
    assert not np.array_equal(a.leaf_counts, synthetic_census(SMALL.replace("seed=3",
                                                                          "seed=4")).leaf_counts)
    shares = a.levels[0][0] / a.total
    assert shares[1:3].sum() > 0.4  # one- and two-person households dominate
    big = synthetic_census("levels=1,52,3144;groups=3000000;max_size=1000;seed=0")
    assert big.tree.level_sizes == (1, 52, 3144) and big.sizes.k == 1001
    assert big.total == 3_000_000 and big.levels[0][0, -1] > 0  # group quarters reach k+
    assert synthetic_census("preset=toy").name == "running example"


@pytest.mark.parametrize("spec, match", [
    ("levels=2,6", "synthetic.levels"), ("groupz=5", "did you mean 'groups'"),
    ("max_size=0", "synthetic.max_size"), ("preset=cesnus", "did you mean 'census'"),
    ("levels", "key=value"), ("vacant=0.9", "synthetic.vacant"),
])
def test_synthetic_spec_errors(spec, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(spec)


# ----- noise and budget split ----------------------------------------------------------------
def test_budget_splits():
    tree = RegionTree.from_fanouts([[3], [2, 2, 2]])
    assert split_budget(1.2, tree).tolist() == pytest.approx([0.4, 0.4, 0.4])
    assert split_budget(1.0, tree, "user", [1, 1, 2]).tolist() == pytest.approx(
        [0.25, 0.25, 0.5])
    inv = split_budget(1.0, tree, "inverse-variance")
    assert inv == pytest.approx(np.cbrt([1, 3, 6]) / np.cbrt([1, 3, 6]).sum())
    # the inverse-variance split minimises sum_l |R_l| / eps_l^2 over splits of eps
    def cost(e):
        return float(np.sum(np.array([1, 3, 6]) / np.asarray(e) ** 2))
    assert cost(inv) < cost(split_budget(1.0, tree)) and cost(inv) < cost([0.2, 0.3, 0.5])
    with pytest.raises(SpecError, match="expected 3 weights"):
        split_budget(1.0, tree, "user", [1, 2])
    with pytest.raises(SpecError, match="did you mean 'uniform'"):
        split_budget(1.0, tree, "unifrom")
    with pytest.raises(SpecError, match="epsilon"):
        split_budget(0.0, tree)


def test_chain_calibration_is_corrected_and_paper_scale_is_flagged():
    tree = RegionTree.from_fanouts([[3], [2, 2, 2]])
    plan = noise_plan(tree, 3.0, "chain")
    assert plan.sensitivities.tolist() == [1, 3, 6]
    assert plan.scales.tolist() == pytest.approx([1, 3, 6])  # lambda_l = L |R_l| / eps
    assert plan.eps_dp
    unsafe = noise_plan(tree, 3.0, "chain", paper_chain_scale=True)
    assert unsafe.scales.tolist() == pytest.approx([1, 1, 1]) and not unsafe.eps_dp
    h = Hierarchy(tree, SizeSet(2), np.ones((6, 3), dtype=int))
    out = HierarchicalPGSR(variant="chain", chain_noise="paper-not-dp").release(
        h, 1.0, np.random.default_rng(0))
    assert out.report["eps_dp"] is False and "NOT eps-DP" in out.report["warning"]


def test_non_uniform_split_weights_levels_by_inverse_variance():
    tree = RegionTree.from_fanouts([[2], [2, 2]])
    plan = noise_plan(tree, 1.0, "plain", split="user", weights=[1, 1, 2])
    w = plan.weights()
    assert w.max() == 1.0
    assert w.tolist() == pytest.approx((1 / plan.variances) / (1 / plan.variances).max())
    assert w[2] == 1.0 and w[0] < 1.0


# ----- mechanism -----------------------------------------------------------------------------
def test_registered_and_refuses_to_plan():
    assert "hierarchical-pgsr" in registry_names()
    mech = get("hierarchical-pgsr", variant="cdp")
    assert mech.data_dependent and mech.variant == "cdp"
    with pytest.raises(NotApplicable, match="data-dependent"):
        mech.plan(Workload.one_dim(PrefixBlock(8)), Privacy(noise="laplace"))
    with pytest.raises(NotApplicable, match="gaussian"):
        mech.run(running_example(), Privacy(noise="gaussian"), np.random.default_rng(0))
    out = mech.run(running_example(), Privacy(noise="laplace", epsilon=2.0),
                   np.random.default_rng(0))
    assert out.report["epsilon"] == pytest.approx(2.0)
    assert out.report["privacy_unit"] == "individual"


def test_release_report_and_budget_accounting():
    h = synthetic_census(SMALL)
    out = HierarchicalPGSR(variant="dp", split="user", level_weights=[1, 2, 3]).release(
        h, 0.6, np.random.default_rng(1))
    assert out.report["epsilon_by_level"] == pytest.approx([0.1, 0.2, 0.3])
    assert out.report["scale_by_level"] == pytest.approx([20, 10, 2 / 0.3])
    assert out.report["certified_optimal"] is True
    assert out.is_consistent_integer()


def test_full_domain_and_windowed_dp_agree():
    h = synthetic_census("levels=1,2,4;groups=60;max_size=4;seed=1")
    meas = HierarchicalPGSR(variant="dp").measure(h, 0.5, np.random.default_rng(2))
    full = HierarchicalPGSR(variant="dp", domain_halfwidth=0).postprocess(
        h.tree, h.sizes, h.total, meas)
    narrow = HierarchicalPGSR(variant="dp", domain_halfwidth=0.5).postprocess(
        h.tree, h.sizes, h.total, meas)
    assert narrow.report["certified_optimal"]
    assert narrow.report["objective"] == pytest.approx(full.report["objective"])


def test_progress_can_cancel_a_release():
    from engine.errors import Cancelled

    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        HierarchicalPGSR(variant="dp").release(synthetic_census(SMALL), 1.0,
                                               np.random.default_rng(0), progress)


# ----- evaluation ----------------------------------------------------------------------------
def test_evaluate_summarises_trials():
    h = synthetic_census(SMALL)
    seen = []
    ev = evaluate(h, "dp", 1.0, trials=4, seed=3, on_trial=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert ev.rmse_trials.shape == (4,) and ev.rmse > 0 and ev.rmse_sd >= 0
    assert ev.rmse_by_level.shape == (3,) and ev.l1_by_level.shape == (3,)
    assert ev.mse_size_level.shape == (3, 7) and ev.violations == 0
    # the per-query MSE averages to the squared RMSE of the pooled trials
    pooled = sum(m.sum() for m in ev.query_mse) / h.num_queries
    assert pooled == pytest.approx(np.mean(ev.rmse_trials ** 2))
    for m, b, s in zip(ev.query_mse, ev.query_bias, ev.query_sd, strict=True):
        np.testing.assert_allclose(m, b ** 2 + s ** 2 * 3 / 4, atol=1e-9)
    doc = ev.summary()
    assert set(doc) >= {"variant", "violations", "rmse", "rmse_by_level", "seconds"}
    json.dumps(doc)
    again = evaluate(h, "dp", 1.0, trials=4, seed=3)
    assert np.array_equal(again.rmse_trials, ev.rmse_trials)


def test_relaxed_violations_and_cumulative_accuracy():
    h = synthetic_census("levels=1,4,16;groups=4000;max_size=20;seed=6")
    evs = {e.variant: e for e in compare_variants(h, ["dp", "cdp", "relaxed", "gls"], 0.5,
                                                  trials=3, seed=1)}
    assert evs["relaxed"].violations > 0
    assert evs["dp"].violations == evs["cdp"].violations == 0
    assert evs["gls"].summary()["negative_cells"] > 0
    # cumulative counts get half the noise scale: more accurate at equal eps
    assert evs["cdp"].rmse < evs["dp"].rmse
    # non-negativity and integrality help on sparse data: M_DP beats the linear GLS
    assert evs["dp"].rmse < evs["gls"].rmse


# ----- bridge --------------------------------------------------------------------------------
def test_bridge_workloads_answer_the_pgsr_queries():
    h = synthetic_census("levels=1,2,5;groups=100;max_size=3;seed=2")
    expected = np.concatenate([np.concatenate([lev[:, i] for lev in h.levels])
                               for i in range(h.sizes.k)])
    W = hierarchical_workload(h.tree, h.sizes)
    np.testing.assert_allclose(W.answer(data_vector(h)), expected)
    Wy = hierarchical_workload(h.tree, h.sizes, "cumulative")
    np.testing.assert_allclose(Wy.answer(data_vector(h, "cumulative")), expected)
    # one individual changes one cumulative cell, so in y coordinates the ordinary
    # sensitivity is the individual one: 2L for the plain histograms either way, and 1 for
    # measuring the leaves' cumulative counts (the identity on y)
    assert individual_sensitivity(W.matrix, h.sizes.k) == 2 * h.tree.depth
    assert Wy.sensitivity(1) == 2 * h.tree.depth
    assert W.sensitivity(1) == h.tree.depth  # the group unit: one cell of x


# ----- CLI -----------------------------------------------------------------------------------
def _args(*argv: str) -> argparse.Namespace:
    return add_census_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_census_command_document():
    doc = census_command(_args("--synthetic", SMALL, "--variant", "cdp", "--trials", "2",
                               "--epsilon", "0.5", "--json"))
    assert doc["variant"] == "cdp" and doc["violations"] == 0 and doc["trials"] == 2
    assert len(doc["rmse_by_level"]) == 3 and doc["rmse"] > 0 and doc["seconds"] > 0
    assert doc["privacy_unit"] == "individual" and doc["regions_by_level"] == [1, 3, 8]
    json.dumps(doc)
    assert "privacy unit: individual" in format_census(doc)
    bare = census_command(argparse.Namespace(variant="topdown", synthetic=SMALL, trials=1))
    assert bare["variant"] == "topdown" and bare["epsilon"] == 1.0


def test_census_command_reads_csv(tmp_path):
    path = tmp_path / "h.csv"
    write_hierarchy_csv(synthetic_census(SMALL), path)
    doc = census_command(_args("--data", str(path), "--variant", "gls", "--trials", "1",
                               "--max-size", "6"))
    assert doc["variant"] == "gls" and doc["regions_by_level"] == [1, 3, 8]
    assert doc["size_buckets"] == 7  # 0..6+: the public bound, whatever the data hold
    with pytest.raises(SpecError, match=r"^--max-size: required with --data"):
        census_command(_args("--data", str(path), "--variant", "gls", "--trials", "1"))
    for bad in ("0", "x"):
        with pytest.raises(SpecError, match=r"^--max-size: expected an integer >= 1"):
            census_command(_args("--data", str(path), "--max-size", bad))


@pytest.mark.parametrize("argv, match", [
    (["--variant", "dpp"], "--variant: unknown 'dpp' \\(did you mean 'dp'\\?\\)"),
    (["--noise", "gaussian"], "--noise"),
    (["--epsilon", "0"], "--epsilon"),
    (["--trials", "0"], "--trials"),
    (["--split", "user"], "--weights"),
    (["--split", "user", "--weights", "1,2"], "expected 3 numbers"),
    (["--synthetic", "levels=1,x"], "--synthetic: synthetic.levels"),
    (["--sampler", "gauss"], "--sampler"),
])
def test_census_command_errors(argv, match):
    with pytest.raises(SpecError, match=match):
        census_command(_args(*argv))


def test_topdown_with_one_qp_per_parent_matches_the_closed_form():
    from engine.mechanisms.hierarchical.topdown import topdown_postprocess

    h = synthetic_census("levels=1,3,7;groups=2000;max_size=15;seed=2")
    meas = HierarchicalPGSR(variant="topdown").measure(h, 0.5, np.random.default_rng(4))
    closed = topdown_postprocess(h.tree, meas.values, h.total)
    qp = topdown_postprocess(h.tree, meas.values, h.total, projection="qp")
    for a, b in zip(closed.levels, qp.levels, strict=True):
        assert np.array_equal(a, b)
    with pytest.raises(SpecError, match="projection"):
        topdown_postprocess(h.tree, meas.values, h.total, projection="lp")


def test_dp_in_size_row_blocks_gives_the_same_release(monkeypatch):
    import engine.mechanisms.hierarchical.exact_integer_fit as dp

    h = synthetic_census("levels=1,4,20;groups=20000;max_size=40;seed=3")
    meas = HierarchicalPGSR(variant="dp").measure(h, 0.3, np.random.default_rng(1))
    whole = HierarchicalPGSR(variant="dp").postprocess(h.tree, h.sizes, h.total, meas)
    monkeypatch.setattr(dp, "CHUNK_CELLS", 500)  # forces many blocks per parent
    blocks = HierarchicalPGSR(variant="dp").postprocess(h.tree, h.sizes, h.total, meas)
    assert blocks.report["objective"] == whole.report["objective"]
    for a, b in zip(whole.levels, blocks.levels, strict=True):
        assert np.array_equal(a, b)
