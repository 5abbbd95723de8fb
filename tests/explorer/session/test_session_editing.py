"""The session's scenario and the spec being edited: drafts, YAML, uploads, export.
"""

from __future__ import annotations

import pytest

from engine.privacy import Privacy
from engine.scenario import Scenario
from explorer.planning.store import PlanStore
from explorer.session import Session, spec_text

PREFIX_SPEC = {"domain": {"x": {"size": 16, "kind": "numeric"}},
               "workload": [{"product": {"x": "prefix"}}],
               "privacy": {"noise": "laplace", "epsilon": 1.0},
               "mechanisms": ["identity", "h2"]}


@pytest.fixture
def store() -> PlanStore:
    return PlanStore()


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

    parsed: list[str] = []
    real = spec_text.read_spec
    monkeypatch.setattr(spec_text, "read_spec", lambda text, *a, **k: parsed.append(text)
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


def test_default_privacy_is_the_scenarios():
    session = Session(PREFIX_SPEC, store=PlanStore())
    assert isinstance(session.privacy, Privacy)
    assert session.privacy.noise == "laplace" and session.privacy.epsilon == 1.0
