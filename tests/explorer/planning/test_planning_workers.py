"""Real planning, in the planner threads and in worker processes: the same plans, and a
cancel or skip that reaches a worker mid-plan.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import pytest
from threadpoolctl import threadpool_limits

from engine.analysis import per_query_error
from explorer.components.people import GAUSSIAN_FACTOR, people_factor
from explorer.planning.store import PlanStore
from explorer.session import Session

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


def _pooled(spec) -> Session:
    """A session whose comparison of ``spec`` was planned in worker processes."""
    store = PlanStore(processes=True)
    session = Session(spec, store=store)
    try:
        session.compare_now()
    finally:
        store.close()
    return session


def test_plans_made_in_worker_processes_equal_plans_made_in_process():
    alone = _alone(TWO_ATTRIBUTE_SPEC)
    pooled = {r.mechanism: r for r in _pooled(TWO_ATTRIBUTE_SPEC).comparison.rows}
    assert set(pooled) == set(alone) and sum(v is not None for v in alone.values()) >= 8
    for name, rmse in alone.items():
        if rmse is None:
            assert pooled[name].rmse is None and pooled[name].error, name
        else:
            assert pooled[name].rmse == pytest.approx(rmse, rel=1e-12), name
            assert math.isfinite(pooled[name].plan.rmse())


def test_laplace_plans_come_back_from_their_workers_with_their_error_in_people(monkeypatch):
    def computed_here(plan, level):
        raise AssertionError(f"{plan.mechanism}: the error in people was computed here")

    # the workers are spawned: only this process is forbidden to compute it
    monkeypatch.setattr(per_query_error, "_laplace_typical_ratio", computed_here)
    session = _pooled(dict(TWO_ATTRIBUTE_SPEC, privacy={"noise": "laplace", "epsilon": 1.0}))
    plans = [r.plan for r in session.comparison.rows if r.plan is not None]
    assert len(plans) >= 6 and not any((r.error or "").startswith("failed")
                                       for r in session.comparison.rows)
    brought = {p.mechanism: people_factor(p) for p in plans}  # read from the workers' results
    monkeypatch.undo()
    for plan in plans:
        factor, method = brought[plan.mechanism]
        fresh_factor, fresh_method = people_factor(dataclasses.replace(plan))  # computed here
        assert method == fresh_method
        assert factor == pytest.approx(fresh_factor, rel=1e-12), plan.mechanism
        # a Laplace mix's 95 % quantile lies between one Laplace term's and the Chernoff bound
        if method in ("laplace", "laplace-sum"):
            assert GAUSSIAN_FACTOR < factor <= 3.2, plan.mechanism
        at_eps_2 = plan.with_privacy(plan.privacy.with_(epsilon=2.0))
        assert people_factor(at_eps_2) == (factor, method)


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
