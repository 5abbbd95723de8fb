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
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import param

from engine import Scenario, fingerprint_bytes
from explorer.planning.store import PlanStore
from explorer.session.editing import DEFAULT_SPEC, PRIVACY_FIELDS
from explorer.session.queue import PlanningQueue

#: The session's parameters that make up its state (see :meth:`Session.snapshot`); with the
#: live privacy level's fields (``PRIVACY_FIELDS``).
PERSISTED = ("scenario", "mechanisms", "draft", "draft_text", "draft_error", "stash",
             "selected", "upload")


@dataclass(frozen=True)
class Upload:
    """A data file a user uploaded in this session: its name and its bytes."""

    name: str
    content: bytes = field(repr=False)

    @functools.cached_property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the content: where the shared store keeps the file."""
        return fingerprint_bytes(self.content)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON values (for :meth:`Session.snapshot`)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"state: {type(value).__name__} is not JSON")


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

    # ----- persistence (the shared session store, explorer.server.session_store) ----------
    def snapshot(self) -> dict[str, Any]:
        """What the user set up, as JSON values: enough for :meth:`restored` to rebuild it in
        another process. The upload is referenced by its name and SHA-256, not included; plans
        are not included (the shared plan cache has them)."""
        valid = not self.draft_error
        state = {
            "scenario": None if valid else self.scenario.to_spec(),
            "draft": self.draft,
            "draft_text": self.draft_text,
            "draft_error": self.draft_error,
            "privacy": {f: getattr(self.privacy, f) for f in PRIVACY_FIELDS},
            "mechanisms": list(self.mechanisms),
            "picked": self._picked,
            "stash": self.stash,
            "upload": None if self.upload is None else {"name": self.upload.name,
                                                        "sha256": self.upload.sha256},
        }
        return json.loads(json.dumps(state, default=_plain))

    @classmethod
    def restored(
        cls,
        state: dict[str, Any],
        upload: Upload | None = None,
        factory: Callable[[dict[str, Any] | None], Session] | None = None,
    ) -> Session:
        """The session :meth:`snapshot` describes (``upload``: its file, read by the caller;
        ``factory``: makes a session from a spec, default this class)."""
        valid = not state.get("draft_error")
        spec = state.get("draft") if valid else state.get("scenario")
        session = (factory or cls)(spec or None)
        text = state.get("draft_text") or ""
        if not valid:
            session.apply_text(text)  # the invalid draft comes back with its message
        elif text and text != session.draft_text:
            session._own_text = text  # the user's own layout of the same spec
            session.draft_text = text
        privacy = state.get("privacy") or {}
        session.privacy.param.update(**{f: privacy[f] for f in PRIVACY_FIELDS if f in privacy})
        known = session.param.mechanisms.objects
        mechanisms = [m for m in state.get("mechanisms") or () if m in known]
        if mechanisms:
            session.mechanisms = mechanisms
        session._picked = state.get("picked")
        session.param.update(stash=state.get("stash"), upload=upload)
        session.refresh()
        return session

    def on_change(self, callback: Callable[[], None]) -> list[tuple[param.Parameterized, Any]]:
        """Call ``callback()`` (no arguments) whenever the state :meth:`snapshot` describes
        changes; returns ``(owner, watcher)`` pairs for ``param``'s ``unwatch``."""

        def changed(*events: Any) -> None:
            callback()

        return [
            (self, self.param.watch(changed, list(PERSISTED))),
            (self.privacy, self.privacy.param.watch(changed, list(PRIVACY_FIELDS))),
        ]
