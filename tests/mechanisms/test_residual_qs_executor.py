"""The executor interface used for independent residual sub-problems."""

from __future__ import annotations

import math

import pytest

from engine.errors import Cancelled
from engine.executor import ProcessExecutor, SerialExecutor, default_executor


def test_serial_map_keeps_order_and_reports() -> None:
    seen: list[tuple[int, float]] = []
    out = SerialExecutor().map(math.sqrt, [4.0, 9.0, 1.0],
                               on_result=lambda i, r: seen.append((i, r)))
    assert out == [2.0, 3.0, 1.0]
    assert seen == [(0, 2.0), (1, 3.0), (2, 1.0)]


def test_a_raising_callback_stops_the_map() -> None:
    def stop(index: int, result: float) -> None:
        raise Cancelled("stop")

    with pytest.raises(Cancelled):
        SerialExecutor().map(abs, [-1, -2], on_result=stop)


def test_default_choice() -> None:
    assert isinstance(default_executor(0), SerialExecutor)
    assert isinstance(default_executor(1), SerialExecutor)
    assert isinstance(default_executor(10, workers=1), SerialExecutor)
    pool = default_executor(10, workers=2)
    assert isinstance(pool, ProcessExecutor) and pool.max_workers == 2


@pytest.mark.slow
def test_process_pool_results_in_item_order() -> None:
    seen: list[int] = []
    with ProcessExecutor(max_workers=2) as pool:
        out = pool.map(math.factorial, [5, 3, 4], on_result=lambda i, r: seen.append(i))
        assert out == [120, 6, 24]
        assert sorted(seen) == [0, 1, 2]
        with pytest.raises(ValueError):
            pool.map(math.factorial, [-1])
    assert pool.map(abs, []) == []
