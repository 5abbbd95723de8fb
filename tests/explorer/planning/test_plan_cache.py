"""The shared plan cache on disk and the planning board: any process reuses any plan, sees any
job and can cancel it.

Two :class:`PlanStore` objects over one folder stand for two serving processes.
"""

from __future__ import annotations

import os
import threading

import pytest

from engine.workflows.compare import Comparison, ComparisonRow
from explorer.planning import jobs
from explorer.planning.plan_cache import BOUND, PlanCache, entry_name
from explorer.planning.store import PlanStore, workload_key
from explorer.server.session_store import SessionStore
from explorer.session import Session

PREFIX_SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


def test_an_entry_round_trips_and_a_corrupt_one_is_dropped(tmp_path):
    cache = PlanCache(tmp_path, max_bytes=10**6)
    assert cache.put("k", "laplace", "identity", {"rmse": 1.5})
    assert cache.get("k", "laplace", "identity") == {"rmse": 1.5}
    assert cache.get("k", "gaussian", "identity") is None
    path = tmp_path / entry_name("k", "laplace", "identity")
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF
    path.write_bytes(bytes(blob))
    assert cache.get("k", "laplace", "identity") is None
    assert not path.exists()  # dropped, never served
    path.write_bytes(b"short")
    assert cache.get("k", "laplace", "identity") is None and not path.exists()


def test_a_server_of_another_version_neither_serves_nor_overwrites_the_entry(tmp_path):
    cache = PlanCache(tmp_path, max_bytes=10**6)
    assert cache.put("k", "laplace", "identity", {"rmse": 1.5})
    ours = tmp_path / entry_name("k", "laplace", "identity")
    theirs = tmp_path / entry_name("k", "laplace", "identity", version="0.0.1-older")
    assert ours.exists() and theirs != ours
    theirs.write_bytes(ours.read_bytes())  # the older server's entry for the same plan
    ours.unlink()
    assert cache.get("k", "laplace", "identity") is None  # a miss: planned anew
    assert theirs.exists()  # left to the older server (and to eviction)


def test_the_least_recently_used_entries_go_first(tmp_path):
    payload = b"x" * 1000
    cache = PlanCache(tmp_path, max_bytes=10**6)
    cache.put("k", "n", "a", payload)
    one = cache.size()
    assert 1000 < one < 1100
    cache.max_bytes = 3 * one
    cache.put("k", "n", "b", payload)
    cache.put("k", "n", "c", payload)
    for name, when in (("a", 3), ("b", 1), ("c", 2)):  # a used last, b first
        path = tmp_path / entry_name("k", "n", name)
        os.utime(path, (1_000_000 + when, 1_000_000 + when))
    cache.put("k", "n", "d", payload)  # one over: b goes
    assert cache.get("k", "n", "b") is None
    assert [cache.get("k", "n", x) == payload for x in "acd"] == [True, True, True]
    assert cache.size() == 3 * one


