"""The plan store: keys, the planner limit, the bound before any plan, planning on a cluster.
"""

from __future__ import annotations

import threading

import pytest

from engine.analysis.svd_bound import svd_bound
from engine.scenario import Scenario
from engine.workflows.compare import Comparison, ComparisonRow
from explorer.pages.compare import bound_line
from explorer.planning import jobs
from explorer.planning import store as store_module
from explorer.planning.store import PlanStore, workload_key
from explorer.session import DEFAULT_SPEC, Session

PREFIX_SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


def test_workload_key_depends_on_the_workload_only():
    a = Scenario.from_spec(DEFAULT_SPEC)
    b = Scenario.from_spec(dict(DEFAULT_SPEC, privacy={"noise": "zcdp", "rho": 2.0}))
    c = Scenario.from_spec(PREFIX_SPEC)
    assert workload_key(a.workload) == workload_key(b.workload) != workload_key(c.workload)


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


def _scenario(size: int, mechanisms: list[str]) -> dict:
    return {
        "domain": {"x": {"size": size, "kind": "numeric"}},
        "workload": [{"product": {"x": "prefix"}}],
        "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
        "mechanisms": mechanisms,
    }


def test_the_bound_is_stored_while_the_first_mechanism_still_plans(monkeypatch):
    started, release = threading.Event(), threading.Event()

    def slow_compare(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
                     executor=None):
        started.set()
        assert release.wait(20)
        for name in mechanisms:
            on_row(ComparisonRow(name, name, None, "not applicable: x", 0.0))
        return Comparison(workload, privacy, svd_bound(workload), ())

    monkeypatch.setattr(jobs, "compare", slow_compare)
    store = PlanStore()
    session = Session(_scenario(64, ["identity", "h2"]), store=store)
    job = session.request_comparison(background=True)
    assert started.wait(10)
    for _ in range(200):  # the bound thread: milliseconds for a prefix workload
        if store.bound(session.key) is not None:
            break
        threading.Event().wait(0.05)
    assert job.status().state == "running" and job.status().done == 0
    expected = svd_bound(session.workload).value
    assert store.bound(session.key).value == pytest.approx(expected, rel=1e-12)
    session.poll()  # the page picks it up without any row having finished
    assert session.comparison is not None and session.comparison.rows == ()
    assert session.comparison.bound_rmse == pytest.approx(
        svd_bound(session.workload).rmse(session.workload, session.privacy), rel=1e-12
    )
    assert bound_line(session.comparison).startswith(
        f"**SVD lower bound:** {session.comparison.bound_rmse:.4g} per count"
    )
    release.set()
    assert job.wait(10)


def test_a_page_being_built_can_wait_for_the_bound_and_it_is_computed_once(monkeypatch):
    calls = []
    real = store_module.svd_bound

    def counted(workload):
        calls.append(workload)
        return real(workload)

    monkeypatch.setattr(store_module, "svd_bound", counted)
    store = PlanStore()
    s = Scenario.from_spec(_scenario(32, ["identity"]))
    store.ensure_bound("k", s.workload, wait=10.0)
    assert store.bound("k").value == pytest.approx(real(s.workload).value, rel=1e-12)
    store.ensure_bound("k", s.workload, wait=10.0)
    store.ensure_bound("k", s.workload, background=False)
    assert len(calls) == 1
    store.ensure_bound("other", s.workload, background=False)  # notebooks: on the caller
    assert store.bound("other") is not None and len(calls) == 2
