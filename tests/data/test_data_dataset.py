"""Dataset: marginals by counting, data-vector order, guards, immutability, sampling."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.data import Dataset
from engine.domain import Domain
from engine.errors import SpecError


def small_dataset(sizes: list[int], rows: list[list[int]]) -> Dataset:
    domain = Domain.from_sizes(sizes)
    frame = pd.DataFrame(
        np.array(rows, dtype=np.int64).reshape(-1, len(sizes)), columns=list(domain.names)
    )
    return Dataset.from_dataframe(frame, domain)


@st.composite
def datasets_and_subsets(draw: st.DrawFn) -> tuple[Dataset, list[str]]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    rows = draw(st.lists(st.tuples(*(st.integers(0, s - 1) for s in sizes)), max_size=40))
    ds = small_dataset(sizes, [list(r) for r in rows])
    names = draw(st.lists(st.sampled_from(ds.domain.names), unique=True))
    return ds, names


@settings(max_examples=150, deadline=None)
@given(datasets_and_subsets())
def test_marginal_by_counting_equals_marginal_of_datavector(case):
    ds, names = case
    # Reference histogram built independently of bincount: one increment per record.
    full = np.zeros(ds.domain.shape, dtype=np.int64)
    np.add.at(full, tuple(ds.column(n) for n in ds.domain.names), 1)
    np.testing.assert_array_equal(ds.datavector(), full.ravel())
    keep = {ds.domain.index(n) for n in names}
    expected = full.sum(axis=tuple(i for i in range(len(ds.domain)) if i not in keep))
    got = ds.marginal(names)
    assert got.dtype == np.int64
    assert got.shape == tuple(ds.domain.shape[i] for i in sorted(keep))
    np.testing.assert_array_equal(got, expected)
    assert got.sum() == ds.records


def test_marginal_axes_follow_domain_order_not_request_order():
    ds = small_dataset([2, 3, 4], [[0, 1, 3], [1, 2, 0], [1, 2, 0]])
    m = ds.marginal(["a3", "a1"])
    assert m.shape == (2, 4)
    assert m[1, 0] == 2 and m[0, 3] == 1 and m.sum() == 3
    np.testing.assert_array_equal(ds.marginal(["a3", "a1"]), ds.marginal(["a1", "a3"]))
    np.testing.assert_array_equal(ds.marginal(["a2", "a2"]), ds.marginal(["a2"]))
    np.testing.assert_array_equal(ds.marginal("a2"), [0, 1, 2])


def test_zero_way_marginal_is_a_0d_record_count():
    ds = small_dataset([2, 2], [[0, 1], [1, 1], [0, 0]])
    m = ds.marginal(())
    assert isinstance(m, np.ndarray) and m.ndim == 0 and int(m) == 3


def test_datavector_is_c_order_with_attribute_one_slowest():
    # Domain (2, 3): cell index = a1 * 3 + a2.
    ds = small_dataset([2, 3], [[0, 2], [1, 0], [1, 0], [1, 2]])
    np.testing.assert_array_equal(ds.datavector(), [0, 0, 1, 2, 0, 1])


def test_empty_dataset_has_zero_counts():
    ds = small_dataset([2, 3], [])
    assert ds.records == 0
    np.testing.assert_array_equal(ds.marginal(["a2"]), [0, 0, 0])
    assert int(ds.marginal(())) == 0


def test_datavector_guard_refuses_big_domains_and_points_to_marginals():
    domain = Domain.from_sizes([1000, 1000, 1000])
    ds = Dataset.synthetic(domain, 10, rng=0)
    with pytest.raises(SpecError, match=r"too large.*marginal"):
        ds.datavector()
    with pytest.raises(SpecError, match="max_cells"):
        ds.marginal(domain.names)
    assert ds.marginal(["a1", "a2"]).sum() == 10  # 1e6 cells is fine
    small = Dataset.synthetic(Domain.from_sizes([10, 10]), 5, rng=0)
    assert small.datavector(max_cells=100).shape == (100,)
    with pytest.raises(SpecError, match="100 cells, more than max_cells=99"):
        small.datavector(max_cells=99)


def test_unknown_attribute_is_a_one_line_error_with_suggestion():
    ds = small_dataset([2, 2], [[0, 1]])
    with pytest.raises(SpecError, match=r"marginal: unknown attribute 'a3'.*attributes: a1, a2"):
        ds.marginal(["a3"])


def test_from_dataframe_reorders_columns_and_checks_codes():
    domain = Domain.from_sizes([2, 3], names=["x", "y"])
    ds = Dataset.from_dataframe(pd.DataFrame({"y": [2, 0], "x": [1, 0]}), domain)
    assert list(ds.df.columns) == ["x", "y"]
    assert ds.df["y"].tolist() == [2, 0]
    with pytest.raises(SpecError, match=r"column 'y': 1 value outside 0\.\.2 \(row 2: 3\)"):
        Dataset.from_dataframe(pd.DataFrame({"x": [1, 0], "y": [2, 3]}), domain)
    with pytest.raises(SpecError, match=r"column 'x': 1 non-integer value \(row 1: 0\.5\)"):
        Dataset.from_dataframe(pd.DataFrame({"x": [0.5, 0], "y": [2, 1]}), domain)
    integral = Dataset.from_dataframe(pd.DataFrame({"x": [1.0, 0.0], "y": [2, 1]}), domain)
    assert integral.df["x"].dtype == np.int64


def test_dataset_cannot_be_mutated_through_its_views():
    domain = Domain.from_sizes([2, 3], names=["x", "y"])
    source = pd.DataFrame({"x": [1, 0], "y": [2, 0]})
    ds = Dataset.from_dataframe(source, domain)
    source.loc[0, "x"] = 0
    frame = ds.df
    frame.loc[0, "y"] = 1
    frame["x"] = 0
    with pytest.raises(ValueError):
        ds.column("y")[0] = 1
    with pytest.raises(AttributeError):
        ds.records = 5
    assert ds.df.to_dict("list") == {"x": [1, 0], "y": [2, 0]}


def test_project_keeps_domain_order_and_records():
    ds = Dataset.synthetic(Domain.from_sizes([2, 3, 4]), 50, rng=1)
    sub = ds.project(["a3", "a1"])
    assert sub.domain.names == ("a1", "a3") and sub.records == 50
    np.testing.assert_array_equal(sub.datavector(), ds.marginal(["a1", "a3"]).ravel())


def test_synthetic_is_seeded_and_correlation_ties_attributes():
    domain = Domain.from_sizes([5, 5])
    a = Dataset.synthetic(domain, 2000, rng=3)
    assert a == Dataset.synthetic(domain, 2000, rng=np.random.default_rng(3))
    assert a.records == 2000
    tied = Dataset.synthetic(domain, 2000, rng=3, correlation=1.0)
    np.testing.assert_array_equal(tied.column("a1"), tied.column("a2"))
    independent = np.corrcoef(a.column("a1"), a.column("a2"))[0, 1]
    assert abs(independent) < 0.1
    with pytest.raises(SpecError, match="correlation"):
        Dataset.synthetic(domain, 10, rng=0, correlation=1.5)


def test_sample_draws_existing_records():
    ds = Dataset.synthetic(Domain.from_sizes([3, 4]), 30, rng=2)
    sub = ds.sample(10, rng=0)
    assert sub.records == 10 and sub.domain == ds.domain
    rows = set(map(tuple, ds.df.to_numpy()))
    assert set(map(tuple, sub.df.to_numpy())) <= rows
    assert ds.sample(30, rng=0).datavector().tolist() == ds.datavector().tolist()
    assert ds.sample(100, rng=0, replace=True).records == 100
    with pytest.raises(SpecError, match="replace=True"):
        ds.sample(31, rng=0)


def test_marginals_of_all_pairs_sum_to_records():
    ds = Dataset.synthetic(Domain.from_sizes([3, 2, 4, 5]), 123, rng=4, correlation=0.5)
    for pair in itertools.combinations(ds.domain.names, 2):
        assert ds.marginal(pair).sum() == 123
