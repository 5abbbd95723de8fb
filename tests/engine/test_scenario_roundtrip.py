"""A parsed scenario saves back to an equivalent document (YAML and JSON), over every group
kind and every 1-D block."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.privacy import Privacy
from engine.scenario import Scenario

FULL = {
    "domain": {"age": {"size": 12, "kind": "numeric"}, "sex": 2,
               "race": {"size": 3, "kind": "categorical", "labels": ["w", "b", "o"]},
               "hour": {"size": 6, "kind": "numeric", "bin_edges": [0, 4, 8, 12, 16, 20, 24]}},
    "workload": [
        {"product": {"age": "prefix", "sex": "identity"}, "weight": 2.0},
        {"product": {"age": "suffix", "race": "total"}},
        {"product": {"age": "all_range"}},
        {"product": {"age": {"block": "range", "width": 4}, "race": "identity"}},
        {"product": {"hour": "circular_range"}},
        {"product": {"hour": {"block": "circular_range", "width": 3}}},
        {"product": {"age": {"block": "permuted", "of": "all_range", "seed": 0}}},
        {"product": {"age": {"block": "permuted", "of": {"block": "range", "width": 2},
                             "seed": 5}}},
        {"product": {"race": {"block": "random", "count": 4, "p": 0.5, "seed": 1}}},
        {"product": {"sex": {"block": "matrix", "rows": [[1.0, 1.0], [1.0, -1.0]]}}},
        {"marginals": {"k": 2}, "weight": 0.5},
        {"marginals": {"upto": 1}},
        {"marginals": {"sets": [["race", "age"], ["sex"]]}},
        {"prefix_marginals": {"k": 1}},
        {"prefix_marginals": {"sets": [["age", "sex"]]}},
        {"affine": ["age", "hour"]},
        {"abs_diff": ["hour", "age"]},
        {"random": {"on": ["sex", "race"], "count": 5, "p": 0.3, "seed": 11}},
        {"matrix": {"on": ["race", "sex"], "rows": [[1, 0, 0, 1, 0, 0], [0, 1, 1, 0, 1, 1]]}},
    ],
    "privacy": {"noise": "gaussian", "epsilon": 0.5, "delta": 1e-8},
    "mechanisms": ["identity", "h2"],
}


def assert_same_scenario(a: Scenario, b: Scenario) -> None:
    assert a.to_spec() == b.to_spec()
    assert a.domain == b.domain
    assert a.privacy.key() == b.privacy.key()
    assert a.mechanisms == b.mechanisms
    assert a.workload.num_queries == b.workload.num_queries
    x = np.random.default_rng(0).integers(0, 5, a.domain.size).astype(float)
    np.testing.assert_array_equal(a.workload.answer(x), b.workload.answer(x))


def test_round_trip_through_spec() -> None:
    s = Scenario.from_spec(copy.deepcopy(FULL))
    doc = s.to_spec()
    again = Scenario.from_spec(doc)
    assert_same_scenario(s, again)
    assert again.to_spec() == doc
    # the saved document says the same as the written one (defaults spelled out)
    assert doc["domain"]["age"] == FULL["domain"]["age"]
    assert doc["domain"]["sex"] == 2
    assert doc["privacy"] == FULL["privacy"]
    assert doc["mechanisms"] == ["identity", "h2"]
    assert doc["workload"][0] == FULL["workload"][0]
    assert doc["workload"][18]["matrix"]["rows"] == [[1, 0, 0, 1, 0, 0], [0, 1, 1, 0, 1, 1]]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_through_text(fmt: str, tmp_path) -> None:
    s = Scenario.from_spec(copy.deepcopy(FULL))
    text = s.dumps(fmt)
    assert_same_scenario(s, Scenario.loads(text, fmt))
    path = tmp_path / f"scenario.{'yml' if fmt == 'yaml' else 'json'}"
    path.write_text(text)
    assert_same_scenario(s, Scenario.load(path))


@pytest.mark.parametrize("privacy", [{"noise": "laplace", "epsilon": 2.0},
                                     {"noise": "zcdp", "rho": 0.25},
                                     {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6,
                                      "calibration": "classical"}])
def test_round_trip_of_each_privacy_unit(privacy: dict) -> None:
    s = Scenario.from_spec({"domain": {"x": 4}, "workload": [{"marginals": {"k": 1}}],
                            "privacy": privacy})
    assert s.to_spec()["privacy"] == privacy
    assert_same_scenario(s, Scenario.loads(s.dumps()))


def test_defaults() -> None:
    s = Scenario.from_spec({"domain": {"x": 8}, "workload": {"product": {"x": "prefix"}}})
    assert s.workload.num_queries == 8
    assert s.privacy.key() == Privacy().key()
    assert s.mechanisms == ()
    assert "mechanisms" not in s.to_spec()
