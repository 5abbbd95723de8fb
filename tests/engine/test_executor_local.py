"""The local process pool: its workers never outlive the process that started them."""

from __future__ import annotations


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
