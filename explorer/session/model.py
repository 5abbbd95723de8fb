"""The explorer's view-model: one :class:`Session` per user, shared by the pages they open.

A :class:`Session` holds what the user is looking at, in three layers, each a module of
:mod:`explorer.session` and each relying only on the layers below it:

1. :class:`~explorer.session.editing.ScenarioEditing`: the current scenario (last valid one),
   the live privacy level, the mechanisms to compare, and the draft spec being edited in the
   workload builder (which may be invalid);
2. :class:`~explorer.session.plans.PlansView`: the finished plans of those mechanisms and the
   comparison at the live privacy level (a rescale, never a re-plan);
3. :class:`~explorer.session.queue.PlanningQueue`: planning what is missing, and following the
   job that does it.

Pages talk to the Session only, never to the plan store it reads. Nothing here imports Panel:
the view-model is plain ``param`` and unit-testable without a browser or a server.

Example:
    >>> session = Session()
    >>> session.compare_now()
    >>> session.comparison.rows[0].mechanism in session.mechanisms
    True
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import param

from engine.scenario import Scenario
from explorer.planning.store import PlanStore
from explorer.session.editing import DEFAULT_SPEC
from explorer.session.queue import PlanningQueue


@dataclass(frozen=True)
class Upload:
    """A data file a user uploaded in this session: its name and its bytes."""

    name: str
    content: bytes = field(repr=False)


class Session(PlanningQueue):
    """One user's view-model, shared by every page they open.

    Args:
        spec: the scenario to start from (default :data:`DEFAULT_SPEC`).
        store: the plan store (default: the process-wide :data:`explorer.planning.store.STORE`).
    """

    upload = param.ClassSelector(
        class_=Upload, default=None, allow_None=True,
        doc="The records file uploaded in this session, kept (on every page) until replaced.",
    )

    def __init__(
        self, spec: dict[str, Any] | None = None, store: PlanStore | None = None, **params: Any
    ) -> None:
        spec = copy.deepcopy(spec if spec is not None else DEFAULT_SPEC)
        scenario = Scenario.from_spec(spec)
        super().__init__(scenario, store=store, **params)
        # Made current once every layer is ready: it sets off their watchers.
        self.set_scenario(scenario, draft=spec)
