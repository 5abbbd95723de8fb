"""The session's plans and comparison: planned against the bound, re-scaled, never re-planned.
"""

from __future__ import annotations

import math

import pytest

from engine.mechanisms import mechanism_class, registry_names
from explorer.planning import jobs
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX_SPEC = {"domain": {"x": {"size": 16, "kind": "numeric"}},
               "workload": [{"product": {"x": "prefix"}}],
               "privacy": {"noise": "laplace", "epsilon": 1.0},
               "mechanisms": ["identity", "h2"]}


def data_independent() -> list[str]:
    return [n for n in registry_names() if not mechanism_class(n).data_dependent]


@pytest.fixture
def store() -> PlanStore:
    return PlanStore()


def test_default_session_plans_every_mechanism_against_the_bound(store):
    session = Session(store=store)
    assert session.comparison is None and not session.complete

    session.compare_now()

    assert session.mechanisms == list(registry_names())
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert set(rows) == set(registry_names())
    for name in data_independent():
        assert rows[name].rmse is not None or rows[name].error, name
    for name in registry_names():
        if mechanism_class(name).data_dependent:
            assert rows[name].rmse is None and "data-dependent" in rows[name].error
    bound = session.comparison.bound_rmse
    assert bound is not None
    # The SVD bound is a floor: every mechanism's RMSE is at or above it.
    assert all(r.rmse >= bound * (1 - 1e-9) for r in rows.values() if r.rmse is not None)
    # Rows are shown best first, and the best one is selected.
    rmses = [r.rmse for r in session.comparison.rows if r.rmse is not None]
    assert rmses == sorted(rmses)
    assert session.selected == session.comparison.best().mechanism
    assert session.complete


def test_identity_rmse_matches_the_closed_form(store):
    # Identity on 16 prefix queries with Laplace(eps=1): sigma^2 = 2, per-query variance
    # 2 * (a + 1) for prefix a, so RMSE = sqrt(2 * mean(1..16)) = sqrt(17).
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    assert session.plan("identity").rmse() == pytest.approx(math.sqrt(17.0), rel=1e-12)
    assert session.mechanisms == ["identity", "h2"]


def test_privacy_change_rescales_without_replanning(store, monkeypatch):
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    before = {r.mechanism: r for r in session.comparison.rows}

    def no_planning(*args, **kwargs):
        raise AssertionError("a privacy change must not re-plan")

    monkeypatch.setattr(jobs, "compare", no_planning)
    session.privacy.epsilon = 0.5

    after = {r.mechanism: r for r in session.comparison.rows}
    for name, row in after.items():
        assert row.plan.trace == before[name].plan.trace  # the same strategy
        assert row.rmse == pytest.approx(2.0 * before[name].rmse, rel=1e-12)  # Laplace: 1/eps
    assert session.comparison.privacy.epsilon == 0.5
    assert session.request_comparison() is None  # everything is cached


def test_plans_are_cached_per_workload_and_noise(store):
    first = Session(PREFIX_SPEC, store=store)
    first.compare_now()
    second = Session(PREFIX_SPEC, store=store)
    # A second session with the same workload sees the finished plans at once.
    assert second.complete
    assert [r.mechanism for r in second.comparison.rows] == \
        [r.mechanism for r in first.comparison.rows]
    # Another noise family needs its own plans (the sensitivity norm differs).
    second.privacy.noise = "gaussian"
    assert not second.complete and second.comparison.rows == ()  # only the bound is known
    second.compare_now()
    assert second.complete


def test_per_query_variances_are_computed_once_and_rescaled(store, monkeypatch):
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    first = session.variances("identity")

    def boom(*args, **kwargs):
        raise AssertionError("unit variances must be memoised")

    monkeypatch.setattr("engine.analysis.expected_error.per_query_variances", boom)
    session.privacy.epsilon = 2.0
    second = session.variances("identity")
    assert second == pytest.approx(first / 4.0)  # Laplace variance scales with 1/eps^2


def test_views_follow_the_best_plan_as_it_arrives_unless_the_user_chose(store):
    spec = {"domain": {"x": {"size": 64, "kind": "numeric"}},
            "workload": [{"product": {"x": "all_range"}}],
            "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
            "mechanisms": ["identity"]}
    session = Session(spec, store=store)
    session.compare_now()
    assert session.selected == "identity"
    # more plans arrive: the views move to the new best (wavelet 11.42 < identity 19.82)
    session.mechanisms = ["identity", "h2", "wavelet"]
    session.compare_now()
    rmse = {r.mechanism: round(r.rmse, 2) for r in session.comparison.rows}
    assert rmse == {"identity": 19.82, "h2": 12.74, "wavelet": 11.42}
    assert session.selected == "wavelet"
    # a mechanism the user picks stays picked when plans change
    session.selected = "identity"
    session.mechanisms = ["identity", "h2", "wavelet", "hb"]
    session.compare_now()
    assert session.selected == "identity"