def test_an_unwritable_cache_is_one_line_and_a_miss(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = PlanCache(blocker / "plans", max_bytes=10**6)
    assert not cache.put("k", "n", "a", 1)
    assert not cache.put("k", "n", "b", 2)
    assert cache.error.startswith("plan cache: cannot write")
    assert sum("plan cache" in r.getMessage() for r in caplog.records) == 1
    assert cache.get("k", "n", "a") is None


def test_a_plan_made_in_one_process_is_reused_by_the_other(tmp_path):
    first = PlanStore(cache=PlanCache(tmp_path, max_bytes=10**8))
    second = PlanStore(cache=PlanCache(tmp_path, max_bytes=10**8))
    planned = Session(PREFIX_SPEC, store=first)
    planned.compare_now()
    reader = Session(PREFIX_SPEC, store=second)
    assert reader.missing() == []
    assert second.start(reader, reader.workload, reader.privacy, ["identity", "h2"]) is None
    for name in ("identity", "h2"):
        assert reader.row(name).rmse == pytest.approx(planned.row(name).rmse, rel=1e-12, abs=0)
    assert reader.plans.bound.value == pytest.approx(planned.plans.bound.value, rel=1e-12)


def test_a_poll_reads_the_cache_folder_again_only_once_it_changed(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path, max_bytes=10**8)
    store = PlanStore(cache=cache)
    reads: list[str] = []
    get = PlanCache.get
    monkeypatch.setattr(PlanCache, "get", lambda self, *a: reads.append(a[2]) or get(self, *a))
    old = os.stat(tmp_path).st_mtime_ns - 10 * 10**9  # a folder untouched for 10 s
    os.utime(tmp_path, ns=(old, old))
    assert store.missing("k", "laplace", ["a", "b"]) == ["a", "b"]
    assert reads == ["a", "b", BOUND]
    reads.clear()
    assert store.missing("k", "laplace", ["a", "b"]) == ["a", "b"] and reads == []
    # another process writes an entry: the folder changed, so the next poll reads again
    row = ComparisonRow(mechanism="a", title="A", error="does not apply here")
    cache.put("k", "laplace", "a", row)
    os.utime(tmp_path, ns=(old + 10**9, old + 10**9))  # (older than the settling time)
    assert store.missing("k", "laplace", ["a", "b"]) == ["b"] and reads[:2] == ["a", "b"]
    # a folder changed just now is always read (a coarse clock may hide a second write)
    os.utime(tmp_path)
    reads.clear()
    store.missing("k", "laplace", ["a", "b"])
    store.missing("k", "laplace", ["a", "b"])
    assert reads.count("b") == 2


def test_the_store_keeps_at_most_its_workloads_and_their_cache_looks(tmp_path):
    cache = PlanCache(tmp_path, max_bytes=10**8)
    store = PlanStore(max_workloads=2, cache=cache)
    row = ComparisonRow(mechanism="a", title="A", error="does not apply here")
    cache.put("k0", "laplace", "a", row)
    for key in ("k0", "k1", "k2", "k3"):  # polled workloads, most of them never planned here
        store.missing(key, "laplace", ["a"])
    assert list(store._entries) == ["k2", "k3"]  # the two polled last, looks and all
    assert store.rows("k0", "laplace") == {}
    store.missing("k0", "laplace", ["a"])  # dropped, then read from the cache again
    assert store.rows("k0", "laplace")["a"].error == "does not apply here"
    assert list(store._entries) == ["k3", "k0"]


def test_a_job_is_on_the_board_and_a_cancel_from_another_process_stops_it(
    tmp_path, monkeypatch
):
    started = threading.Event()

    def slow(workload, privacy, mechanisms, *args, progress=None, on_row=None, **kw):
        for name in mechanisms:
            if name == "identity":
                on_row(ComparisonRow(name, name, None, "not applicable: x", 0.0))
                continue
            started.set()
            for i in range(20_000):  # an optimiser reporting every iteration
                threading.Event().wait(0.001)
                progress.report(i, 1.0)
            raise AssertionError("the cancel was ignored")
        return Comparison(workload, privacy, None, ())

    monkeypatch.setattr(jobs, "compare", slow)
    board = SessionStore(f"sqlite:///{tmp_path / 'board.sqlite'}")
    running = PlanStore(board=board)
    elsewhere = PlanStore(board=SessionStore(board.url))
    session = Session(PREFIX_SPEC, store=running)
    job = session.request_comparison(background=True)
    assert started.wait(10)
    key = workload_key(session.workload)
    seen = elsewhere.board_status(key, "laplace")
    assert seen.state == "running" and seen.total == 2 and seen.done == 1
    assert seen.current == "h2"
    assert elsewhere.cancel_everywhere(key, "laplace")
    assert job.wait(10)
    assert job.status().state == "cancelled"
    assert elsewhere.board_status(key, "laplace").state == "cancelled"
    assert not elsewhere.cancel_everywhere(key, "laplace")  # nothing left to cancel


def test_a_user_past_the_job_limit_is_refused_with_a_message(monkeypatch):
    release = threading.Event()

    def waits(workload, privacy, mechanisms, *args, progress=None, on_row=None, **kw):
        release.wait(20)
        for name in mechanisms:
            on_row(ComparisonRow(name, name, None, "not applicable: x", 0.0))
        return Comparison(workload, privacy, None, ())

    monkeypatch.setattr(jobs, "compare", waits)
    store = PlanStore(planners=1, max_jobs=2, owner_of=lambda session: "ann")
    sessions = [Session(dict(PREFIX_SPEC, domain={"x": {"size": n, "kind": "numeric"}}),
                        store=store) for n in (8, 9, 10)]
    try:
        first, second = (s.request_comparison(background=True) for s in sessions[:2])
        assert first is not None and second is not None
        assert sessions[2].request_comparison(background=True) is None
        states = {state for _, state, _ in sessions[2].queue}
        assert states == {"planning: refused, 2 of your planning jobs are queued or running "
                          "(at most 2 at once); cancel one or wait until one finishes"}
        assert sessions[2].job is None
        # another user is not held back by ann's jobs
        store.owner_of = lambda session: "bob" if session is sessions[2] else "ann"
        assert sessions[2].request_comparison(background=True) is not None
    finally:
        release.set()
