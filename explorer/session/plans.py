"""The session's plans and comparison: the second layer of a :class:`~explorer.session.Session`.

:class:`PlansView` shows the finished plans of the chosen mechanisms on the current workload,
as the plan store (:mod:`explorer.planning.store`) holds them, and the comparison at the live
privacy level. Everything shown is derived with ``param.depends``: a new workload, mechanism
choice or noise family reloads ``plans`` from the store; a new ``plans`` or privacy level
re-scales them into ``comparison`` (``Comparison.with_privacy``, a rescale, never a re-plan).
Pages bind to ``plans`` for what changes only when plans arrive and to ``comparison`` for what
follows the sliders. The store is the session's own business: pages ask the session.

Nothing here imports Panel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import param

from engine import Comparison, ComparisonRow, Plan, Scenario, registry_names
from explorer.planning.store import STORE, PlanStore
from explorer.session.editing import ScenarioEditing


class PlansView(ScenarioEditing):
    """The finished plans of the current workload, noise and mechanisms, and the comparison.

    Args:
        scenario: as for :class:`~explorer.session.editing.ScenarioEditing`.
        store: the plan store (default: the process-wide
            :data:`explorer.planning.store.STORE`).
    """

    selected = param.Selector(
        default=None,
        objects=[],
        allow_None=True,
        doc="The mechanism shown on the strategy and per-query views.",
    )
    plans = param.ClassSelector(
        class_=Comparison,
        allow_None=True,
        default=None,
        doc=(
            "The finished plans of the chosen mechanisms at their own calibration, best first; "
            "replaced only when plans arrive or the workload, noise or mechanisms change."
        ),
    )
    comparison = param.ClassSelector(
        class_=Comparison,
        allow_None=True,
        default=None,
        doc="``plans`` re-scaled to the live privacy level.",
    )

    def __init__(
        self, scenario: Scenario, store: PlanStore | None = None, **params: Any
    ) -> None:
        self._store = store or STORE
        self._skipped: dict[tuple[str, str], set[str]] = {}  # (workload key, noise) -> names
        self._bound_seen: Any = None  # the stored bound the displayed comparison has
        self._picked: str | None = None  # the mechanism the user chose to look at, if any
        self._refreshing = False
        super().__init__(scenario, **params)
        # A list of its own: param may add None to a Selector's objects (allow_None).
        self.param.selected.objects = list(registry_names())

    def start_bound(self, wait: float = 0.0) -> None:
        """Start computing the current workload's SVD bound unless stored or under way, and
        wait for it at most ``wait`` seconds (see ``PlanStore.ensure_bound``)."""
        self._store.ensure_bound(self._key, self.workload, wait=wait)

    def _bound_arrived(self) -> bool:
        """True when the store's bound is not the one the shown plans have."""
        return self._store.bound(self._key) is not self._bound_seen

    def _skips(self) -> set[str]:
        return self._skipped.get((self._key, self.privacy.noise), set())

    @param.depends("scenario", "mechanisms", "privacy.noise", watch=True)
    def refresh(self) -> None:
        """Reload the finished plans of the current workload, noise and mechanisms."""
        self._bound_seen = self._store.bound(self._key)
        plans = self._store.comparison(
            self._key, self.scenario.workload, self.privacy, self.mechanisms, self._skips()
        )
        selected = None
        if plans is not None:
            # Re-scaling multiplies every RMSE by one factor, so this order holds at any level.
            rows = tuple(sorted(plans.rows, key=lambda r: (r.rmse is None, r.rmse or 0.0)))
            if self._same_plans(rows, plans.bound):
                plans = self.plans
            else:
                plans = Comparison(plans.workload, plans.privacy, plans.bound, rows)
            planned = [r.mechanism for r in rows if r.plan is not None]
            best = plans.best()
            # the views follow the best mechanism as plans arrive, unless the user chose one
            selected = (
                self._picked if self._picked in planned else (best.mechanism if best else None)
            )
        changes: dict[str, Any] = {"selected": selected} if selected != self.selected else {}
        if plans is not self.plans:
            changes["plans"] = plans
        if not changes:
            return  # nothing new (a poll or a cancel): no view is rebuilt
        self._refreshing = True
        try:
            self.param.update(**changes)
        finally:
            self._refreshing = False

    def _same_plans(self, rows: tuple[ComparisonRow, ...], bound: Any) -> bool:
        """True when the shown plans are these very rows and bound (a poll or a cancel that
        brought nothing new)."""
        shown = self.plans
        return (
            shown is not None
            and shown.bound is bound
            and shown.workload is self.scenario.workload
            and shown.privacy.noise == self.privacy.noise
            and len(shown.rows) == len(rows)
            and all(a is b for a, b in zip(shown.rows, rows, strict=True))
        )

    @param.depends("selected", watch=True)
    def _remember_pick(self) -> None:
        if not self._refreshing:
            self._picked = self.selected

    @param.depends(
        "plans",
        "privacy.epsilon",
        "privacy.delta",
        "privacy.rho",
        "privacy.calibration",
        watch=True,
    )
    def _rescale(self) -> None:
        self.comparison = (
            None if self.plans is None else self.plans.with_privacy(self.privacy.with_())
        )

    def missing(self) -> list[str]:
        """Chosen mechanisms without a finished plan (those this session skipped left out)."""
        skipped = self._skips()
        return [
            n
            for n in self._store.missing(self._key, self.privacy.noise, self.mechanisms)
            if n not in skipped
        ]

    def row(self, name: str | None = None) -> ComparisonRow | None:
        """The comparison row of ``name`` (default: the selected mechanism)."""
        name = name or self.selected
        if self.comparison is None or name is None:
            return None
        return next((r for r in self.comparison.rows if r.mechanism == name), None)

    def plan(self, name: str | None = None) -> Plan | None:
        """The plan of ``name`` (default: the selected mechanism) at the live privacy level."""
        row = self.row(name)
        return row.plan if row is not None else None

    def variances(self, name: str | None = None) -> np.ndarray:
        """Expected squared error of every query under ``name``'s plan at the live level.

        Asked of the stored plan, whose per-query variances the engine caches, so moving a
        slider re-scales them instead of computing them again.

        Raises:
            ValueError: when ``name`` (default: the selected mechanism) has no plan.
        """
        name = name or self.selected
        rows = {} if self.plans is None else {r.mechanism: r for r in self.plans.rows}
        row = rows.get(name)
        if row is None or row.plan is None:
            raise ValueError(f"{name or 'no mechanism'}: no plan (not applicable or not planned)")
        return row.plan.variances(self.privacy.with_())
