"""Any concurrent.futures.Executor runs independent sub-problems (engine.executor)."""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from engine.errors import Cancelled
from engine.executor import (
    SerialExecutor,
    WorkerLost,
    default_executor,
    local_pool,
    map_after,
    map_ordered,
    worker_count,
)
from engine.progress import Progress


def test_serial_map_keeps_order_and_reports() -> None:
    seen: list[tuple[int, float]] = []
    out = map_ordered(
        SerialExecutor(), math.sqrt, [4.0, 9.0, 1.0], on_result=lambda i, r: seen.append((i, r))
    )
    assert out == [2.0, 3.0, 1.0]
    assert seen == [(0, 2.0), (1, 3.0), (2, 1.0)]


def test_a_raising_callback_stops_the_map() -> None:
    ran: list[int] = []

    def stop(index: int, result: float) -> None:
        raise Cancelled("stop")

    def record(x: int) -> int:
        ran.append(x)
        return x

    with pytest.raises(Cancelled):
        map_ordered(SerialExecutor(), record, [-1, -2], on_result=stop)
    assert ran == [-1]


def test_serial_submit_is_a_done_future() -> None:
    assert SerialExecutor().submit(pow, 2, 10).result() == 1024
    failed = SerialExecutor().submit(math.factorial, -1)
    assert isinstance(failed.exception(), ValueError)


def test_any_standard_executor_keeps_item_order() -> None:
    seen: list[int] = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        out = map_ordered(pool, math.factorial, [6, 3, 5, 0], on_result=lambda i, r: seen.append(i))
    assert out == [720, 6, 120, 1]
    assert sorted(seen) == [0, 1, 2, 3]


def test_a_cancelled_progress_cancels_pending_items() -> None:
    progress = Progress()
    progress.cancel()
    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(Cancelled):
        map_ordered(pool, math.factorial, [3, 4, 5], progress=progress)


def test_default_choice() -> None:
    assert isinstance(default_executor(0), SerialExecutor)
    assert isinstance(default_executor(1), SerialExecutor)
    assert isinstance(default_executor(10, workers=1), SerialExecutor)
    pool = default_executor(10, workers=2)
    assert isinstance(pool, ProcessPoolExecutor) and worker_count(pool) == 2
    pool.shutdown()
    assert worker_count(SerialExecutor()) == 1


@pytest.mark.slow
def test_process_pool_results_in_item_order() -> None:
    seen: list[int] = []
    with local_pool(max_workers=2) as pool:
        out = map_ordered(pool, math.factorial, [5, 3, 4], on_result=lambda i, r: seen.append(i))
        assert out == [120, 6, 24]
        assert sorted(seen) == [0, 1, 2]
        with pytest.raises(ValueError):
            map_ordered(pool, math.factorial, [-1])
        assert map_ordered(pool, abs, []) == []


def test_a_dead_pool_worker_is_a_clear_error() -> None:
    with local_pool(max_workers=1) as pool, pytest.raises(WorkerLost, match="worker process died"):
        map_ordered(pool, os._exit, [3])  # the worker exits under the item


def _wait_for(event: threading.Event) -> bool:
    return event.wait(timeout=20)


def test_an_item_starts_when_its_needs_are_done_not_when_every_item_is() -> None:
    """Item 2 needs item 1 only: it runs while item 0 still waits for it (a map that waited
    for items 0 and 1 together would leave item 0 waiting out its 20 s)."""
    item_2_ran = threading.Event()

    def run(item: tuple[str, int]) -> object:
        kind, value = item
        if kind == "wait":
            return _wait_for(item_2_ran)
        if kind == "then":
            item_2_ran.set()
        return value

    def make(index: int, finished: dict[int, object]) -> tuple[str, int]:
        if index == 2:
            return ("then", 10 * int(finished[1]))  # built from item 1's result
        return ("wait", 0) if index == 0 else ("now", 7)

    with ThreadPoolExecutor(max_workers=2) as pool:
        out = map_after(pool, run, make, [(), (), (1,)])
    assert out == [True, 7, 70]


def test_serial_map_after_runs_what_is_needed_first() -> None:
    ran: list[int] = []

    def make(index: int, finished: dict[int, int]) -> int:
        ran.append(index)
        return sum(finished[j] for j in needs[index]) + index

    needs = [(1, 2), (), (1,)]
    assert map_after(SerialExecutor(), abs, make, needs) == [1 + 3 + 0, 1, 3]
    assert ran == [1, 2, 0]


@pytest.mark.parametrize(
    ("needs", "message"),
    [([(1,), (0,)], r"items \[0, 1\] form a cycle"), ([(), (5,)], r"item 1 needs \[5\]")],
)
def test_impossible_needs_are_refused_before_anything_runs(
    needs: list[tuple[int, ...]], message: str
) -> None:
    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(ValueError, match=message):
        map_after(pool, abs, lambda i, _: i, needs)


def test_the_costliest_items_are_submitted_first() -> None:
    order: list[int] = []
    with ThreadPoolExecutor(max_workers=1) as pool:  # one thread: submission order runs
        out = map_ordered(pool, order.append, [0, 1, 2, 3], costs=[1.0, 8.0, 1.0, 27.0])
    assert out == [None] * 4
    assert order == [3, 1, 0, 2]  # equal costs keep item order
