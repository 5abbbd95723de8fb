"""The explorer shows the engine's one-line refusals (issue 15): a plan over the memory budget
is a "not applicable" row beside the others, and spec text the YAML 1.2 reader refuses leaves
the user's text in the editor with the message."""

from __future__ import annotations

import pytest

from engine.analysis.cost_model import set_memory_limit
from explorer.planning.store import PlanStore
from explorer.session import Session

SPEC = {
    "domain": {"x": {"size": 64, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
    "mechanisms": ["hdmm-opt0", "identity"],
}


@pytest.fixture
def small_budget():
    set_memory_limit("300KB")
    yield
    set_memory_limit(None)


def test_an_over_budget_mechanism_is_a_not_applicable_row(small_budget) -> None:
    session = Session(SPEC, store=PlanStore())
    session.compare_now()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["hdmm-opt0"].plan is None
    assert rows["hdmm-opt0"].error == (
        "not applicable: hdmm-opt0: needs a dense 64 x 64 Gram "
        "(4.59e+05 bytes); the limit is 293 KiB"
    )
    assert rows["identity"].rmse == pytest.approx(4.224679 * 32.5**0.5, rel=1e-6)


def test_spec_text_errors_keep_the_text() -> None:
    session = Session(SPEC, store=PlanStore())
    before = session.scenario
    text = "domain: {x: 8, x: 4}\nworkload: [{product: {x: prefix}}]\n"
    message = session.apply_text(text)
    assert message.startswith('scenario: found duplicate key "x"')
    assert session.draft_error == message and session.draft_text == text
    assert session.scenario is before
    assert (
        session.apply_text(
            "domain: {a: 4, b: 3}\nworkload: [{random: {on: [a, b], "
            "count: 3}}]\nprivacy: {noise: gaussian, epsilon: 1, "
            "delta: 1e-6}\n"
        )
        == ""
    )
    assert session.scenario.workload.num_queries == 3
