"""The planners' settings from the environment and their CPU priority.
"""

from __future__ import annotations

import os
import threading

import pytest

from explorer.planning import settings
from explorer.planning.store import PlanStore


def test_the_planner_limit_must_be_positive(monkeypatch):
    with pytest.raises(ValueError, match="planners: 0"):
        PlanStore(planners=0)
    monkeypatch.setenv("EXPLORER_PLANNERS", "3")
    assert settings.planners_from_environment() == 3
    monkeypatch.setenv("EXPLORER_PLANNERS", "many")
    with pytest.raises(SystemExit, match="EXPLORER_PLANNERS: 'many'"):
        settings.planners_from_environment()


def test_planner_threads_run_at_a_lower_cpu_priority_than_the_web_thread():
    web = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = []

    def planner():
        settings.lower_thread_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=planner)
    thread.start()
    thread.join(10)
    assert seen == [min(web + settings.PLANNER_NICENESS, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == web


def test_planning_runs_in_processes_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("EXPLORER_PLANNING", raising=False)
    assert settings.processes_from_environment() is True
    monkeypatch.setenv("EXPLORER_PLANNING", "threads")
    assert settings.processes_from_environment() is False
    monkeypatch.setenv("EXPLORER_PLANNING", "fibres")
    with pytest.raises(SystemExit, match="EXPLORER_PLANNING: 'fibres'"):
        settings.processes_from_environment()
    assert PlanStore(processes=True).pool is not None
    assert PlanStore(processes=True, scheduler="tcp://127.0.0.1:1").pool is None
