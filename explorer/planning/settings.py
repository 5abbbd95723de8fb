"""The planners' settings from the environment, and their CPU priority.

``EXPLORER_PLANNERS`` is how many planning jobs run at once in one server process;
``EXPLORER_MAX_JOBS`` how many unfinished jobs (queued or running) one user may have at once;
``EXPLORER_PLANNING`` whether a job plans in worker processes (``processes``, the default) or in
the planner threads of the web process (``threads``). Planner threads run at a lower CPU
priority than the web thread, so page builds and slider callbacks go first.
"""

from __future__ import annotations

import contextlib
import os
import threading

#: How much lower than the web thread's the planner threads' CPU priority is (nice steps).
PLANNER_NICENESS = 10
#: Planning jobs that may run at the same time in one server process (``EXPLORER_PLANNERS``).
DEFAULT_PLANNERS = 2


def lower_thread_priority() -> None:
    """Give the calling thread a lower CPU priority than the web thread (Linux; else no-op).

    Planning is throughput work and page serving is latency work: on a busy machine the
    kernel should run page builds and slider callbacks first.
    """
    # AttributeError / OSError: no per-thread priorities on this platform.
    with contextlib.suppress(AttributeError, OSError):
        thread = threading.get_native_id()
        # Relative to the thread's own niceness: a server started under `nice` keeps the gap.
        niceness = min(os.getpriority(os.PRIO_PROCESS, thread) + PLANNER_NICENESS, 19)
        os.setpriority(os.PRIO_PROCESS, thread, niceness)


def count_from_environment(variable: str, default: int) -> int:
    """The environment ``variable`` as a count of 1 or more (``default`` when unset or blank).

    Raises:
        SystemExit: one line naming the variable when it is not such a count.
    """
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(f"{variable}: {text!r} is not a count (allowed: 1 or more)")
    return value


def planners_from_environment() -> int:
    """``EXPLORER_PLANNERS`` as a count of concurrent planning jobs (default 2)."""
    return count_from_environment("EXPLORER_PLANNERS", DEFAULT_PLANNERS)


def processes_from_environment() -> bool:
    """``EXPLORER_PLANNING``: ``processes`` (the default) plans in worker processes,
    ``threads`` in the planner threads of the web process."""
    text = os.environ.get("EXPLORER_PLANNING", "").strip().lower() or "processes"
    if text not in ("processes", "threads"):
        raise SystemExit(f"EXPLORER_PLANNING: {text!r} (allowed: processes, threads)")
    return text == "processes"


#: Unfinished planning jobs one user may have at once (``EXPLORER_MAX_JOBS``).
DEFAULT_MAX_JOBS = 3


def max_jobs_from_environment() -> int:
    """``EXPLORER_MAX_JOBS`` as a count of unfinished jobs per user (default 3)."""
    return count_from_environment("EXPLORER_MAX_JOBS", DEFAULT_MAX_JOBS)
