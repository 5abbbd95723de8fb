"""Typed plan views: each validates what it holds and names the bad value; a Plan carries
only views, reachable by key."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from engine.linalg.matrix import Identity
from engine.mechanisms import get
from engine.mechanisms.views import (
    MAX_VIEW_ENTRIES,
    Fact,
    FactsView,
    MatrixView,
    SeriesView,
    TableView,
    WeightsView,
    check_views,
    factor_matrices,
)
from engine.privacy import Privacy
from engine.workloads import PrefixBlock, Workload

WORDS = {"title": "A title", "caption": "What it shows, in plain words."}


def test_fact_holds_a_plain_scalar() -> None:
    fact = Fact("gap", "certified duality gap (relative)", np.float64(2e-8))
    assert type(fact.value) is float and fact.value == 2e-8
    assert type(Fact("rows", "measurements", np.int64(7), "rows").value) is int
    assert Fact("exact", "exact", np.bool_(True)).value is True
    with pytest.raises(ValueError, match=r"fact 'gap': expected a number, text or flag, got \["):
        Fact("gap", "gap", [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key and label must be non-empty"):
        Fact("gap", "", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fact.value = 1.0  # type: ignore[misc]


def test_every_view_needs_words() -> None:
    with pytest.raises(ValueError, match="SeriesView 's': caption must be non-empty"):
        SeriesView(key="s", title="T", caption=" ", values=np.ones(2))
    with pytest.raises(ValueError, match="WeightsView 'w': title must be non-empty"):
        WeightsView(key="w", title="", caption="c", names=("a",), values=np.ones(1))
    with pytest.raises(ValueError, match="key must be non-empty"):
        FactsView(key="", facts=(Fact("a", "a", 1),), **WORDS)


def test_facts_view() -> None:
    view = FactsView(key="opt", facts=(Fact("loss", "error", 3.5, "squared counts"),
                                       Fact("kind", "family", "p-identity")), **WORDS)
    assert view["loss"] == 3.5 and "kind" in view and "gap" not in view
    with pytest.raises(KeyError, match="no fact 'gap'; facts: loss, kind"):
        view["gap"]
    with pytest.raises(ValueError, match=r"repeated fact keys \['a', 'a'\]"):
        FactsView(key="f", facts=(Fact("a", "a", 1), Fact("a", "b", 2)), **WORDS)
    with pytest.raises(ValueError, match="needs at least one fact"):
        FactsView(key="f", facts=(), **WORDS)


def test_matrix_view() -> None:
    source = np.arange(6.0).reshape(2, 3)
    view = MatrixView(key="A", matrix=source, row_label="measurement", **WORDS)
    source[0, 0] = 99.0  # the view holds its own read-only copy
    assert view.array()[0, 0] == 0.0 and not view.array().flags.writeable
    assert view.shape == (2, 3) and (view.row_label, view.column_label) == ("measurement",
                                                                            "column")
    implicit = MatrixView(key="I", matrix=Identity(4), **WORDS)
    np.testing.assert_array_equal(implicit.array(), np.eye(4))
    with pytest.raises(ValueError, match=r"MatrixView 'A': expected a 2-D array, got shape \(3,\)"):
        MatrixView(key="A", matrix=np.ones(3), **WORDS)
    with pytest.raises(ValueError, match="'A': contains NaN"):
        MatrixView(key="A", matrix=np.full((2, 2), np.nan), **WORDS)
    with pytest.raises(ValueError, match=r"MatrixView 'A': expected numbers, got \["):
        MatrixView(key="A", matrix=[["a", "b"]], **WORDS)
    with pytest.raises(ValueError, match=f"a 3,000 x 3,000 array exceeds the "
                                         f"{MAX_VIEW_ENTRIES:,} entries"):
        MatrixView(key="big", matrix=np.zeros((3000, 3000)), **WORDS)
    # an implicit matrix of any size is held, pictured block by block, never listed
    big = MatrixView(key="big", matrix=Identity(3000), **WORDS)
    assert big.shape == (3000, 3000) and not big.explicit and implicit.explicit
    with pytest.raises(ValueError, match=f"listed only up to {MAX_VIEW_ENTRIES:,} entries"):
        big.array()
    picture = big.picture(3, 2, statistic="mean")
    np.testing.assert_allclose(picture.values, [[1 / 1500, 0], [1 / 3000, 1 / 3000],
                                                [0, 1 / 1500]], rtol=0, atol=1e-15)


def test_weights_view() -> None:
    view = WeightsView.of({(0,): 0.5, "a x b": 2.0}, key="w", units="share", **WORDS)
    assert view.as_dict() == {"(0,)": 0.5, "a x b": 2.0} and view.units == "share"
    with pytest.raises(ValueError, match="'w': 2 names for 3 weights"):
        WeightsView(key="w", names=("a", "b"), values=np.ones(3), **WORDS)
    with pytest.raises(ValueError, match=r"weights must be finite, got \[1.0, inf\]"):
        WeightsView(key="w", names=("a", "b"), values=np.array([1.0, np.inf]), **WORDS)
    with pytest.raises(ValueError, match="needs at least one weight"):
        WeightsView(key="w", names=(), values=np.ones(0), **WORDS)


def test_table_view() -> None:
    view = TableView.of([{"operator": "kron", "rmse": 2.5}, {"operator": "opt0", "why": "big"}],
                        key="t", **WORDS)
    assert view.columns == ("operator", "rmse", "why")
    assert view.column("rmse") == [2.5, ""]  # a missing value is an empty cell
    assert view.records()[1] == {"operator": "opt0", "rmse": "", "why": "big"}
    with pytest.raises(KeyError, match="no column 'loss'; columns: operator, rmse, why"):
        view.column("loss")
    with pytest.raises(ValueError, match="row 0 has 1 values for 2 columns"):
        TableView(key="t", columns=("a", "b"), rows=((1,),), **WORDS)
    with pytest.raises(ValueError, match=r"row 0 column 'a': expected a number, text or flag"):
        TableView(key="t", columns=("a",), rows=(([1, 2],),), **WORDS)
    with pytest.raises(ValueError, match="columns must be distinct and non-empty"):
        TableView(key="t", columns=("a", "a"), rows=(), **WORDS)


def test_series_view_allows_infinity_but_not_nothing() -> None:
    view = SeriesView(key="s", values=[3.0, np.inf, 1.0], x_label="candidate", **WORDS)
    assert view.values.tolist() == [3.0, np.inf, 1.0] and view.x_label == "candidate"
    with pytest.raises(ValueError, match="'s': needs at least one value"):
        SeriesView(key="s", values=[], **WORDS)


def test_factor_matrices_show_small_parts_only() -> None:
    views = factor_matrices(["a", "b"], [Identity(3), Identity(3000)])
    assert [v.key for v in views] == ["factor_sizes", "factor[a]"]
    assert views[0]["factor_rows[b]"] == 3000


def test_a_plan_carries_only_checked_views() -> None:
    plan = get("identity").plan(Workload.one_dim(PrefixBlock(8)), Privacy(noise="laplace"))
    assert plan.fact("kind") == "kron" and plan.view("factor[x]").shape == (8, 8)
    keys = [v.key for v in plan.views()]
    assert plan.view(keys[-1]) is plan.views()[-1]
    with pytest.raises(KeyError, match=re.escape("identity: no view 'nope'; views: "
                                                 + ", ".join(keys))):
        plan.view("nope")
    with pytest.raises(KeyError, match="identity: no fact 'nope'"):
        plan.fact("nope")
    facts = FactsView(key="f", facts=(Fact("a", "a", 1),), **WORDS)
    with pytest.raises(ValueError, match=r"plan views: repeated keys \['f'\]"):
        dataclasses.replace(plan, shown=(facts, facts))
    with pytest.raises(ValueError, match="plan views: .* is not one of FactsView"):
        check_views([{"a": 1}])  # type: ignore[list-item]
    assert dataclasses.replace(plan, shown=[facts]).views() == (facts,)
