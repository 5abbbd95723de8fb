"""Planning jobs: shared by their subscribers, with per-subscriber cancel and skip.

No browser and no server: jobs run on the store's planner threads (or the calling thread) and
engine.workflows.compare is replaced where a test needs a mechanism that runs until it is stopped.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from planning_fakes import PREFIX_SPEC, fake_compare

from explorer.pages.compare import queue_table
from explorer.planning import jobs
from explorer.planning.jobs import JobStatus, queue_rows
from explorer.planning.schedule import Estimate, estimate_mechanism
from explorer.planning.store import PlanStore
from explorer.session import Session


@pytest.fixture
def store() -> PlanStore:
    return PlanStore()


def _planning(job: jobs.PlanningJob, timeout: float = 10) -> bool:
    """Wait until ``job`` itself plans h2. A fake's ``started`` event alone is not enough: a
    job an earlier test left in its own store's queue may call the same patched fake first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = job.status()
        if status.state == "running" and status.current == "h2":
            return True
        time.sleep(0.01)
    return False


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

    monkeypatch.setattr(jobs, "compare", fake_compare(behaviour))
    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison(background=True)
    assert job is not None and session.job is job
    assert started.wait(10) and _planning(job)
    assert job.status().done == 1

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
    real = jobs.compare

    def slow_h2_then_real(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        if mechanisms[0] == "h2":
            started.set()
            for i in range(100_000):  # an optimiser reporting every iteration
                threading.Event().wait(0.001)
                progress.report(i, 1.0)
            raise AssertionError("skip was ignored")
        return real(workload, privacy, mechanisms, params=params, progress=progress,
                    on_row=on_row, executor=executor)

    monkeypatch.setattr(jobs, "compare", slow_h2_then_real)
    session = Session(dict(PREFIX_SPEC, mechanisms=["h2", "identity", "wavelet"]), store=store)
    job = session.request_comparison(background=True)
    assert started.wait(10) and _planning(job)
    assert session.skip() == "h2"
    assert job.wait(10) and job.status().state == "done"
    session.poll()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["identity"].rmse is not None and rows["wavelet"].rmse is not None
    assert rows["h2"].rmse is None and rows["h2"].error.startswith("not planned: skipped")
    # Automatic planning leaves the skipped mechanism alone; an explicit request plans it.
    assert session.missing() == [] and session.request_comparison() is None
    monkeypatch.setattr(jobs, "compare", real)
    session.request_comparison(background=False, include_skipped=True)
    assert session.row("h2").rmse is not None


def test_a_crashing_mechanism_is_reported_and_the_others_still_run(store, monkeypatch):
    real = jobs.compare
    calls = []

    def flaky(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        calls.append(list(mechanisms))
        if mechanisms[0] == "identity":
            raise TypeError("solver exploded")
        return real(workload, privacy, mechanisms, params=params, progress=progress,
                    on_row=on_row, executor=executor)

    monkeypatch.setattr(jobs, "compare", flaky)
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["identity"].error == "failed: TypeError: solver exploded"
    assert rows["h2"].rmse is not None
    assert calls == [["identity", "h2"], ["h2"]]


def test_job_status_lines_are_plain():
    status = JobStatus("running", 4, 1, "hdmm", 120, 3.5, "", 2.0)
    assert status.describe() == "Planning hdmm (2 of 4), iteration 120, objective 3.5..."
    assert status.fraction == 0.25 and not status.finished
    assert (
        JobStatus("done", 4, 4, None, 0, math.nan, "", 2.04).describe()
        == "Planned 4 mechanism(s) in 2.0 s."
    )


def _until_stopped(started: threading.Event):
    """A behaviour for :func:`_fake_compare`: identity is not applicable, the rest run until
    their progress is cancelled."""

    def behaviour(name, progress):
        if name == "identity":
            return None
        started.set()
        for i in range(100_000):  # an optimiser reporting every iteration
            threading.Event().wait(0.001)
            progress.report(i, 1.0 / (i + 1))
        raise AssertionError("the job was never stopped")

    return behaviour


def test_one_session_cancelling_leaves_the_others_job_running(store, monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(jobs, "compare", fake_compare(_until_stopped(started)))
    first, second = Session(PREFIX_SPEC, store=store), Session(PREFIX_SPEC, store=store)
    job = first.request_comparison()
    assert second.request_comparison() is job  # one job for both
    assert started.wait(10) and _planning(job) and job.subscribers() == 2

    first.cancel()
    assert first.job is None and second.job is job
    assert job.status().state == "running" and not job.wait(0.2)  # still planning for B
    assert job.subscribers() == 1 and not job.waits(first)

    second.cancel()  # the last subscriber leaves: now the job stops
    assert job.wait(10) and job.status().state == "cancelled"
    assert store.missing(first.key, "laplace", ["identity", "h2"]) == ["h2"]


def test_a_skip_stops_the_mechanism_only_once_every_subscriber_skipped_it(store, monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(jobs, "compare", fake_compare(_until_stopped(started)))
    first, second = Session(PREFIX_SPEC, store=store), Session(PREFIX_SPEC, store=store)
    job = first.request_comparison()
    second.request_comparison()
    assert started.wait(10) and _planning(job)

    assert first.skip() == "h2"
    assert not job.wait(0.2) and job.status().current == "h2"  # B still waits for h2
    first.poll()
    assert first.row("h2").error.startswith("not planned: skipped")
    second.poll()
    assert second.row("h2") is None  # B did not skip it: no "skipped" row for B

    assert second.skip() == "h2"  # now nobody wants it
    assert job.wait(10) and job.status().state == "done"
    assert second.missing() == [] and first.missing() == []


def test_closing_the_last_tab_releases_the_session_and_stops_its_job(store, monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(jobs, "compare", fake_compare(_until_stopped(started)))
    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison()
    assert started.wait(10) and _planning(job)
    session.release()
    assert session.job is None
    assert job.wait(10) and job.status().state == "cancelled"


def test_jobs_beyond_the_planner_limit_wait_in_a_numbered_queue(monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(jobs, "compare", fake_compare(_until_stopped(started)))
    store = PlanStore(planners=1)
    sessions = [
        Session(dict(PREFIX_SPEC, domain={"x": {"size": n, "kind": "numeric"}}), store=store)
        for n in (8, 16, 32)
    ]
    running, second, third = (s.request_comparison() for s in sessions)
    assert started.wait(10) and _planning(running)
    assert running.status().state == "running" and running.status().position == 0
    assert (second.status().state, second.status().position) == ("queued", 1)
    assert (third.status().state, third.status().position) == ("queued", 2)
    assert (
        third.status().describe()
        == "Waiting for a free planner: number 2 in the queue (1 job(s) ahead); "
        "this job: under 1 s (estimate)..."
    )
    assert len(store.running()) == 3

    sessions[1].cancel()  # a queued job nobody waits for leaves the queue at once
    assert second.status().state == "cancelled" and third.status().position == 1
    sessions[0].cancel()
    assert running.wait(10)
    sessions[2].cancel()
    assert third.wait(10) and store.running() == []


def test_a_later_subscriber_adds_the_mechanisms_it_lacks(store, monkeypatch):
    release = threading.Event()
    real = jobs.compare

    def gated(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        release.wait(10)
        return real(workload, privacy, mechanisms, params=params, progress=progress,
                    on_row=on_row, executor=executor)

    monkeypatch.setattr(jobs, "compare", gated)
    first = Session(dict(PREFIX_SPEC, mechanisms=["identity"]), store=store)
    second = Session(dict(PREFIX_SPEC, mechanisms=["identity", "h2"]), store=store)
    job = first.request_comparison()
    assert second.request_comparison() is job
    assert job.names == ("identity", "h2")
    release.set()
    assert job.wait(30) and job.status().state == "done"
    second.poll()
    assert second.complete and second.row("h2").rmse is not None


def test_a_queued_job_shows_its_place_and_the_cost_models_estimate(monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(jobs, "compare", fake_compare(_until_stopped(started)))
    store = PlanStore(planners=1)
    first = Session(PREFIX_SPEC, store=store)
    waiting = Session(dict(PREFIX_SPEC, domain={"x": {"size": 512, "kind": "numeric"}},
                           mechanisms=["hdmm-opt0"]), store=store)
    running, queued = first.request_comparison(), waiting.request_comparison()
    assert started.wait(10) and _planning(running)
    status = queued.status()
    expected = estimate_mechanism("hdmm-opt0", waiting.workload, waiting.privacy)
    assert status.position == 1 and status.estimate == pytest.approx(expected.seconds, rel=1e-12)
    assert 0.5 < status.estimate < 60  # ~1.3e10 operations at 1e10 per second
    assert status.describe() == (
        "Waiting for a free planner: number 1 in the queue (0 job(s) ahead); "
        "this job: about 1 s (estimate)..."
    )
    assert math.isnan(running.status().estimate)
    waiting.cancel()
    first.cancel()
    assert running.wait(10)


def test_queue_rows_say_where_each_mechanism_stands():
    estimates = {"a": Estimate("a", 2e9, 2**20), "b": Estimate("b", 4e9, 2**20)}
    slow = Estimate("c", 1e12, 2**30)
    running = JobStatus("running", 2, 0, "a", 0, math.nan, "", 0.0)
    rows = queue_rows(running, ["a", "b"], [slow], estimates)
    assert [r[:2] for r in rows] == [
        ("a", "planning now"),
        ("b", "queued: number 1 after the running one"),
        ("c", "not started: estimated over 60 s; press 'Plan anyway' to start it"),
    ]
    assert rows[0][2] == estimates["a"].describe() and rows[2][2] == slow.describe()
    # before the job starts (a page loading): the order they will start in
    assert [r[:2] for r in queue_rows(None, ["a", "b"], [], estimates)] == [
        ("a", "starts first"), ("b", "starts number 2")]
    queued = JobStatus("queued", 2, 0, "a", 0, math.nan, "", 0.0, position=3)
    assert queue_rows(queued, ["a"], [], estimates)[0][1] == (
        "waiting for a free planner (job number 3 in line)"
    )
    table = queue_table(rows)
    assert table.count("\n| ") == 4 and "estimated over 60 s wait for 'Plan anyway'" in table
    assert queue_table([]) == ""
