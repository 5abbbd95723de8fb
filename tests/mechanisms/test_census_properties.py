"""Property tests on random small trees: invariants always hold, M_DP = exhaustive search."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.mechanisms.hierarchical.cumulative import (
    build_chain,
    chain_objective,
    chain_postprocess,
    chain_values,
    level_prefixes,
)
from engine.mechanisms.hierarchical.exact_integer_fit import dp_postprocess, objective
from engine.mechanisms.hierarchical.mechanism import HierarchicalPGSR
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet, check_release

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def small_trees(draw, max_leaves: int = 4) -> RegionTree:
    """Trees of depth 1-3 with at most ``max_leaves`` leaves, every leaf at the same depth."""
    depth = draw(st.integers(1, 3))
    fanouts = []
    width = 1
    for _ in range(depth - 1):
        wanted = draw(st.lists(st.integers(1, 3), min_size=width, max_size=width))
        spare = max_leaves - width  # every parent keeps one child; the rest share the spare
        f = []
        for x in wanted:
            extra = min(x - 1, spare)
            f.append(1 + extra)
            spare -= extra
        fanouts.append(f)
        width = sum(f)
    return RegionTree.from_fanouts(fanouts)


@st.composite
def noisy_instances(draw, max_cells: int = 6):
    tree = draw(small_trees())
    k = draw(st.integers(1, 2))
    if tree.num_leaves * k > max_cells:
        k = 1
    n = draw(st.integers(0, 4))
    integer = draw(st.booleans())
    values = []
    for s in tree.level_sizes:
        elems = (st.integers(-3, 7).map(float) if integer else
                 st.floats(-3, 7, allow_nan=False, allow_infinity=False))
        values.append(np.array(draw(st.lists(elems, min_size=s * k, max_size=s * k)),
                               dtype=float).reshape(s, k))
    return tree, k, n, values


def _compositions(n, parts):
    if parts == 1:
        yield (n,)
        return
    for a in range(n + 1):
        for rest in _compositions(n - a, parts - 1):
            yield (a,) + rest


def _hierarchies(tree, k, n):
    for comp in _compositions(n, tree.num_leaves * k):
        levels = [np.array(comp).reshape(tree.num_leaves, k)]
        for lev in range(tree.depth - 2, -1, -1):
            levels.append(tree.aggregate(levels[-1], lev))
        yield levels[::-1]


def _assert_valid(tree, levels, n):
    assert check_release(tree, levels, n) == {"violations": 0, "consistency": 0,
                                              "faithfulness": 0, "negative": 0,
                                              "non_integer": 0}


@SETTINGS
@given(noisy_instances(), st.sampled_from([None, 1, 2]))
def test_dp_matches_exhaustive_search(instance, halfwidth):
    tree, k, n, noisy = instance
    hw = None if halfwidth is None else [halfwidth] * tree.depth
    res = dp_postprocess(tree, noisy, n, halfwidths=hw)
    _assert_valid(tree, res.levels, n)
    best = min(objective(h, noisy) for h in _hierarchies(tree, k, n))
    assert abs(objective(res.levels, noisy) - res.objective) < 1e-9
    if res.certified:  # windows may cut the optimum off only when not certified
        assert abs(res.objective - best) < 1e-9
    assert res.objective >= best - 1e-9


@SETTINGS
@given(noisy_instances(), st.sampled_from(["dp", "isotonic"]), st.integers(0, 2**31))
def test_chain_matches_exhaustive_search(instance, solver, seed):
    tree, k, n, _ = instance
    chain = build_chain(tree, k)
    rng = np.random.default_rng(seed)
    y = np.sort(rng.uniform(0, n, chain.length)) + rng.normal(0, 1, chain.length)
    res = chain_postprocess(tree, k, y, n, solver=solver)
    _assert_valid(tree, res.levels, n)
    best = min(chain_objective(chain_values(chain, level_prefixes(h)), y,
                               np.ones(chain.length)) for h in _hierarchies(tree, k, n))
    assert abs(res.objective - best) < 1e-9


@st.composite
def hierarchies(draw) -> Hierarchy:
    tree = draw(small_trees(max_leaves=6))
    max_size = draw(st.integers(1, 4))
    sizes = SizeSet(max_size, zero=draw(st.booleans()), open_top=draw(st.booleans()))
    counts = draw(st.lists(st.integers(0, 6), min_size=tree.num_leaves * sizes.k,
                           max_size=tree.num_leaves * sizes.k))
    return Hierarchy(tree, sizes, np.array(counts).reshape(tree.num_leaves, sizes.k))


@SETTINGS
@given(hierarchies(), st.sampled_from(["dp", "cdp", "chain", "topdown"]),
       st.sampled_from(["geometric", "laplace"]), st.floats(0.05, 5.0),
       st.sampled_from(["uniform", "inverse-variance"]), st.integers(0, 2**31))
def test_consistent_variants_always_release_valid_hierarchies(h, variant, noise, eps, split,
                                                              seed):
    mech = HierarchicalPGSR(variant=variant, noise=noise, split=split)
    out = mech.release(h, eps, np.random.default_rng(seed))
    _assert_valid(h.tree, out.levels, h.total)
    assert out.report["epsilon"] == np.float64(eps) or abs(out.report["epsilon"] - eps) < 1e-12


@SETTINGS
@given(hierarchies(), st.integers(0, 2**31))
def test_gls_is_always_consistent_and_faithful(h, seed):
    gls = HierarchicalPGSR(variant="gls").release(h, 1.0, np.random.default_rng(seed))
    checks = gls.checks
    assert checks["consistency"] == 0 and checks["faithfulness"] == 0
    assert abs(float(gls.levels[0].sum()) - h.total) < 1e-6
