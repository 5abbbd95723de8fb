"""The explorer's view-model: one :class:`Session` per user, shared by the pages they open.

A :class:`Session` holds what the user is looking at: the current scenario (last valid one),
the draft spec being edited in the workload builder (which may be invalid), the live privacy
level (a mutable :class:`~engine.privacy.Privacy`, so widgets bind straight to its parameters),
the mechanisms to compare, the finished plans and the comparison at the live privacy level.

Everything shown is derived with ``param.depends``: a new workload, mechanism choice or noise
family reloads ``plans`` from the process-wide plan store (:mod:`explorer.planning`); a new
``plans`` or privacy level re-scales them into ``comparison`` (``Comparison.with_privacy``, a
rescale, never a re-plan). Pages bind to ``plans`` for what changes only when plans arrive and
to ``comparison`` for what follows the sliders.

Nothing here imports Panel: the view-model is plain ``param`` and unit-testable without a
browser or a server.

Example:
    >>> session = Session()
    >>> session.compare_now()
    >>> session.comparison.rows[0].mechanism in session.mechanisms
    True
"""

from __future__ import annotations

import copy
import time
from collections.abc import Hashable
from typing import Any

import numpy as np
import param
import yaml

from engine.errors import SpecError
from engine.mechanisms import Plan, mechanism_class, registry_names
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.specfile import load_text as read_spec
from engine.workflows.compare import Comparison, ComparisonRow
from engine.workloads.workload import Workload
from explorer.planning import (
    STORE,
    Estimate,
    JobStatus,
    PlanningJob,
    PlanStore,
    one_line,
    queue_rows,
    schedule,
    workload_key,
)

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
#: Seconds a page counts as loading at most (a browser that never reports it loaded must not
#: hold back its session's other pages for longer).
LOAD_PATIENCE = 30.0


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several keys in full each time (no ``&id001`` anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(spec: Any) -> str:
    """A spec as YAML: block style for the top levels, flow style for short inner lists; no
    anchors or aliases."""
    return yaml.dump(spec, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None,
                     width=100)


def explicit_totals(workload: Any, domain: Any) -> Any:
    """The workload items with every empty ``product: {}`` (the grand total) written as
    ``product: {<first attribute>: total}``, which means the same queries."""
    items = workload if isinstance(workload, list) else [workload]
    first = next(iter(domain)) if isinstance(domain, dict) and domain else None
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("product") == {} and first is not None:
            item = {**item, "product": {first: "total"}}
        out.append(item)
    return out


def parse_yaml(text: str) -> Any:
    """The spec in YAML 1.2 ``text`` ({} for blank text); raises a one-line ``SpecError``."""
    return read_spec(text) if text.strip() else {}


class Session(param.Parameterized):
    """One user's view-model, shared by every page they open.

    Args:
        spec: the scenario to start from (default :data:`DEFAULT_SPEC`).
        store: the plan store (default: the process-wide :data:`explorer.planning.STORE`).
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
    job = param.ClassSelector(
        class_=PlanningJob,
        allow_None=True,
        default=None,
        doc="The planning job the session waits for, if any.",
    )
    queue = param.List(
        default=[],
        doc=(
            "``(mechanism, state, estimate)`` of every chosen mechanism without a row yet, in "
            "plan order: running, queued, or held back until the user asks (see "
            "``explorer.planning.queue_rows``)."
        ),
    )
    held = param.List(
        default=[],
        item_type=Estimate,
        doc="Mechanisms estimated to plan over a minute, not started until the user asks.",
    )
    draft = param.Dict(default={}, doc="The spec being edited in the builder (may be invalid).")
    draft_text = param.String(default="", doc="The builder's YAML text.")
    draft_error = param.String(default="", doc="Why the draft is not valid ('' when it is).")
    stash = param.Dict(
        default=None,
        allow_None=True,
        doc="A draft put aside while an example is loaded (the tour).",
    )

    def __init__(
        self, spec: dict[str, Any] | None = None, store: PlanStore | None = None, **params: Any
    ) -> None:
        spec = copy.deepcopy(spec if spec is not None else DEFAULT_SPEC)
        scenario = Scenario.from_spec(spec)
        self.store = store or STORE
        self._key = ""
        self._skipped: dict[tuple[str, str], set[str]] = {}  # (workload key, noise) -> names
        self._allowed: dict[tuple[str, str], set[str]] = {}  # slow ones the user asked for
        self._estimates: dict[str, Estimate] = {}  # of the mechanisms last scheduled
        self._bound_seen: Any = None  # the stored bound the displayed comparison has
        self._seen_done = -1
        self._picked: str | None = None  # the mechanism the user chose to look at, if any
        self._refreshing = False
        self._loading: dict[Hashable, float] = {}  # pages loading in a browser -> since when
        self._own_text: str | None = None  # the last draft text the session wrote itself
        super().__init__(privacy=scenario.privacy.with_(), **params)
        # Separate lists: param may add None to a Selector's objects (allow_None).
        self.param.mechanisms.objects = list(registry_names())
        self.param.selected.objects = list(registry_names())
        self.set_scenario(scenario, draft=spec)

    # ----- scenario and draft -------------------------------------------------------------
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
            self.draft_error = one_line(exc)  # the text stays, as the user typed it
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
            message = one_line(exc)
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
            message = one_line(exc)
            self.param.update(draft_text=text, draft_error=message)
            return message
        return self.apply_draft(draft, text=text)

    def load_text(self, text: str, filename: str = "scenario.yaml") -> str:
        """Load an uploaded scenario file; on error nothing changes except the message returned.

        Unlike :meth:`apply_text`, a bad file does not replace the draft: the previous
        workload, draft and editor text all stay.
        """
        fmt = "json" if filename.lower().endswith(".json") else "yaml"
        try:
            draft = read_spec(text, fmt)  # parsed once: a census-sized file takes seconds
            scenario = Scenario.from_spec(copy.deepcopy(draft))
        except Exception as exc:  # SpecError normally; anything else is reported the same way
            return f"{filename}: {one_line(exc)}"
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

    # ----- privacy ------------------------------------------------------------------------
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

    # ----- plans and the comparison -------------------------------------------------------
    def _skips(self) -> set[str]:
        return self._skipped.get((self._key, self.privacy.noise), set())

    @param.depends("scenario", "mechanisms", "privacy.noise", watch=True)
    def refresh(self) -> None:
        """Reload the finished plans of the current workload, noise and mechanisms."""
        self._bound_seen = self.store.bound(self._key)
        plans = self.store.comparison(
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
            for n in self.store.missing(self._key, self.privacy.noise, self.mechanisms)
            if n not in skipped
        ]

    @property
    def complete(self) -> bool:
        """True when the comparison on show has every chosen mechanism's row (but those held
        back) and the bound.

        It reads what the session shows, not the plan store: a row finished in the store
        reaches the pages at the next poll, and until then the headline must not say that
        planning is over while the table still lacks that row.
        """
        shown = self.plans
        if shown is None or shown.bound.method == "pending":
            return False
        held = {e.mechanism for e in self.held}
        have = {r.mechanism for r in shown.rows}
        return all(n in have or n in held for n in self.mechanisms)

    def request_comparison(
        self, background: bool = True, include_skipped: bool = False, include_slow: bool = False
    ) -> PlanningJob | None:
        """Start planning what is missing, cheapest first (None when nothing is to plan).

        The bound starts at once on its own (see ``PlanStore.ensure_bound``). Mechanisms this
        session skipped are planned again only with ``include_skipped``; those estimated to
        take over a minute (``explorer.planning.AUTO_START_SECONDS``) only with
        ``include_slow`` (the page's "Plan anyway"), or once asked for on this workload.
        """
        where = (self._key, self.privacy.noise)
        if include_skipped:
            self._skipped.pop(where, None)
        if include_slow:
            self._allowed.setdefault(where, set()).update(self.missing())
        start, held = self._schedule()
        job = self.store.start(
            self,
            self.scenario.workload,
            self.privacy,
            [e.mechanism for e in start],
            key=self._key,
            background=background,
        )
        if self.job is not None and self.job is not job:
            self.job.leave(self)
        self.job = job if job is not None and not job.status().finished else None
        self._seen_done = -1
        self.held = held
        self._update_queue(self.job.status() if self.job is not None else None)
        self.refresh()
        return job

    def preview_queue(self) -> None:
        """Show the plan before it starts: the missing mechanisms in the order they will start,
        with the cost model's estimates (a served page shows this while it loads, since
        planning starts once it has). Nothing changes while a job runs."""
        if self.job is not None:
            return
        start, self.held = self._schedule()
        rows = queue_rows(None, [e.mechanism for e in start], self.held, self._estimates)
        if rows != self.queue:
            self.queue = rows

    def _schedule(self) -> tuple[list[Estimate], list[Estimate]]:
        """The missing mechanisms to start now, cheapest first, and those held back (see
        :func:`explorer.planning.schedule`); remembers their estimates."""
        where = (self._key, self.privacy.noise)
        start, held = schedule(
            self.missing(), self.scenario.workload, self.privacy, self._allowed.get(where, ())
        )
        self._estimates = {e.mechanism: e for e in start + held}
        return start, held

    def _update_queue(self, status: JobStatus | None) -> None:
        pending = self.job.pending() if self.job is not None else ()
        waiting = set(self.missing())
        rows = queue_rows(
            status,
            [n for n in pending if n in waiting],
            [e for e in self.held if e.mechanism in waiting],
            self._estimates,
        )
        if rows != self.queue:
            self.queue = rows

    def compare_now(self) -> None:
        """Plan what is missing on the calling thread (notebooks, tests)."""
        self.request_comparison(background=False)

    def page_loading(self, page: Hashable) -> None:
        """A browser is loading ``page`` (a served document) of this session: until
        :meth:`page_loaded`, polls leave the session as it is (see :meth:`poll`)."""
        self._loading[page] = time.monotonic()

    def page_loaded(self, page: Hashable) -> None:
        """``page`` has loaded in its browser, or closed (a page not loading: nothing)."""
        self._loading.pop(page, None)

    def _a_page_is_loading(self) -> bool:
        since = time.monotonic() - LOAD_PATIENCE
        return any(started > since for started in list(self._loading.values()))

    def poll(self) -> JobStatus | None:
        """Pick up rows (and the bound) finished since the last poll; clear the job once it
        is over.

        Nothing is picked up while a page of this session loads in a browser (for at most
        :data:`LOAD_PATIENCE` seconds): Panel sends a served page's document whole when the
        browser connects and drops changes to it until the browser reports it loaded, so a
        row picked up then (by the poll of the user's other page) never reached the new page:
        the tour's Compare page kept 3 of its 4 rows. The next poll after it loaded does it.
        """
        if self._a_page_is_loading():
            return self.job.status() if self.job is not None else None
        if self.store.bound(self._key) is not self._bound_seen:
            self.refresh()
        job = self.job
        if job is None:
            return None
        status = job.status()
        if job.key != self._key or job.privacy.noise != self.privacy.noise:
            job.leave(self)  # the user moved on to another workload or noise
            self.job = None
        elif status.finished or not job.waits(self):
            self.job = None
        elif status.done == self._seen_done:
            self._update_queue(status)  # a queued job may have started meanwhile
            return status  # no new row: keep the displayed comparison as it is
        self._seen_done = status.done
        self._update_queue(status)
        self.refresh()
        return status

    def cancel(self) -> None:
        """Stop waiting for the planning job (finished rows are kept).

        The job itself stops only when no other session waits for it.
        """
        job, self.job = self.job, None
        if job is not None:
            job.leave(self)
        self._update_queue(None)
        self.refresh()

    def skip(self) -> str | None:
        """Skip the mechanism being planned (for this session); returns its name.

        The job goes on with the others; the mechanism stops only when every session waiting
        for the job has skipped it.
        """
        name = self.job.skip(self) if self.job is not None else None
        if name is not None:
            self._skipped.setdefault((self._key, self.privacy.noise), set()).add(name)
        return name

    def release(self) -> None:
        """Stop waiting for planning (the last browser tab of this session closed)."""
        if self.job is not None:
            self.job.leave(self)
            self.job = None

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
