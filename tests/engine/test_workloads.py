"""Workloads: every group kind answers like a brute-force reference, without densifying."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.domain import Domain
from engine.errors import NotApplicable
from engine.scenario import Scenario
from engine.workloads import (
    AllRangeBlock,
    IdentityBlock,
    Marginals,
    PrefixBlock,
    Product,
    Workload,
)

SPEC_DOMAIN = {"a": {"size": 3, "kind": "numeric"}, "b": 2, "c": {"size": 4, "kind": "numeric"}}


def brute_answers(group: dict, t: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Answers computed straight from the definitions on the data tensor t."""
    kind = next(k for k in group if k != "weight")
    body = group[kind]
    w = group.get("weight", 1.0)
    axes = {n: i for i, n in enumerate(names)}

    def marg(attrs):
        keep = sorted(axes[a] for a in attrs)
        return t.sum(axis=tuple(i for i in range(t.ndim) if i not in keep))

    if kind == "product":
        attrs = sorted(body, key=axes.get)
        m = marg(attrs)
        for pos, name in enumerate(attrs):
            n = m.shape[pos]
            Q = {"identity": np.eye(n), "prefix": np.tril(np.ones((n, n))),
                 "total": np.ones((1, n))}[body[name]]
            m = np.moveaxis(np.tensordot(Q, m, axes=(1, pos)), 0, pos)
        return w * m.ravel()
    if kind == "marginals":
        sets = itertools.combinations(names, body["k"])
        return w * np.concatenate([marg(s).ravel() for s in sets])
    if kind in ("affine", "abs_diff"):
        a, b = body
        m = marg([a, b])
        if axes[a] > axes[b]:
            m = m.T  # axis 0 is attribute a
        ia, ib = np.meshgrid(np.arange(m.shape[0]), np.arange(m.shape[1]), indexing="ij")
        stat = ia + ib if kind == "affine" else np.abs(ia - ib)
        return w * np.array([m[stat <= c].sum() for c in range(int(stat.max()) + 1)])
    if kind == "matrix":
        on = body["on"]
        m = marg(on)
        if [axes[n] for n in on] != sorted(axes[n] for n in on):
            m = m.T  # the rows index the marginal in the given attribute order
        return w * np.asarray(body["rows"], float) @ m.ravel()
    raise AssertionError(kind)


GROUPS = [
    {"product": {"a": "prefix", "c": "identity"}, "weight": 2.0},
    {"product": {"c": "prefix"}},
    {"marginals": {"k": 2}},
    {"affine": ["c", "a"]},
    {"abs_diff": ["a", "c"], "weight": 0.5},
    {"matrix": {"on": ["c", "b"], "rows": [[1, 0, 0, 1, 0, 0, 2, 0], [0, 1, 1, 0, 0, 0, 0, 3]]}},
]


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: next(iter(g)))
def test_group_answers_match_brute_force(group: dict) -> None:
    s = Scenario.from_spec({"domain": SPEC_DOMAIN, "workload": [group]})
    W = s.workload
    rng = np.random.default_rng(4)
    t = rng.integers(0, 10, s.domain.shape).astype(float)
    expected = brute_answers(group, t, s.domain.names)
    assert W.num_queries == expected.size
    np.testing.assert_allclose(W.answer(t.ravel()), expected)
    D = W.dense()
    np.testing.assert_allclose(D @ t.ravel(), expected)
    np.testing.assert_allclose(W.gram().dense(), D.T @ D, atol=1e-12)
    assert W.fro2() == pytest.approx((D * D).sum())
    for p in (1, 2):
        norms = np.abs(D).sum(0) if p == 1 else np.sqrt((D * D).sum(0))
        assert W.sensitivity(p) == pytest.approx(norms.max())

    def marginal(axes):
        return t.sum(axis=tuple(i for i in range(t.ndim) if i not in axes))

    np.testing.assert_allclose(W.answer_from_marginals(marginal), expected)
    for term in W.terms:  # each term's full-domain matrix, without densifying it
        M = term.full_matrix()
        Dt = np.asarray(M.dense())
        np.testing.assert_allclose(M.column_norms(1), np.abs(Dt).sum(0))
        np.testing.assert_allclose(M.column_norms(2), np.sqrt((Dt * Dt).sum(0)))
        assert M.fro2() == pytest.approx((Dt * Dt).sum())
    y = rng.normal(size=W.num_queries)
    np.testing.assert_allclose(W.matrix.rmatvec(y), D.T @ y, atol=1e-10)


def test_prefix_marginals_use_prefix_on_numeric_attributes() -> None:
    s = Scenario.from_spec({"domain": SPEC_DOMAIN, "workload": [{"prefix_marginals": {"k": 2}}]})
    kinds = [[type(f).__name__ for f in t.factors] for t in s.workload.terms]
    assert kinds == [["PrefixBlock", "IdentityBlock"], ["PrefixBlock", "PrefixBlock"],
                     ["IdentityBlock", "PrefixBlock"]]


