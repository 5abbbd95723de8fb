"""The session view-model, without a browser or a server."""

from __future__ import annotations

import math

import pytest

from engine.mechanisms import mechanism_class, registry_names
from engine.privacy import Privacy
from engine.scenario import Scenario
from explorer import planning
from explorer.planning import PlanStore
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

    monkeypatch.setattr(planning, "compare", no_planning)
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


def test_invalid_draft_keeps_the_last_valid_scenario_and_names_the_field(store):
    session = Session(PREFIX_SPEC, store=store)
    before = session.scenario
    bad = {"domain": {"x": 16}, "workload": [{"product": {"x": "prefx"}}]}

    message = session.apply_draft(bad)

    assert message == ("workload[0].product.x: unknown block 'prefx' (did you mean 'prefix'?); "
                       "allowed: identity, total, prefix, suffix, all_range, range, "
                       "circular_range, permuted, random, matrix, identity_total")
    assert session.draft_error == message
    assert session.scenario is before  # the last valid workload stays current
    assert session.draft == bad  # and the user's work is kept
    assert "prefx" in session.draft_text


def test_yaml_text_applies_and_syntax_errors_keep_the_text(store):
    session = Session(PREFIX_SPEC, store=store)
    text = "domain: {y: 4}\nworkload:\n- marginals: {k: 1}\n"
    session.draft_text = text  # what the spec editor does
    assert session.draft_error == ""
    assert session.scenario.workload.num_queries == 4
    assert session.draft_text == text

    broken = "domain: {y: 4\nworkload: ["
    session.draft_text = broken
    assert session.draft_error.startswith("scenario: not valid YAML:")
    assert session.draft_text == broken
    assert session.scenario.workload.num_queries == 4


def test_uploaded_file_errors_change_nothing(store):
    session = Session(PREFIX_SPEC, store=store)
    draft, text, scenario = session.draft, session.draft_text, session.scenario

    message = session.load_text("domain: {x: 4}\nworkload: [{product: {x: prefx}}]\n",
                                "bad.yaml")

    assert message.startswith("bad.yaml: workload[0].product.x: unknown block 'prefx'")
    assert (session.draft, session.draft_text, session.scenario) == (draft, text, scenario)
    assert session.draft_error == ""

    assert session.load_text('{"domain": {"z": 3}, "workload": {"marginals": {"k": 1}}}',
                             "ok.json") == ""
    assert session.scenario.domain.names == ("z",)


def test_an_upload_or_a_preset_parses_the_text_at_most_once(store, monkeypatch):
    # A census-sized spec (SF1: 1 MB of indicator rows) takes seconds to parse, so the
    # session parses an upload once and never re-parses the text it wrote itself; an edit
    # in the editor is parsed (once) and applied.
    from explorer import session as state

    parsed: list[str] = []
    real = state.read_spec
    monkeypatch.setattr(state, "read_spec", lambda text, *a, **k: parsed.append(text)
                        or real(text, *a, **k))
    session = Session(PREFIX_SPEC, store=store)
    assert parsed == []

    text = "domain: {z: 3}\nworkload: {marginals: {k: 1}}\n"
    assert session.load_text(text, "ok.yaml") == ""
    assert parsed == [text] and session.draft_text == text
    assert session.scenario.domain.names == ("z",)

    parsed.clear()
    draft = {"domain": {"y": 5}, "workload": [{"product": {"y": "prefix"}}]}
    assert session.apply_draft(draft) == ""
    assert parsed == [] and session.scenario.workload.num_queries == 5

    edited = session.draft_text.replace("5", "6")
    session.draft_text = edited
    assert parsed == [edited] and session.scenario.workload.num_queries == 6


def test_export_keeps_the_users_spec_with_the_live_privacy(store):
    session = Session(PREFIX_SPEC, store=store)
    session.privacy.epsilon = 2.0
    spec = session.export_spec()
    assert spec["privacy"] == {"noise": "laplace", "epsilon": 2.0}
    assert spec["mechanisms"] == ["identity", "h2"]
    again = Scenario.loads(session.export_yaml())
    assert again.workload.num_queries == 16 and again.privacy.epsilon == 2.0


def test_sync_draft_privacy_writes_the_slider_value_into_the_yaml(store):
    session = Session(PREFIX_SPEC, store=store)
    session.privacy.epsilon = 0.25
    assert "epsilon: 1.0" in session.draft_text  # a slider alone never re-dumps the YAML
    session.sync_draft_privacy()
    assert "epsilon: 0.25" in session.draft_text
    assert session.draft["privacy"] == {"noise": "laplace", "epsilon": 0.25}


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


def test_default_privacy_is_the_scenarios():
    session = Session(PREFIX_SPEC, store=PlanStore())
    assert isinstance(session.privacy, Privacy)
    assert session.privacy.noise == "laplace" and session.privacy.epsilon == 1.0


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
