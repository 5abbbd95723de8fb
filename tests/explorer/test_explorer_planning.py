"""Planning jobs and the plan store: shared plans, per-subscriber cancel and skip, the queue.

No browser and no server: jobs run on the store's planner threads (or the calling thread) and
engine.workflows.compare is replaced where a test needs a mechanism that runs until it is stopped.
"""

from __future__ import annotations

import math
import os
import threading

import pytest
from threadpoolctl import threadpool_limits

from engine.errors import Cancelled, NotApplicable
from engine.scenario import Scenario
from engine.workflows.compare import Comparison, ComparisonRow
from explorer import planning
from explorer import session as state
from explorer.planning import PlanStore, workload_key
from explorer.session import DEFAULT_SPEC, Session

PREFIX_SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


@pytest.fixture
def store() -> PlanStore:
    return PlanStore()


def _fake_compare(behaviour):
    """A stand-in for engine.workflows.compare.compare that calls ``behaviour(name, progress)``."""

    def fake(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        from engine.analysis.svd_bound import svd_bound

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

    monkeypatch.setattr(planning, "compare", _fake_compare(behaviour))
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


def test_rows_wait_while_a_page_of_the_session_loads_in_a_browser(store, monkeypatch):
    release = threading.Event()

    def behaviour(name, progress):  # each row waits for the test's go
        release.wait(10)
        return None

    monkeypatch.setattr(planning, "compare", _fake_compare(behaviour))

    def shown(session):
        comparison = session.comparison
        return [] if comparison is None else sorted(r.mechanism for r in comparison.rows)

    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison(background=True)
    session.page_loading("compare page")  # its browser has not reported it loaded yet
    release.set()
    assert job.wait(10) and shown(session) == []
    session.poll()  # e.g. the poll of the page the user is leaving
    assert shown(session) == [] and session.job is job
    # every row is in the store, none on show: the headline must not say planning is over
    assert session.missing() == [] and not session.complete
    session.page_loaded("compare page")
    session.poll()
    assert shown(session) == ["h2", "identity"] and session.job is None
    assert session.complete
    session.page_loaded("compare page")  # a second report (the tab closing) changes nothing

    # a browser that never reports its page loaded holds the session back for a while only
    release.clear()
    other = Session(dict(PREFIX_SPEC, mechanisms=["wavelet"]), store=store)
    job = other.request_comparison(background=True)
    other.page_loading("never loads")
    release.set()
    assert job.wait(10)
    other.poll()
    assert shown(other) == []
    monkeypatch.setattr(state, "LOAD_PATIENCE", 0.0)
    other.poll()
    assert shown(other) == ["wavelet"]


def test_skip_stops_one_mechanism_and_plans_the_rest(store, monkeypatch):
    started = threading.Event()
    real = planning.compare

    def slow_h2_then_real(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        if mechanisms[0] == "h2":
            started.set()
            for i in range(100_000):  # an optimiser reporting every iteration
                threading.Event().wait(0.001)
                progress.report(i, 1.0)
            raise AssertionError("skip was ignored")
        return real(workload, privacy, mechanisms, params, progress, on_row, executor)

    monkeypatch.setattr(planning, "compare", slow_h2_then_real)
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
    monkeypatch.setattr(planning, "compare", real)
    session.request_comparison(background=False, include_skipped=True)
    assert session.row("h2").rmse is not None


def test_a_crashing_mechanism_is_reported_and_the_others_still_run(store, monkeypatch):
    real = planning.compare
    calls = []

    def flaky(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        calls.append(list(mechanisms))
        if mechanisms[0] == "identity":
            raise TypeError("solver exploded")
        return real(workload, privacy, mechanisms, params, progress, on_row, executor)

    monkeypatch.setattr(planning, "compare", flaky)
    session = Session(PREFIX_SPEC, store=store)
    session.compare_now()
    rows = {r.mechanism: r for r in session.comparison.rows}
    assert rows["identity"].error == "failed: TypeError: solver exploded"
    assert rows["h2"].rmse is not None
    assert calls == [["identity", "h2"], ["h2"]]


def test_job_status_lines_are_plain():
    status = planning.JobStatus("running", 4, 1, "hdmm", 120, 3.5, "", 2.0)
    assert status.describe() == "Planning hdmm (2 of 4), iteration 120, objective 3.5..."
    assert status.fraction == 0.25 and not status.finished
    assert (
        planning.JobStatus("done", 4, 4, None, 0, math.nan, "", 2.04).describe()
        == "Planned 4 mechanism(s) in 2.0 s."
    )


def test_workload_key_depends_on_the_workload_only():
    a = Scenario.from_spec(DEFAULT_SPEC)
    b = Scenario.from_spec(dict(DEFAULT_SPEC, privacy={"noise": "zcdp", "rho": 2.0}))
    c = Scenario.from_spec(PREFIX_SPEC)
    assert workload_key(a.workload) == workload_key(b.workload) != workload_key(c.workload)


def test_one_line_messages():
    assert planning.one_line(NotApplicable("not applicable: too big")) == "not applicable: too big"
    assert planning.one_line(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert planning.one_line(Cancelled()) == "Cancelled"


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
    monkeypatch.setattr(planning, "compare", _fake_compare(_until_stopped(started)))
    first, second = Session(PREFIX_SPEC, store=store), Session(PREFIX_SPEC, store=store)
    job = first.request_comparison()
    assert second.request_comparison() is job  # one job for both
    assert started.wait(10) and job.subscribers() == 2

    first.cancel()
    assert first.job is None and second.job is job
    assert job.status().state == "running" and not job.wait(0.2)  # still planning for B
    assert job.subscribers() == 1 and not job.waits(first)

    second.cancel()  # the last subscriber leaves: now the job stops
    assert job.wait(10) and job.status().state == "cancelled"
    assert store.missing(first.key, "laplace", ["identity", "h2"]) == ["h2"]


def test_a_skip_stops_the_mechanism_only_once_every_subscriber_skipped_it(store, monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(planning, "compare", _fake_compare(_until_stopped(started)))
    first, second = Session(PREFIX_SPEC, store=store), Session(PREFIX_SPEC, store=store)
    job = first.request_comparison()
    second.request_comparison()
    assert started.wait(10)

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
    monkeypatch.setattr(planning, "compare", _fake_compare(_until_stopped(started)))
    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison()
    assert started.wait(10)
    session.release()
    assert session.job is None
    assert job.wait(10) and job.status().state == "cancelled"


def test_jobs_beyond_the_planner_limit_wait_in_a_numbered_queue(monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(planning, "compare", _fake_compare(_until_stopped(started)))
    store = PlanStore(planners=1)
    sessions = [
        Session(dict(PREFIX_SPEC, domain={"x": {"size": n, "kind": "numeric"}}), store=store)
        for n in (8, 16, 32)
    ]
    running, second, third = (s.request_comparison() for s in sessions)
    assert started.wait(10)
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
    real = planning.compare

    def gated(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        release.wait(10)
        return real(workload, privacy, mechanisms, params, progress, on_row, executor)

    monkeypatch.setattr(planning, "compare", gated)
    first = Session(dict(PREFIX_SPEC, mechanisms=["identity"]), store=store)
    second = Session(dict(PREFIX_SPEC, mechanisms=["identity", "h2"]), store=store)
    job = first.request_comparison()
    assert second.request_comparison() is job
    assert job.names == ("identity", "h2")
    release.set()
    assert job.wait(30) and job.status().state == "done"
    second.poll()
    assert second.complete and second.row("h2").rmse is not None


def test_the_planner_limit_must_be_positive(monkeypatch):
    with pytest.raises(ValueError, match="planners: 0"):
        PlanStore(planners=0)
    monkeypatch.setenv("EXPLORER_PLANNERS", "3")
    assert planning.planners_from_environment() == 3
    monkeypatch.setenv("EXPLORER_PLANNERS", "many")
    with pytest.raises(SystemExit, match="EXPLORER_PLANNERS: 'many'"):
        planning.planners_from_environment()


def test_planner_threads_run_at_a_lower_cpu_priority_than_the_web_thread():
    web = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = []

    def planner():
        planning.lower_thread_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=planner)
    thread.start()
    thread.join(10)
    assert seen == [min(web + planning.PLANNER_NICENESS, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == web


def test_with_a_scheduler_the_plans_are_made_on_the_cluster():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
    try:
        store = PlanStore(scheduler=cluster.scheduler_address)
        session = Session(PREFIX_SPEC, store=store)
        session.compare_now()
        remote = {r.mechanism: r.rmse for r in session.comparison.rows}
        with distributed.Client(cluster) as client:
            planned_there = client.run_on_scheduler(
                lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        store.close()
    finally:
        cluster.close()
    local = Session(PREFIX_SPEC, store=PlanStore())
    local.compare_now()
    assert planned_there == ["plan_row_task"]  # dask drops the leading underscore
    for row in local.comparison.rows:
        assert remote[row.mechanism] == pytest.approx(row.rmse, rel=1e-12)


def test_an_unreachable_scheduler_is_each_rows_message():
    pytest.importorskip("distributed")
    session = Session(PREFIX_SPEC, store=PlanStore(scheduler="tcp://127.0.0.1:1"))
    session.compare_now()
    assert [r.error for r in session.comparison.rows] == [
        "failed: DPWB_SCHEDULER: cannot reach the Dask scheduler "
        "'tcp://127.0.0.1:1' within 5 s ([Errno 111] Connection refused)"] * 2


# ----- real planning: two sessions, one cancels; worker processes ---------------------------
HDMM_SPEC = {
    "domain": {"x": {"size": 256, "kind": "numeric"}},  # OPT_0 reports for a second or more
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "eigen-design", "hdmm-opt0", "hdmm-kron", "hdmm-union", "hdmm"],
}
#: two attributes, so OPT_kron, OPT_+ and OPT_M each solve their own problem
TWO_ATTRIBUTE_SPEC = {
    "domain": {"a": {"size": 8, "kind": "numeric"}, "b": {"size": 6, "kind": "numeric"}},
    "workload": [{"product": {"a": "prefix", "b": "identity"}}, {"product": {"a": "total"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
}


def _alone(spec) -> dict[str, float | None]:
    """Every mechanism's RMSE planned in this thread with one BLAS thread, as a worker does."""
    session = Session(spec, store=PlanStore())
    with threadpool_limits(limits=1, user_api="blas"):
        session.compare_now()
    return {r.mechanism: r.rmse for r in session.comparison.rows}


@pytest.fixture(scope="module")
def hdmm_alone() -> dict[str, float | None]:
    return _alone(HDMM_SPEC)


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_one_session_cancels_while_an_hdmm_operator_runs_and_the_other_gets_every_row(
    hdmm_alone, processes
):
    store = PlanStore(processes=processes)
    first, second = Session(HDMM_SPEC, store=store), Session(HDMM_SPEC, store=store)
    job = first.request_comparison()
    assert second.request_comparison() is job
    left = threading.Event()

    def on_progress(iteration: int, loss: float, message: str) -> None:
        job._on_progress(iteration, loss, message)
        # A cancels while OPT_0, which hdmm reuses, is half-way through its restarts.
        if iteration and job.status().current == "hdmm-opt0" and not left.is_set():
            left.set()
            first.cancel()

    job.progress.callback = on_progress
    try:
        assert job.wait(300)
    finally:
        store.close()
    assert left.is_set() and first.job is None
    assert job.status().state == "done" and job.status().done == len(HDMM_SPEC["mechanisms"])
    second.poll()
    assert second.complete and second.job is None
    got = {r.mechanism: r.rmse for r in second.comparison.rows}
    assert set(got) == set(HDMM_SPEC["mechanisms"])
    for name, rmse in hdmm_alone.items():
        assert rmse is not None and got[name] == pytest.approx(rmse, rel=1e-12), name
    # hdmm is the best of its operators, and reused OPT_0's plan
    assert got["hdmm"] == pytest.approx(min(got["hdmm-opt0"], got["hdmm-kron"]), rel=1e-12)


def test_plans_made_in_worker_processes_equal_plans_made_in_process():
    alone = _alone(TWO_ATTRIBUTE_SPEC)
    store = PlanStore(processes=True)
    session = Session(TWO_ATTRIBUTE_SPEC, store=store)
    try:
        session.compare_now()
    finally:
        store.close()
    pooled = {r.mechanism: r for r in session.comparison.rows}
    assert set(pooled) == set(alone) and sum(v is not None for v in alone.values()) >= 8
    for name, rmse in alone.items():
        if rmse is None:
            assert pooled[name].rmse is None and pooled[name].error, name
        else:
            assert pooled[name].rmse == pytest.approx(rmse, rel=1e-12), name
            assert math.isfinite(pooled[name].plan.rmse())


#: OPT_0 on 512 cells plans for seconds after its first report: a stop reaches it mid-way
SLOW_OPT0_SPEC = dict(HDMM_SPEC, domain={"x": {"size": 512, "kind": "numeric"}})


def test_a_cancel_stops_the_plan_in_its_worker_process_and_the_pool_plans_on():
    store = PlanStore(processes=True, planners=1)
    spec = dict(SLOW_OPT0_SPEC, mechanisms=["identity", "hdmm-opt0"])
    session = Session(spec, store=store)
    job = session.request_comparison()
    iterations = []

    def on_progress(iteration: int, loss: float, message: str) -> None:
        job._on_progress(iteration, loss, message)
        iterations.append(iteration)
        if iteration and job.status().current == "hdmm-opt0":
            session.cancel()

    job.progress.callback = on_progress
    try:
        assert job.wait(120)
        status = job.status()
        # the worker stopped at a checkpoint: hdmm-opt0 has no row, identity has its own
        assert (status.state, status.done, status.total) == ("cancelled", 1, 2)
        assert store.missing(session.key, "laplace", spec["mechanisms"]) == ["hdmm-opt0"]
        assert iterations and iterations[-1] > 0
        # the slot's stop flag was cleared: the same worker plans the next job to its end
        again = session.request_comparison()
        assert again is not job and again.wait(120) and again.status().state == "done"
    finally:
        store.close()
    session.poll()
    assert session.complete and session.row("hdmm-opt0").rmse is not None


def test_a_queued_job_shows_its_place_and_the_cost_models_estimate(monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(planning, "compare", _fake_compare(_until_stopped(started)))
    store = PlanStore(planners=1)
    first = Session(PREFIX_SPEC, store=store)
    waiting = Session(dict(PREFIX_SPEC, domain={"x": {"size": 512, "kind": "numeric"}},
                           mechanisms=["hdmm-opt0"]), store=store)
    running, queued = first.request_comparison(), waiting.request_comparison()
    assert started.wait(10)
    status = queued.status()
    expected = planning.estimate_mechanism("hdmm-opt0", waiting.workload, waiting.privacy)
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


def test_planning_runs_in_processes_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("EXPLORER_PLANNING", raising=False)
    assert planning.processes_from_environment() is True
    monkeypatch.setenv("EXPLORER_PLANNING", "threads")
    assert planning.processes_from_environment() is False
    monkeypatch.setenv("EXPLORER_PLANNING", "fibres")
    with pytest.raises(SystemExit, match="EXPLORER_PLANNING: 'fibres'"):
        planning.processes_from_environment()
    assert PlanStore(processes=True).pool is not None
    assert PlanStore(processes=True, scheduler="tcp://127.0.0.1:1").pool is None


def test_a_skip_stops_the_mechanism_in_its_worker_process_and_the_job_goes_on():
    store = PlanStore(processes=True, planners=1)
    spec = dict(SLOW_OPT0_SPEC, mechanisms=["hdmm-opt0", "identity"])
    session = Session(spec, store=store)
    job = session.request_comparison()
    skipped = []

    def on_progress(iteration: int, loss: float, message: str) -> None:
        job._on_progress(iteration, loss, message)
        if iteration and not skipped and job.status().current == "hdmm-opt0":
            skipped.append(session.skip())

    job.progress.callback = on_progress
    try:
        assert job.wait(120)
    finally:
        store.close()
    assert skipped == ["hdmm-opt0"] and job.status().state == "done"
    session.poll()
    assert session.row("identity").rmse == pytest.approx(
        _alone(dict(spec, mechanisms=["identity"]))["identity"], rel=1e-12
    )
    assert session.row("hdmm-opt0").error.startswith("not planned: skipped")
    assert store.missing(session.key, "laplace", spec["mechanisms"]) == ["hdmm-opt0"]


def test_worker_processes_end_when_the_web_process_is_killed(children_outlive_a_killed_parent):
    script = (
        "import time\n"
        "from explorer.planning.workers import PlannerPool\n"
        "pool = PlannerPool(2)\n"
        "pool.warm()\n"
        "while len(pool._pool()._processes) < 2: time.sleep(0.05)\n"
        "print(*pool._pool()._processes, flush=True)\n"
        "time.sleep(600)\n"
    )
    assert children_outlive_a_killed_parent(script) == []