def test_random_group_is_seeded_and_over_the_marginal() -> None:
    spec = {"domain": SPEC_DOMAIN,
            "workload": [{"random": {"on": ["c", "a"], "count": 5, "p": 0.3, "seed": 9}}]}
    W1 = Scenario.from_spec(spec).workload
    W2 = Scenario.from_spec(spec).workload
    np.testing.assert_array_equal(W1.dense(), W2.dense())
    assert W1.num_queries == 5 and W1.terms[0].attrs == (0, 2)
    assert set(np.unique(W1.dense())) <= {0.0, 1.0}


def test_structure_queries() -> None:
    s = Scenario.from_spec({"domain": SPEC_DOMAIN, "workload": GROUPS})
    W = s.workload
    assert len(W.terms) == 1 + 1 + 3 + 1 + 1 + 1
    np.testing.assert_array_equal(W.weights, [2, 1, 1, 1, 1, 1, 0.5, 1])
    assert not W.is_product_union
    with pytest.raises(NotApplicable, match="is not a Kronecker product"):
        W.products()
    assert W.attribute_sets == ((0, 2), (2,), (0, 1), (1, 2))
    assert W.downward_closure() == ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    parts = W.split(W.answer(np.ones(24)))
    assert [len(p) for p in parts] == [t.num_queries for t in W.terms]
    assert len(W.query_labels()) == W.num_queries
    assert W.shape == (W.num_queries, 24)
    assert W.to_spec() == GROUPS
    assert W.describe() == f"{W.num_queries:,} queries over 24 cells (8 terms)"


def test_products_and_factor_grams() -> None:
    d = Domain.from_sizes([3, 4], kinds=["numeric", "numeric"])
    W = Workload.product(d, {"a2": PrefixBlock(4)}, weight=3.0)
    ((weight, factors),) = W.products()
    assert weight == 3.0 and factors[0].is_total() and isinstance(factors[1], PrefixBlock)
    ((_, grams),) = W.factor_grams()
    np.testing.assert_array_equal(grams[0], np.ones((3, 3)))
    np.testing.assert_array_equal(grams[1], PrefixBlock(4).gram_array())
    one = Workload.one_dim(AllRangeBlock(5))
    assert one.domain.names == ("x",) and one.num_queries == 15
    assert one.domain["x"].numeric


def test_constructors_and_validation() -> None:
    d = Domain.from_sizes([2, 3, 4])
    assert Workload.marginals(d, k=2).num_queries == 6 + 8 + 12
    assert Workload.marginals(d, upto=1).num_queries == 1 + 2 + 3 + 4
    assert Workload.marginals(d, sets=[["a3", "a1"]]).terms[0].attrs == (0, 2)
    with pytest.raises(ValueError, match="workload: needs at least one query group"):
        Workload(d, ())
    W = Workload(d, (Product((("a2", IdentityBlock(3)),), weight=2.0), Marginals(k=0)))
    np.testing.assert_allclose(W.answer(np.ones(24)), [16, 16, 16, 24])


@pytest.mark.parametrize("sizes,kwargs,m", [
    ([50, 100, 7, 4, 2], {"upto": 5}, 618_120),  # CPS all marginals = prod(n_i + 1)
    ([100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2], {"upto": 3}, 21_043_262),
    ([100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2], {"k": 3}, 20_894_536),
    ([10] * 40, {"k": 2}, 78_000),
])
def test_query_counts_of_the_papers(sizes, kwargs, m: int) -> None:
    W = Workload.marginals(Domain.from_sizes(sizes), **kwargs)
    assert W.num_queries == m
    assert W.matrix.shape == (m, math.prod(sizes))


def test_prefix_marginal_counts_of_the_papers() -> None:
    adult = {f"n{i}": {"size": s, "kind": "numeric"}
             for i, s in enumerate([100, 100, 100, 99, 85])}
    adult.update({f"c{i}": s for i, s in enumerate([42, 16, 15, 9, 7, 6, 5, 2, 2])})
    s = Scenario.from_spec({"domain": adult, "workload": [{"prefix_marginals": {"k": 2}}]})
    assert s.workload.num_queries == 148_137  # HDMM Table 6 Adult 2D prefix-marginals
    cps = {"a": {"size": 50, "kind": "numeric"}, "b": {"size": 100, "kind": "numeric"},
           "c": 7, "d": 4, "e": 2}
    sets = [["a", "b", *rest] for k in range(4) for rest in itertools.combinations("cde", k)]
    s = Scenario.from_spec({"domain": cps, "workload": [{"prefix_marginals": {"sets": sets}}]})
    assert s.workload.num_queries == 600_000  # CPS all prefix-marginals
