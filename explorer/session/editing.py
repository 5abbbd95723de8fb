"""The scenario and the spec being edited: the first layer of a :class:`~explorer.session.Session`.

:class:`ScenarioEditing` holds the current scenario (the last valid one), the live privacy
level (a mutable :class:`~engine.privacy.Privacy`, so widgets bind straight to its parameters),
the mechanisms to compare, and the draft spec being edited in the workload builder, which may
be invalid: a bad edit keeps the user's text and says why in one line, the scenario stays.

Nothing here imports Panel.
"""

from __future__ import annotations

import copy
from typing import Any

import param

from engine import Privacy, Scenario, SpecError, Workload, mechanism_class, registry_names
from explorer.components.messages import plain
from explorer.planning.store import workload_key
from explorer.session.spec_text import dump_yaml, explicit_totals, parse_upload, parse_yaml

#: The scenario every new session starts with: age (numeric, 32 values) by sex, asking for the
#: cumulative age distribution of each sex and the age histogram. Small enough to plan every
#: mechanism in seconds.
DEFAULT_SPEC: dict[str, Any] = {
    "domain": {"age": {"size": 32, "kind": "numeric"}, "sex": {"size": 2, "labels": ["F", "M"]}},
    "workload": [
        {"product": {"age": "prefix", "sex": "identity"}},
        {"product": {"age": "identity"}},
    ],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
}

PRIVACY_FIELDS = ("noise", "epsilon", "delta", "rho", "calibration")


