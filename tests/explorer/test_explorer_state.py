"""The session view-model and the plan store, without a browser or a server."""

from __future__ import annotations

import math
import threading

import pytest

from engine.compare import Comparison, ComparisonRow
from engine.errors import Cancelled, NotApplicable
from engine.mechanisms import mechanism_class, registry_names
from engine.privacy import Privacy
from engine.scenario import Scenario
from explorer import state
from explorer.state import DEFAULT_SPEC, PlanStore, Session, session_for, workload_key

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

    monkeypatch.setattr(state, "compare", no_planning)
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


def _fake_compare(behaviour):
    """A stand-in for engine.compare.compare that calls ``behaviour(name, progress)``."""

    def fake(workload, privacy, mechanisms, params=None, progress=None, on_row=None):
        from engine.bounds import svd_bound

        for name in mechanisms:
            plan = behaviour(name, progress)
            row = ComparisonRow(name, name, plan, None if plan else "not applicable: x", 0.0)
            on_row(row)
        return Comparison(workload, privacy, svd_bound(workload), ())

    return fake


def test_cancel_stops_a_running_job_and_keeps_finished_rows(store, monkeypatch):
    started, release = threading.Event(), threading.Event()

    def behaviour(name, progress):
        if name == "identity":
            return None
        started.set()
        for i in range(10_000):  # an optimiser reporting every iteration
            release.wait(0.001)
            progress.report(i, 1.0 / (i + 1))
        raise AssertionError("cancel was ignored")

    monkeypatch.setattr(state, "compare", _fake_compare(behaviour))
    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison(background=True)
    assert job is not None and session.job is job
    assert started.wait(10)
    status = job.status()
    assert status.state == "running" and status.current == "h2" and status.done == 1

    session.cancel()
    assert job.status().state in ("cancelling", "cancelled")
    assert job.wait(10)
    assert job.status().state == "cancelled"
    session.poll()
    assert session.job is None
    assert [r.mechanism for r in session.comparison.rows] == ["identity"]
    assert session.missing() == ["h2"]


def test_skip_stops_one_mechanism_and_plans_the_rest(store, monkeypatch):
    started = threading.Event()
    real = state.compare

    def slow_h2_then_real(workload, privacy, mechanisms, params=None, progress=None,
                          on_row=None):
        if mechanisms[0] == "h2":
            started.set()
            for i in range(100_000):  # an optimiser reporting every iteration
                threading.Event().wait(0.001)
                progress.report(i, 1.0)
            raise AssertionError("skip was ignored")
        return real(workload, privacy, mechanisms, params, progress, on_row)

    monkeypatch.setattr(state, "compare", slow_h2_then_real)
    session = Session(dict(PREFIX_SPEC, mechanisms=["h2", "identity", "wavelet"]), store=store)
    job = session.request_comparison(background=True)
    assert started.wait(10)
    assert session.skip() == "h2"
    assert job.wait(10) and job.status().state == "done"
    session.poll()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["identity"].rmse is not None and rows["wavelet"].rmse is not None
    assert rows["h2"].rmse is None and rows["h2"].error.startswith("not planned: skipped")
    # Automatic planning leaves the skipped mechanism alone; an explicit request plans it.
    assert session.missing() == [] and session.request_comparison() is None
    monkeypatch.setattr(state, "compare", real)
    session.request_comparison(background=False, include_skipped=True)
    assert session.row("h2").rmse is not None


def test_a_crashing_mechanism_is_reported_and_the_others_still_run(store, monkeypatch):
    real = state.compare
    calls = []

    def flaky(workload, privacy, mechanisms, params=None, progress=None, on_row=None):
        calls.append(list(mechanisms))
        if mechanisms[0] == "identity":
            raise TypeError("solver exploded")
        return real(workload, privacy, mechanisms, params, progress, on_row)

    monkeypatch.setattr(state, "compare", flaky)
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["identity"].error == "failed: TypeError: solver exploded"
    assert rows["h2"].rmse is not None
    assert calls == [["identity", "h2"], ["h2"]]


def test_job_status_lines_are_plain():
    status = state.JobStatus("running", 4, 1, "hdmm", 120, 3.5, "", 2.0)
    assert status.describe() == "Planning hdmm (2 of 4), iteration 120, objective 3.5..."
    assert status.fraction == 0.25 and not status.finished
    assert state.JobStatus("done", 4, 4, None, 0, math.nan, "", 2.04).describe() == \
        "Planned 4 mechanism(s) in 2.0 s."


def test_per_query_variances_are_computed_once_and_rescaled(store, monkeypatch):
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    first = session.plan("identity").variances()

    def boom(*args, **kwargs):
        raise AssertionError("unit variances must be memoised")

    monkeypatch.setattr("engine.error.per_query_variances", boom)
    session.privacy.epsilon = 2.0
    second = session.plan("identity").variances()
    assert second == pytest.approx(first / 4.0)  # Laplace variance scales with 1/eps^2


def test_sessions_are_shared_by_id():
    sid, first = session_for(None)
    again_sid, again = session_for(sid)
    assert again is first and again_sid == sid
    other_sid, other = session_for("not-a-valid-id!")
    assert other is not first and other_sid != "not-a-valid-id!" and other_sid.isalnum()


def test_workload_key_depends_on_the_workload_only():
    a = Scenario.from_spec(DEFAULT_SPEC)
    b = Scenario.from_spec(dict(DEFAULT_SPEC, privacy={"noise": "zcdp", "rho": 2.0}))
    c = Scenario.from_spec(PREFIX_SPEC)
    assert workload_key(a.workload) == workload_key(b.workload) != workload_key(c.workload)


def test_one_line_messages():
    assert state.one_line(NotApplicable("not applicable: too big")) == "not applicable: too big"
    assert state.one_line(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert state.one_line(Cancelled()) == "Cancelled"


def test_default_privacy_is_the_scenarios():
    session = Session(PREFIX_SPEC, store=PlanStore())
    assert isinstance(session.privacy, Privacy)
    assert session.privacy.noise == "laplace" and session.privacy.epsilon == 1.0
