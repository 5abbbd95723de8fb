"""Cheap first, estimates always: the planning order and its rules.

The estimates come from the engine's cost model (``Mechanism.estimate``); these tests check
that the explorer orders, labels and holds back mechanisms by them.
"""

from __future__ import annotations

import math

import pytest

from engine.mechanisms import get
from engine.scenario import Scenario
from explorer.planning import schedule as schedule_module
from explorer.planning.schedule import (
    AUTO_START_SECONDS,
    OPERATIONS_PER_SECOND,
    Estimate,
    estimate_mechanism,
    plan_order,
    schedule,
)


def _scenario(size: int, mechanisms: list[str]) -> dict:
    return {
        "domain": {"x": {"size": size, "kind": "numeric"}},
        "workload": [{"product": {"x": "prefix"}}],
        "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
        "mechanisms": mechanisms,
    }


@pytest.fixture
def prefix_2048():
    s = Scenario.from_spec(_scenario(2048, ["identity"]))
    return s.workload, s.privacy


def test_an_estimate_is_the_cost_models_planning_work_at_the_stated_rate(prefix_2048):
    workload, privacy = prefix_2048
    cost = get("hdmm-opt0").estimate(workload, privacy)
    e = estimate_mechanism("hdmm-opt0", workload, privacy)
    assert e.applicable
    assert e.operations == cost.plan_operations and e.bytes == cost.plan_bytes
    # OPT_0's dense model: 100 n**3 operations on the 2048 x 2048 Gram
    assert e.operations == pytest.approx(100.0 * 2048.0**3, rel=1e-12)
    assert e.seconds == pytest.approx(e.operations / OPERATIONS_PER_SECOND, rel=1e-12)
    assert e.seconds > AUTO_START_SECONDS and not e.starts_automatically


def test_a_refused_mechanism_is_ready_at_once_whatever_its_model_says():
    s = Scenario.from_spec(_scenario(16384, ["identity"]))  # over OPT_0's 8,192 cells
    e = estimate_mechanism("hdmm-opt0", s.workload, s.privacy)
    assert not e.applicable and e.seconds == 0.0 and e.starts_automatically
    assert e.describe() == "does not apply: ready at once"
    assert not estimate_mechanism("aim", s.workload, s.privacy).applicable  # data-dependent


def test_estimates_read_as_rough_figures(monkeypatch):
    monkeypatch.setattr(schedule_module, "OPERATIONS_PER_SECOND", 1e9)
    assert (
        Estimate("m", 3.1e9, 120 * 2**20).describe()
        == "~3e9 operations, 120 MiB, about 3 s (estimate)"
    )
    assert (
        Estimate("m", 2e8, 512.0).describe() == "~2e8 operations, 512 bytes, under 1 s (estimate)"
    )
    minutes = Estimate("m", 600.0 * 1e9, 2**30)
    assert minutes.describe().endswith("1 GiB, about 10 min (estimate)")
    assert Estimate("m", 1e15, 0.0).describe().endswith("about 12 days (estimate)")
    assert Estimate("m", math.inf, math.inf).describe() == "no estimate"
    assert Estimate("m", math.inf, math.inf).seconds == math.inf


def test_plans_go_cheapest_first_and_ties_keep_their_order():
    a, b = Estimate("a", 5e9, 0.0), Estimate("b", 1e6, 0.0)
    c, d = Estimate("c", 1e6, 0.0), Estimate("d", 0.0, 0.0, applicable=False)
    unknown = Estimate("u", math.inf, math.inf)
    assert [e.mechanism for e in plan_order([unknown, a, b, c, d])] == ["d", "b", "c", "a", "u"]


def test_mechanisms_over_a_minute_are_held_until_asked_for(prefix_2048):
    workload, privacy = prefix_2048
    names = ["hdmm-opt0", "h2", "identity"]
    start, held = schedule(names, workload, privacy)
    assert [e.mechanism for e in held] == ["hdmm-opt0"]
    assert "hdmm-opt0" not in [e.mechanism for e in start]
    assert [e.mechanism for e in start] == ["h2", "identity"]
    seconds = [e.seconds for e in start]
    assert seconds == sorted(seconds)
    start, held = schedule(names, workload, privacy, allowed=["hdmm-opt0"])
    assert held == [] and start[-1].mechanism == "hdmm-opt0"
