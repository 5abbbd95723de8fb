"""Any concurrent.futures.Executor runs independent sub-problems (engine.executor)."""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from engine.errors import Cancelled
from engine.executor import (
    SerialExecutor,
    WorkerLost,
    default_executor,
    local_pool,
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