class ScenarioEditing(param.Parameterized):
    """The current scenario, the live privacy level, the mechanisms and the builder's draft.

    Args:
        scenario: the scenario to start from; its privacy level becomes the live one. The
            scenario itself is made current by :meth:`set_scenario`, once every layer of the
            session is ready (see :class:`explorer.session.model.Session`).
    """

    scenario = param.ClassSelector(
        class_=Scenario,
        doc=(
            "The current (last valid) scenario; its privacy is the level it was loaded with, the "
            "live level is ``privacy``."
        ),
    )
    privacy = param.ClassSelector(
        class_=Privacy,
        instantiate=False,
        doc="The live privacy level; sliders bind to its parameters.",
    )
    mechanisms = param.ListSelector(default=[], objects=[], doc="Mechanisms to compare.")
    draft = param.Dict(default={}, doc="The spec being edited in the builder (may be invalid).")
    draft_text = param.String(default="", doc="The builder's YAML text.")
    draft_error = param.String(default="", doc="Why the draft is not valid ('' when it is).")
    stash = param.Dict(
        default=None,
        allow_None=True,
        doc="A draft put aside while an example is loaded (the tour).",
    )

    def __init__(self, scenario: Scenario, **params: Any) -> None:
        self._key = ""
        self._own_text: str | None = None  # the last draft text the session wrote itself
        super().__init__(privacy=scenario.privacy.with_(), **params)
        self.param.mechanisms.objects = list(registry_names())

    @property
    def key(self) -> str:
        """The workload key of the current scenario."""
        return self._key

    @property
    def workload(self) -> Workload:
        """The current workload."""
        return self.scenario.workload

    def set_scenario(
        self, scenario: Scenario, draft: dict[str, Any] | None = None, text: str | None = None
    ) -> None:
        """Make ``scenario`` current (its privacy becomes the live privacy level)."""
        draft = copy.deepcopy(draft) if draft is not None else scenario.to_spec()
        names = list(self.param.mechanisms.objects)
        wanted = [n for n in scenario.mechanisms if n in names] or names
        self.privacy.param.update(**{f: getattr(scenario.privacy, f) for f in PRIVACY_FIELDS})
        self._key = workload_key(scenario.workload)
        self._own_text = text if text is not None else dump_yaml(draft)
        self.param.update(
            scenario=scenario,
            mechanisms=wanted,
            draft=draft,
            draft_text=self._own_text,
            draft_error="",
        )

    @param.depends("draft_text", watch=True)
    def _text_edited(self) -> None:
        # The spec editor writes draft_text, and so does the session: always the text of the
        # draft it has just stored. That text, or text that parses to the draft held already,
        # is therefore not an edit, which keeps the session's own writes from being applied a
        # second time. The text is compared first and parsed at most once: parsing a
        # census-sized spec (SF1's 1 MB of indicator rows) takes seconds.
        text = self.draft_text
        if text == self._own_text:
            return
        try:
            draft = parse_yaml(text)
        except SpecError as exc:
            self.draft_error = plain(exc)  # the text stays, as the user typed it
            return
        if draft != self.draft:
            self.apply_draft(draft, text=text)

    def apply_draft(self, draft: Any, text: str | None = None) -> str:
        """Validate a draft spec; make it current when valid.

        The draft (and its text) are kept either way, so the user's work is never lost.

        Returns:
            '' when valid, else the validator's one-line message (also in ``draft_error``).
        """
        if not isinstance(draft, dict):
            message = "scenario: expected a mapping with domain and workload"
            self.param.update(
                draft_error=message, **({"draft_text": text} if text is not None else {})
            )
            return message
        try:
            scenario = Scenario.from_spec(copy.deepcopy(draft))
        except Exception as exc:  # SpecError normally; anything else is shown the same way
            message = plain(exc)
            self.param.update(
                draft=copy.deepcopy(draft),
                draft_error=message,
                draft_text=text if text is not None else dump_yaml(draft),
            )
            return message
        self.set_scenario(scenario, draft=draft, text=text)
        return ""

    def apply_text(self, text: str) -> str:
        """Parse YAML text from the spec editor and apply it (see :meth:`apply_draft`)."""
        try:
            draft = parse_yaml(text)
        except SpecError as exc:
            message = plain(exc)
            self.param.update(draft_text=text, draft_error=message)
            return message
        return self.apply_draft(draft, text=text)

    def load_text(self, text: str, filename: str = "scenario.yaml") -> str:
        """Load an uploaded scenario file; on error nothing changes except the message returned.

        Unlike :meth:`apply_text`, a bad file does not replace the draft: the previous
        workload, draft and editor text all stay.
        """
        try:
            draft = parse_upload(text, filename)  # parsed once: a census-sized file takes seconds
            scenario = Scenario.from_spec(copy.deepcopy(draft))
        except Exception as exc:  # SpecError normally; anything else is reported the same way
            return f"{filename}: {plain(exc)}"
        self.set_scenario(scenario, draft=draft, text=text)
        return ""

    def export_spec(self) -> dict[str, Any]:
        """The current scenario with the live privacy level and the chosen mechanisms.

        The user's own spec (the draft) is used when it is the current scenario, so the
        export keeps their labels and layout; otherwise the last valid scenario is written.
        """
        valid_draft = not self.draft_error and isinstance(self.draft, dict) and self.draft
        spec = copy.deepcopy(self.draft) if valid_draft else self.scenario.to_spec()
        spec["privacy"] = self.privacy.to_spec()
        # a static scenario: data-dependent mechanisms run on their own pages, on data
        spec["mechanisms"] = [m for m in self.mechanisms
                              if not mechanism_class(m).data_dependent]
        if "workload" in spec:
            spec["workload"] = explicit_totals(spec["workload"], spec.get("domain"))
        return spec

    def export_yaml(self) -> str:
        """:meth:`export_spec` as YAML text (what the download button saves)."""
        return dump_yaml(self.export_spec())

    def sync_draft_privacy(self) -> None:
        """Write the live privacy level into the draft (unless it holds invalid edits).

        Sliders only re-scale the comparison; the builder calls this when its YAML is shown,
        so a slider never pays for re-dumping a large spec.
        """
        spec = self.privacy.to_spec()
        if self.draft_error or not isinstance(self.draft, dict) or not self.draft:
            return
        if self.draft.get("privacy") == spec:
            return
        draft = dict(self.draft, privacy=spec)
        self.param.update(draft=draft, draft_text=dump_yaml(draft))
