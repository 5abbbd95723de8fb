"""Spec reference cases R1-R15 of shared/papers/hierarchical_census.md (§6)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from engine.linalg.matrix import Dense, Kron
from engine.mechanisms.hierarchical.bridge import (
    hierarchical_workload,
    individual_sensitivity,
    linear_reference,
    prefix_matrix,
    tree_matrix,
)
from engine.mechanisms.hierarchical.cumulative import (
    build_chain,
    cdp_postprocess,
    chain_objective,
    chain_postprocess,
    chain_values,
    cumulate,
    level_prefixes,
)
from engine.mechanisms.hierarchical.exact_integer_fit import (
    allocate,
    dp_postprocess,
    infconv,
    leaf_table,
    objective,
)
from engine.mechanisms.hierarchical.gls import gls_postprocess
from engine.mechanisms.hierarchical.level_noise import (
    geometric_alpha,
    geometric_variance,
    geometric_zero_probability,
    laplace_variance,
    level_sensitivities,
    noise_plan,
    sample_double_geometric,
)
from engine.mechanisms.hierarchical.mechanism import HierarchicalPGSR, NoisyMeasurement
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet, check_release
from engine.mechanisms.hierarchical.relaxed import relaxed_postprocess, round_values
from engine.mechanisms.hierarchical.synthetic import running_example
from engine.mechanisms.hierarchical.topdown import simplex_projection, topdown_postprocess

# ----- helpers -------------------------------------------------------------------------------
R6_NOISY = [np.array([[3.6, -0.8, 2.9]]), np.array([[1.3, 0.6, 0.2], [1.9, -0.4, 1.7]])]
THREE_TREES = [
    RegionTree.from_paths([("R", "A"), ("R", "B")]),
    RegionTree.from_paths([("R", "A"), ("R", "B"), ("R", "C")]),
    RegionTree.from_paths([("R", "A", "a1"), ("R", "A", "a2"), ("R", "B", "b1")]),
]


def compositions(n: int, parts: int):
    if parts == 1:
        yield (n,)
        return
    for a in range(n + 1):
        for rest in compositions(n - a, parts - 1):
            yield (a,) + rest


def all_hierarchies(tree: RegionTree, k: int, n: int):
    """Every consistent, valid, faithful integer hierarchy (per-level arrays)."""
    for comp in compositions(n, tree.num_leaves * k):
        levels = [np.array(comp).reshape(tree.num_leaves, k)]
        for lev in range(tree.depth - 2, -1, -1):
            levels.append(tree.aggregate(levels[-1], lev))
        yield levels[::-1]


def brute_objectives(tree, noisy, n, weights=None):
    k = noisy[0].shape[1]
    return sorted(objective(h, noisy, weights) for h in all_hierarchies(tree, k, n))


def assert_invariants(tree, levels, n):
    checks = check_release(tree, levels, n)
    assert checks == {"violations": 0, "consistency": 0, "faithfulness": 0, "negative": 0,
                      "non_integer": 0}
    for a in levels:
        assert np.issubdtype(np.asarray(a).dtype, np.integer)


def individual_moves(h: Hierarchy):
    """Leaf matrices of every neighbour: one individual added to or removed from a group."""
    counts = h.leaf_counts
    k = h.sizes.k
    for leaf, i in itertools.product(range(counts.shape[0]), range(k)):
        if counts[leaf, i] == 0:
            continue
        for step in (+1, -1):
            j = i + step
            if j < 0:
                continue  # no bucket below: the group would leave the set
            if j >= k:
                if h.sizes.open_top:
                    continue  # stays in the open top bucket: nothing changes
                continue
            moved = counts.copy()
            moved[leaf, i] -= 1
            moved[leaf, j] += 1
            yield Hierarchy(h.tree, h.sizes, moved)


# ----- R1 ------------------------------------------------------------------------------------
def test_r1_derived_structures_of_the_running_example():
    h = running_example()
    assert [cumulate(a).tolist() for a in h.levels] == [[[3, 4, 6]], [[2, 2, 3], [1, 2, 3]]]
    assert h.sizes.k * h.tree.num_regions + 1 == 10
    chain = build_chain(h.tree, 3)
    names = [f"({s + 1},{h.tree.names[lev][r]})" for lev, r, s in
             zip(chain.levels, chain.regions, chain.sizes, strict=True)] + ["rho"]
    assert names == ["(1,GA)", "(1,NY)", "(1,US)", "(2,GA)", "(2,NY)", "(2,US)", "(3,GA)",
                     "(3,NY)", "(3,US)", "rho"]
    prefix = chain_values(chain, level_prefixes(h.levels))
    assert prefix.tolist() + [h.total] == [2, 3, 3, 3, 4, 4, 5, 6, 6, 6]
    pattern = ["=" if t else ">=" for t in chain.tied] + ["=(n)"]
    pattern[0] = ">=0"
    assert pattern == [">=0", ">=", "=", ">=", ">=", "=", ">=", ">=", "=", "=(n)"]


# ----- R2 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["running", "1-3-6"])
def test_r2_brute_force_sensitivities(case):
    if case == "running":
        h = running_example()
        expected_chain = [1, 2]
    else:
        tree = RegionTree.from_fanouts([[3], [2, 2, 2]])
        rng = np.random.default_rng(3)
        h = Hierarchy(tree, SizeSet(3, zero=True, open_top=True), rng.integers(0, 3, (6, 4)))
        expected_chain = [1, 3, 6]
    L = h.tree.depth
    worst = {"plain": np.zeros(L), "cumulative": np.zeros(L), "chain": np.zeros(L)}
    base_prefix = level_prefixes(h.levels)
    for nb in individual_moves(h):
        for lev in range(L):
            worst["plain"][lev] = max(worst["plain"][lev],
                                      np.abs(nb.levels[lev] - h.levels[lev]).sum())
            worst["cumulative"][lev] = max(
                worst["cumulative"][lev],
                np.abs(cumulate(nb.levels[lev]) - cumulate(h.levels[lev])).sum(axis=1).max())
            worst["chain"][lev] = max(
                worst["chain"][lev],
                np.abs(level_prefixes(nb.levels)[lev] - base_prefix[lev]).sum())
    assert worst["plain"].tolist() == [2.0] * L
    assert worst["cumulative"].tolist() == [1.0] * L
    assert worst["chain"].tolist() == expected_chain
    for measurement in worst:
        assert level_sensitivities(measurement, h.tree).tolist() == worst[measurement].tolist()


def test_r2_matrix_form_sensitivities():
    h = running_example()
    k, H = 3, tree_matrix(h.tree)
    W = hierarchical_workload(h.tree, h.sizes)
    assert individual_sensitivity(W.matrix, k) == 4.0                       # 2L
    assert individual_sensitivity(Dense(np.kron(np.eye(k), H)), k) == 4.0  # dense path agrees
    assert individual_sensitivity(Kron([Dense(prefix_matrix(k)), Dense(H)]), k) == 2.0  # L
    assert W.sensitivity(1) == 2.0                                           # max column L1


# ----- R3 ------------------------------------------------------------------------------------
def test_r3_double_geometric_constants_and_sampler_moments():
    assert geometric_alpha(2.0) == pytest.approx(0.606531, abs=1e-6)
    assert geometric_zero_probability(2.0) == pytest.approx(0.244919, abs=1e-6)
    assert geometric_variance(2.0) == pytest.approx(7.835396, abs=1e-6)
    draws = sample_double_geometric(2.0, 1_000_000, np.random.default_rng(7))
    assert draws.dtype == np.int64
    assert draws.var() == pytest.approx(7.835396, rel=0.01)
    assert abs((draws == 0).mean() - 0.244919) < 0.002
    assert abs(draws.mean()) < 0.01


def test_r3_noise_table_for_three_levels():
    table = {0.1: (60, 0.983471, 7199.83, 30, 0.967216, 1799.83),
             0.5: (12, 0.920044, 287.83, 6, 0.846482, 71.83),
             1.0: (6, 0.846482, 71.83, 3, 0.716531, 17.83)}
    tree = RegionTree.from_fanouts([[2], [1, 2]])
    for eps, (lp, ap, vp, lc, ac, vc) in table.items():
        plain = noise_plan(tree, eps, "plain")
        cum = noise_plan(tree, eps, "cumulative")
        assert plain.scales == pytest.approx([lp] * 3)
        assert cum.scales == pytest.approx([lc] * 3)
        assert geometric_alpha(lp) == pytest.approx(ap, abs=1e-6)
        assert geometric_alpha(lc) == pytest.approx(ac, abs=1e-6)
        assert plain.variances == pytest.approx([vp] * 3, abs=0.005)
        assert cum.variances == pytest.approx([vc] * 3, abs=0.005)


# ----- R4 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["dp", "cdp", "chain", "relaxed", "topdown", "gls"])
def test_r4_noiseless_input_returns_the_truth(variant):
    from engine.mechanisms.hierarchical.synthetic import synthetic_census

    for h in (running_example(), synthetic_census("levels=1,3,7;groups=300;max_size=6;seed=2")):
        mech = HierarchicalPGSR(variant=variant)
        plan = mech.noise_plan(h.tree, 1.0)
        if plan.measurement == "plain":
            exact = h.levels
        elif plan.measurement == "cumulative":
            exact = tuple(cumulate(a) for a in h.levels)
        else:
            exact = tuple(level_prefixes(h.levels))
        out = mech.postprocess(h.tree, h.sizes, h.total, NoisyMeasurement(plan, exact))
        for a, b in zip(out.levels, h.levels, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)
        if "objective" in out.report:
            assert out.report["objective"] == pytest.approx(0.0, abs=1e-6)


def test_r4_each_post_processor_on_the_running_example():
    h = running_example()
    dp = dp_postprocess(h.tree, h.levels, 6)
    assert [a.tolist() for a in dp.levels] == [[[3, 1, 2]], [[2, 0, 1], [1, 1, 1]]]
    assert dp.objective == 0.0
    rel = relaxed_postprocess(h.tree, h.levels, 6)
    assert rel.objective == pytest.approx(0.0, abs=1e-6)
    cdp = cdp_postprocess(h.tree, [cumulate(a) for a in h.levels], 6)
    assert cdp.dp.objective == 0.0
    chain = build_chain(h.tree, 3)
    ch = chain_postprocess(h.tree, 3, chain_values(chain, level_prefixes(h.levels)), 6)
    assert ch.objective == 0.0
    gls = gls_postprocess(h.tree, h.levels, 6)
    for a, b in zip(gls.levels, h.levels, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


# ----- R5 ------------------------------------------------------------------------------------
def test_r5_cost_tables_and_slope_merge_of_one_subtree():
    c_ga = leaf_table(1.3, 0, 6)
    c_ny = leaf_table(1.9, 0, 6)
    np.testing.assert_allclose(c_ga, [1.69, 0.09, 0.49, 2.89, 7.29, 13.69, 22.09])
    np.testing.assert_allclose(c_ny, [3.61, 0.81, 0.01, 1.21, 4.41, 9.61, 16.81])
    assert (int(np.argmin(c_ga)), int(np.argmin(c_ny))) == (1, 2)
    lo, phi = infconv([(0, c_ga), (0, c_ny)])
    assert lo == 0
    np.testing.assert_allclose(phi, [5.3, 2.5, 0.9, 0.1, 0.5, 1.7, 4.1, 7.3, 11.7, 16.9, 23.3,
                                     30.5, 38.9], atol=1e-12)
    v0 = int(np.argmin(phi))
    assert v0 == 3
    slopes = np.diff(phi)
    np.testing.assert_allclose(slopes[v0:v0 + 6], [0.4, 1.2, 2.4, 3.2, 4.4, 5.2], atol=1e-12)
    np.testing.assert_allclose(-slopes[:v0][::-1], [0.8, 1.6, 2.8], atol=1e-12)
    brute = [min(c_ga[a] + c_ny[v - a] for a in range(7) if 0 <= v - a <= 6)
             for v in range(13)]
    np.testing.assert_allclose(phi, brute, atol=1e-12)
    c_us = (np.arange(13) - 3.6) ** 2 + phi
    np.testing.assert_allclose(c_us[:7], [18.26, 9.26, 3.46, 0.46, 0.66, 3.66, 9.86], atol=1e-9)
    assert int(np.argmin(c_us)) == 3 and c_us[3] == pytest.approx(0.46)
    assert allocate([(0, c_ga), (0, c_ny)], 3).tolist() == [1, 2]


# ----- R6 ------------------------------------------------------------------------------------
def test_r6_unique_optimum_of_the_running_example():
    tree = running_example().tree
    res = dp_postprocess(tree, R6_NOISY, 6)
    assert [a.tolist() for a in res.levels] == [[[3, 0, 3]], [[1, 0, 1], [2, 0, 2]]]
    assert res.objective == pytest.approx(2.36)
    assert objective(res.levels, R6_NOISY) == pytest.approx(2.36)
    ranked = brute_objectives(tree, R6_NOISY, 6)
    assert ranked[0] == pytest.approx(2.36) and ranked[1] == pytest.approx(2.76)
    windowed = dp_postprocess(tree, R6_NOISY, 6, halfwidths=[1, 1])
    assert windowed.certified and windowed.objective == pytest.approx(2.36)


def test_r6_relaxed_qp_optimum_and_multiplier():
    tree = running_example().tree
    res = relaxed_postprocess(tree, R6_NOISY, 6)
    np.testing.assert_allclose(res.continuous[1], [[1.425, 0, 0.525], [2.025, 0, 2.025]],
                               atol=1e-5)
    np.testing.assert_allclose(res.continuous[0], [[3.45, 0, 2.55]], atol=1e-5)
    assert res.objective == pytest.approx(1.5475, abs=1e-6)
    assert res.sum_multiplier == pytest.approx(0.05, abs=1e-5)
    assert [a.tolist() for a in res.levels] == [[[3, 0, 3]], [[1, 0, 1], [2, 0, 2]]]


# ----- R7 ------------------------------------------------------------------------------------
def test_r7_slope_merge_equals_brute_force_min_plus():
    rng = np.random.default_rng(11)
    mismatches = 0
    for _ in range(300):
        tables = []
        for _ in range(int(rng.integers(1, 4))):
            lo, width = int(rng.integers(0, 5)), int(rng.integers(1, 7))
            centre, curv = rng.normal(lo + width / 2, 2), rng.uniform(0.2, 3)
            tables.append((lo, curv * (np.arange(lo, lo + width) - centre) ** 2
                           + rng.normal(0, 0.1) * np.arange(width)))
        lo, phi = infconv(tables)
        los = [t[0] for t in tables]
        his = [t[0] + len(t[1]) - 1 for t in tables]
        for v in range(sum(los), sum(his) + 1):
            best = min(sum(t[1][x - t[0]] for t, x in zip(tables, xs, strict=True))
                       for xs in itertools.product(*[range(a, b + 1) for a, b in
                                                     zip(los, his, strict=True)])
                       if sum(xs) == v)
            alloc = allocate(tables, v)
            got = sum(t[1][x - t[0]] for t, x in zip(tables, alloc, strict=True))
            if abs(phi[v - lo] - best) > 1e-9 or abs(got - best) > 1e-9 or alloc.sum() != v:
                mismatches += 1
    assert mismatches == 0


# ----- R8 ------------------------------------------------------------------------------------
def test_r8_dp_equals_brute_force_qip_on_random_trees():
    rng = np.random.default_rng(8)
    matches = cases = 0
    for tree in THREE_TREES:
        for k in (1, 2):
            for n in (2, 3, 4):
                for _ in range(15):
                    noisy = [rng.normal(n / (k * s), 1.5, (s, k)) for s in tree.level_sizes]
                    best = brute_objectives(tree, noisy, n)[0]
                    res = dp_postprocess(tree, noisy, n)
                    assert_invariants(tree, res.levels, n)
                    cases += 1
                    matches += abs(res.objective - best) < 1e-9 and abs(
                        objective(res.levels, noisy) - best) < 1e-9
    assert (matches, cases) == (270, 270)


# ----- R9 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("solver", ["dp", "isotonic"])
def test_r9_chain_post_processing(solver):
    tree = running_example().tree
    y = np.array([1.4, 3.3, 2.6, 3.9, 3.2, 4.6, 4.4, 6.8, 5.7])
    res = chain_postprocess(tree, 3, y, 6, solver=solver)
    assert res.prefix.tolist() == [1, 3, 3, 4, 4, 4, 4, 6, 6]
    assert res.objective == pytest.approx(2.31)
    assert [a.tolist() for a in res.levels] == [[[3, 1, 2]], [[1, 1, 0], [2, 0, 2]]]
    chain = build_chain(tree, 3)
    ranked = sorted(chain_objective(chain_values(chain, level_prefixes(h)), y, np.ones(9))
                    for h in all_hierarchies(tree, 3, 6))
    assert ranked[0] == pytest.approx(2.31) and ranked[1] == pytest.approx(2.51)


def test_r9_chain_dp_and_isotonic_match_brute_force():
    rng = np.random.default_rng(9)
    matches = {"dp": 0, "isotonic": 0}
    cases = 0
    for tree in THREE_TREES:
        chain_len = None
        for k in (1, 2):
            chain = build_chain(tree, k)
            chain_len = chain.length
            for n in (2, 3, 4):
                feasible = [chain_values(chain, level_prefixes(h))
                            for h in all_hierarchies(tree, k, n)]
                for _ in range(15):
                    y = np.sort(rng.uniform(-0.5, n + 0.5, chain_len)) + rng.normal(0, 0.7,
                                                                                    chain_len)
                    best = min(chain_objective(p, y, np.ones(chain_len)) for p in feasible)
                    cases += 1
                    for solver in matches:
                        res = chain_postprocess(tree, k, y, n, solver=solver)
                        assert_invariants(tree, res.levels, n)
                        matches[solver] += abs(res.objective - best) < 1e-9
    assert cases == 270 and matches == {"dp": 270, "isotonic": 270}


# ----- R10 -----------------------------------------------------------------------------------
def test_r10_cumulative_repair_with_ties():
    tree = running_example().tree
    noisy_cum = [np.array([[3.3, 2.6, 6.4]]), np.array([[2.4, 1.7, 3.2], [-0.3, 2.2, 3.1]])]
    res = cdp_postprocess(tree, noisy_cum, 6)
    np.testing.assert_allclose(res.fitted[0], [[2.95, 2.95, 6.4]])
    np.testing.assert_allclose(res.fitted[1], [[2.05, 2.05, 3.2], [0, 2.2, 3.1]])
    assert [a.tolist() for a in res.repaired] == [[[3, 0, 3]], [[2, 0, 1], [0, 2, 1]]]
    assert res.dp.objective == pytest.approx(4.0)
    assert_invariants(tree, res.dp.levels, 6)
    optimal = [h for h in all_hierarchies(tree, 3, 6)
               if abs(objective(h, res.repaired) - 4.0) < 1e-9]
    assert len(optimal) >= 4
    assert brute_objectives(tree, list(res.repaired), 6)[0] == pytest.approx(4.0)


# ----- R11 -----------------------------------------------------------------------------------
def test_r11_relaxation_breaks_consistency_and_the_dp_does_not():
    tree = running_example().tree
    noisy = [np.array([[1.0]]), np.array([[0.5], [0.5]])]
    rel = relaxed_postprocess(tree, noisy, 1)
    np.testing.assert_allclose(rel.continuous[1], [[0.5], [0.5]], atol=1e-6)
    for rule, leaves in (("half-up", [[1], [1]]), ("half-even", [[0], [0]])):
        levels = [round_values(np.round(a, 6), rule) for a in rel.continuous]
        assert levels[1].tolist() == leaves
        assert check_release(tree, levels, 1)["violations"] == 1
    dp = dp_postprocess(tree, noisy, 1)
    assert dp.levels[1].tolist() in ([[1], [0]], [[0], [1]])
    assert dp.objective == pytest.approx(0.5)


# ----- R12 -----------------------------------------------------------------------------------
def test_r12_gls_closed_form_equals_kkt_least_squares():
    tree = running_example().tree
    res = gls_postprocess(tree, R6_NOISY, 6)
    expected = [[[Fraction(65, 18), Fraction(-29, 90), Fraction(122, 45)]],
                [[Fraction(271, 180), Fraction(61, 180), Fraction(109, 180)],
                 [Fraction(379, 180), Fraction(-119, 180), Fraction(379, 180)]]]
    for a, b in zip(res.levels, expected, strict=True):
        np.testing.assert_allclose(a, np.array(b, dtype=float), atol=1e-12)
    # direct KKT solve of min ||A x - y||^2 s.t. 1'x = n over the leaf vector x (size major)
    H = tree_matrix(tree)
    A = np.kron(np.eye(3), H)
    y = np.concatenate([np.concatenate([lev[:, i] for lev in R6_NOISY]) for i in range(3)])
    m = A.shape[1]
    kkt = np.block([[2 * A.T @ A, np.ones((m, 1))], [np.ones((1, m)), np.zeros((1, 1))]])
    sol = np.linalg.solve(kkt, np.concatenate([2 * A.T @ y, [6.0]]))[:m]
    np.testing.assert_allclose(sol.reshape(3, 2).T, res.levels[1], atol=1e-12)


# ----- R13 -----------------------------------------------------------------------------------
def test_r13_topdown_example():
    tree = running_example().tree
    np.testing.assert_allclose(simplex_projection(R6_NOISY[0], np.array([6.0])),
                               [[3.35, 0, 2.65]], atol=1e-12)
    np.testing.assert_allclose(simplex_projection(np.array([[1.3, 1.9], [0.2, 1.7]]),
                                                  np.array([3.0, 3.0])),
                               [[1.2, 1.8], [0.75, 2.25]], atol=1e-12)
    res = topdown_postprocess(tree, R6_NOISY, 6)
    assert [a.tolist() for a in res.levels] == [[[3, 0, 3]], [[1, 0, 1], [2, 0, 2]]]
    assert check_release(tree, res.levels, 6)["violations"] == 0


# ----- R14 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["dp", "cdp", "chain", "topdown"])
def test_r14_invariants_and_determinism_of_consistent_variants(variant):
    from engine.mechanisms.hierarchical.synthetic import synthetic_census

    h = synthetic_census("levels=1,4,11;groups=2000;max_size=12;seed=5")
    for eps in (0.2, 1.0):
        for noise in ("geometric", "laplace"):
            mech = HierarchicalPGSR(variant=variant, noise=noise)
            meas = mech.measure(h, eps, np.random.default_rng(21))
            a = mech.postprocess(h.tree, h.sizes, h.total, meas)
            b = mech.postprocess(h.tree, h.sizes, h.total, meas)
            assert_invariants(h.tree, a.levels, h.total)
            assert a.is_consistent_integer() and a.violations == 0
            for x, y in zip(a.levels, b.levels, strict=True):
                assert np.array_equal(x, y)


# ----- R15 -----------------------------------------------------------------------------------
def test_r15_linear_error_reference():
    h = running_example()
    W = np.kron(np.eye(3), tree_matrix(h.tree))
    assert np.sum((W @ np.linalg.pinv(W)) ** 2) == pytest.approx(6.0)
    assert W.shape[0] == 9
    assert geometric_variance(4.0) == pytest.approx(31.834, abs=5e-4)
    assert laplace_variance(4.0) == 32.0
    ref = linear_reference(h.tree, h.sizes, 1.0)
    assert ref["fro2"] == 6.0 and ref["queries"] == 9
    assert ref["rmse"] == pytest.approx(4.607, abs=5e-4)
    assert ref["raw_rmse"] == pytest.approx(5.642, abs=5e-4)


def test_r15_projection_is_never_farther_from_the_truth_than_the_noise():
    from engine.mechanisms.hierarchical.synthetic import synthetic_census

    h = synthetic_census("levels=1,3,6;groups=200;max_size=5;seed=4")
    mech = HierarchicalPGSR(variant="relaxed")
    for seed in range(8):
        meas = mech.measure(h, 0.5, np.random.default_rng(seed))
        rel = relaxed_postprocess(h.tree, meas.values, h.total)
        projected = sum(np.sum((a - b) ** 2) for a, b in zip(rel.continuous, h.levels,
                                                                strict=True))
        raw = sum(np.sum((np.asarray(a, float) - b) ** 2)
                  for a, b in zip(meas.values, h.levels, strict=True))
        assert projected <= raw + 1e-6
