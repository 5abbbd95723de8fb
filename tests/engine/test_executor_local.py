"""The local process pool: its workers never outlive the process that started them, and
values shared by many items travel inside each item (no cluster to scatter them to)."""

from __future__ import annotations

import numpy as np

from engine.executor import SerialExecutor, local_pool, map_ordered, shared


def _weighted_total(args: tuple[np.ndarray, int]) -> float:
    values, weight = args
    return float(values.sum() * weight)


def test_shared_values_are_the_values_themselves_off_a_cluster() -> None:
    values = np.arange(5.0)
    assert shared(SerialExecutor(), values) is values
    with local_pool(2) as pool:
        data = shared(pool, values)
        assert data is values
        assert map_ordered(pool, _weighted_total, [(data, w) for w in (1, 2, 3)]) == [
            10.0,
            20.0,
            30.0,
        ]


def test_a_killed_command_line_run_takes_its_pool_workers_with_it(
        children_outlive_a_killed_parent):
    # A CLI run planning on a local pool, killed mid-plan (Ctrl-\, a job scheduler's kill):
    # its workers, busy with a long item, must end too instead of computing on for ever.
    script = (
        "import time\n"
        "from engine.executor import local_pool\n"
        "pool = local_pool(2)\n"
        "busy = [pool.submit(time.sleep, 600) for _ in range(2)]\n"
        "while len(pool._processes) < 2: time.sleep(0.05)\n"
        "print(*pool._processes, flush=True)\n"
        "time.sleep(600)\n"
    )
    assert children_outlive_a_killed_parent(script) == []
