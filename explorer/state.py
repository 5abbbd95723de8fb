"""The explorer's view-model: one :class:`Session` per user, and a process-wide plan store.

A :class:`Session` holds what the user is looking at: the current scenario (last valid one),
the draft spec being edited in the workload builder (which may be invalid), the live privacy
level (a mutable :class:`~engine.privacy.Privacy`, so widgets bind straight to its parameters),
the mechanisms to compare, the selected mechanism and the comparison at the live privacy level.

Planning is the only slow step. :class:`PlanStore` keeps every finished plan per
``(workload, noise)`` for the life of the process, so revisiting a workload is instant and
every session (and every page of the multi-page app) shares them. Plans are data-independent
and contain nothing private. Missing plans are made by a :class:`PlanningJob` on a worker
thread; pages poll it to show progress and can cancel it. Moving an eps / delta / rho slider
only re-scales cached plans (``Comparison.with_privacy``); it never re-plans.

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
import dataclasses
import hashlib
import json
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import param
import yaml

from engine.bounds import Bound, svd_bound
from engine.compare import Comparison, ComparisonRow, compare
from engine.errors import Cancelled, NotApplicable, SpecError
from engine.mechanisms import Plan, mechanism_class, registry_names
from engine.privacy import Privacy
from engine.progress import Progress
from engine.scenario import Scenario
from engine.specfile import load_text
from engine.workloads.workload import Workload

#: The scenario every new session starts with: age (numeric, 32 values) by sex, asking for the
#: cumulative age distribution of each sex and the age histogram. Small enough to plan every
#: mechanism in seconds.
DEFAULT_SPEC: dict[str, Any] = {
    "domain": {"age": {"size": 32, "kind": "numeric"}, "sex": {"size": 2, "labels": ["F", "M"]}},
    "workload": [{"product": {"age": "prefix", "sex": "identity"}},
                 {"product": {"age": "identity"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
}

PRIVACY_FIELDS = ("noise", "epsilon", "delta", "rho", "calibration")

#: Largest number of per-query errors listed for one mechanism.
QUERY_LIST_LIMIT = 1_000_000


# ----- helpers -----------------------------------------------------------------------------
def workload_key(workload: Workload) -> str:
    """A short stable key for a workload (its domain and query groups), for caches."""
    doc = json.dumps({"domain": workload.domain.to_spec(), "workload": workload.to_spec()},
                     sort_keys=True, default=str)
    return hashlib.sha1(doc.encode()).hexdigest()[:16]


def mechanism_title(name: str) -> str:
    """The display title of a registered mechanism (its name when it has none)."""
    try:
        return mechanism_class(name).title or name
    except Exception:  # an unknown or broken registration must not break a page
        return name


def is_data_dependent(name: str) -> bool:
    """True for mechanisms that need the data to choose what to measure."""
    try:
        return bool(mechanism_class(name).data_dependent)
    except Exception:  # an unknown or broken registration counts as data-independent
        return False


def privacy_snapshot(privacy: Privacy) -> Privacy:
    """An independent copy of a (mutable) privacy level, safe to store in plans."""
    return privacy.with_()


def one_line(exc: BaseException) -> str:
    """A one-line message for any exception (SpecErrors already are one line)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, SpecError | NotApplicable):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _memoised_unit_variances(plan: Plan) -> Plan:
    """The plan with its unit per-query variances computed at most once.

    ``Plan.variances(privacy)`` scales the unit variances; memoising the unit part makes the
    per-query view re-scale instantly when the privacy level moves.
    """
    original = plan.query_variances
    memo: dict[str, np.ndarray] = {}
    lock = threading.Lock()

    def unit(p: Plan) -> np.ndarray:
        with lock:
            if "unit" not in memo:
                if original is not None:
                    memo["unit"] = original(p)
                else:
                    from engine.error import per_query_variances

                    if p.strategy is None:
                        raise NotApplicable(f"{p.mechanism}: the plan has no explicit strategy")
                    memo["unit"] = per_query_variances(p.workload, p.strategy)
            return memo["unit"]

    return dataclasses.replace(plan, query_variances=unit)


# ----- planning jobs -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class JobStatus:
    """A consistent snapshot of a planning job, for display."""

    state: str  # queued | running | cancelling | done | cancelled | failed
    total: int
    done: int
    current: str | None
    iteration: int
    loss: float
    message: str
    seconds: float

    @property
    def finished(self) -> bool:
        """True once the job will not change any more."""
        return self.state in ("done", "cancelled", "failed")

    @property
    def fraction(self) -> float:
        """Share of mechanisms finished, 0..1."""
        return self.done / self.total if self.total else 1.0

    def describe(self) -> str:
        """One line for a progress indicator."""
        if self.state == "queued":
            return "Waiting for a free planner..."
        if self.state == "done":
            return f"Planned {self.total} mechanism(s) in {self.seconds:.1f} s."
        if self.state == "cancelled":
            return f"Cancelled after {self.done} of {self.total} mechanism(s)."
        if self.state == "failed":
            return f"Planning failed: {self.message}"
        where = f"Planning {self.current} ({self.done + 1} of {self.total})" if self.current \
            else "Computing the SVD lower bound"
        if self.state == "cancelling":
            return f"Cancelling: {self.current or 'the bound'} stops at its next checkpoint..."
        if self.iteration:
            where += f", iteration {self.iteration}"
            if math.isfinite(self.loss):
                where += f", objective {self.loss:.4g}"
        return where + "..."


class PlanningJob:
    """Plans the missing mechanisms of one ``(workload, noise)`` on a worker thread.

    Finished rows go straight into the store, so partial results survive a cancel and show
    up while the rest is still running.
    """

    def __init__(self, store: PlanStore, key: str, workload: Workload, privacy: Privacy,
                 names: Sequence[str], need_bound: bool) -> None:
        self.store, self.key, self.workload = store, key, workload
        self.privacy = privacy_snapshot(privacy)
        self.names = tuple(names)
        self.need_bound = need_bound
        self.progress = Progress(self._on_progress)
        self._cancelled = False  # the whole job (as opposed to skipping one mechanism)
        self._skip: str | None = None
        self._lock = threading.Lock()
        self._state = "queued"
        self._done = 0
        self._iteration = 0
        self._loss = math.nan
        self._message = ""
        self._started = time.perf_counter()
        self._finished_at: float | None = None
        self._event = threading.Event()

    # -- called on the worker thread --------------------------------------------------------
    def _on_progress(self, iteration: int, loss: float, message: str) -> None:
        with self._lock:
            self._iteration, self._loss, self._message = iteration, loss, message

    def _current(self) -> str | None:
        return self.names[self._done] if self._done < len(self.names) else None

    def run(self) -> None:
        """Plan every missing mechanism, then the bound; never raises."""
        with self._lock:
            if self._state == "cancelling":
                self._finish("cancelled")
                return
            self._state = "running"
            self._started = time.perf_counter()
        try:
            self._plan_all()
        except Cancelled:
            with self._lock:
                self._finish("cancelled")
            return
        except Exception as exc:  # a broken engine must not kill the worker thread
            with self._lock:
                self._message = one_line(exc)
                self._finish("failed")
            return
        with self._lock:
            self._finish("cancelled" if self._cancelled else "done")

    def _finish(self, state: str) -> None:
        self._state = state
        self._finished_at = time.perf_counter()
        self._event.set()

    def _on_row(self, row: ComparisonRow) -> None:
        self.store.put_row(self.key, self.workload, self.privacy.noise, row)
        with self._lock:
            self._done += 1
            self._iteration, self._loss = 0, math.nan
        if self._cancelled:
            raise Cancelled("cancelled between mechanisms")

    def _plan_all(self) -> None:
        remaining = list(self.names)
        bound: Bound | None = None
        while remaining:
            before = self._done
            try:
                result = compare(self.workload, self.privacy, remaining,
                                 progress=self.progress, on_row=self._on_row)
                bound = result.bound
                break
            except Cancelled:
                if self._cancelled:
                    raise
                remaining = self._after_skip(remaining, self._done - before)
                continue
            except Exception as exc:
                finished = self._done - before
                if finished >= len(remaining):  # every row is in: the bound itself failed
                    bound = Bound(None, "none", f"the bound could not be computed: "
                                                f"{one_line(exc)}")
                    break
                # The running mechanism raised something compare() does not treat as "not
                # applicable": record it as that mechanism's outcome and go on with the rest.
                failed = remaining[finished]
                self._on_row(ComparisonRow(failed, mechanism_title(failed), None,
                                           f"failed: {one_line(exc)}", 0.0))
                remaining = remaining[finished + 1:]
        if bound is None and self.need_bound:
            try:
                bound = svd_bound(self.workload)
            except Exception as exc:  # no bound is better than a crashed page
                bound = Bound(None, "none", f"the bound could not be computed: {one_line(exc)}")
        if bound is not None:
            self.store.put_bound(self.key, self.workload, bound)

    def _after_skip(self, remaining: list[str], finished: int) -> list[str]:
        """What is left to plan once a skip request stopped a mechanism."""
        with self._lock:
            target, self._skip = self._skip, None
            running = remaining[finished] if finished < len(remaining) else None
            # A fresh Progress: the old one stays cancelled for ever.
            self.progress = Progress(self._on_progress)
            if running is not None and running == target:
                self.store.put_skipped(self.key, self.workload, self.privacy.noise, running)
                self._done += 1
                return remaining[finished + 1:]
        # The mechanism to skip had just finished and the next one caught the request: plan
        # that one again from the start.
        return remaining[finished:]

    # -- called from any thread --------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the job to stop at the next checkpoint of the running mechanism."""
        with self._lock:
            self._cancelled = True
            progress = self.progress
            if self._state in ("queued", "running"):
                self._state = "cancelling"
        progress.cancel()

    def skip(self) -> str | None:
        """Stop planning the running mechanism and go on with the others.

        The mechanism is left out of later automatic planning of this workload (the table
        says it was skipped); an explicit request plans it again. Returns its name.
        """
        with self._lock:
            current = self._current()
            if current is None or self._state != "running":
                return None
            self._skip = current
            progress = self.progress
        progress.cancel()
        return current

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finished (True) or the timeout passed (False)."""
        return self._event.wait(timeout)

    def status(self) -> JobStatus:
        """A consistent snapshot for display."""
        with self._lock:
            end = self._finished_at if self._finished_at is not None else time.perf_counter()
            return JobStatus(self._state, len(self.names), self._done, self._current(),
                             self._iteration, self._loss, self._message, end - self._started)


# ----- the plan store ---------------------------------------------------------------------
@dataclasses.dataclass
class _Entry:
    workload: Workload
    bound: Bound | None = None
    rows: dict[str, dict[str, ComparisonRow]] = dataclasses.field(default_factory=dict)
    skipped: dict[str, set[str]] = dataclasses.field(default_factory=dict)


class PlanStore:
    """Finished plans per ``(workload, noise)``, shared by every session of the process.

    Args:
        max_workloads: how many workloads to keep (least recently used ones are dropped).
        workers: how many planning jobs may run at the same time.
    """

    def __init__(self, max_workloads: int = 48, workers: int = 2) -> None:
        self.max_workloads = max_workloads
        self._lock = threading.RLock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._jobs: dict[tuple[str, str], PlanningJob] = {}
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None

    def _entry(self, key: str, workload: Workload) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(workload)
                while len(self._entries) > self.max_workloads:
                    self._entries.popitem(last=False)
            self._entries.move_to_end(key)
            return entry

    def put_row(self, key: str, workload: Workload, noise: str, row: ComparisonRow) -> None:
        """Store one finished row (its plan's per-query variances are memoised)."""
        if row.plan is not None:
            row = dataclasses.replace(row, plan=_memoised_unit_variances(row.plan))
        with self._lock:
            entry = self._entry(key, workload)
            entry.rows.setdefault(noise, {})[row.mechanism] = row

    def put_skipped(self, key: str, workload: Workload, noise: str, name: str) -> None:
        """Remember that the user skipped planning ``name`` for this workload and noise."""
        with self._lock:
            self._entry(key, workload).skipped.setdefault(noise, set()).add(name)

    def skipped(self, key: str, noise: str) -> set[str]:
        """Mechanisms whose planning the user skipped (a copy)."""
        with self._lock:
            entry = self._entries.get(key)
            return set(entry.skipped.get(noise, ())) if entry else set()

    def put_bound(self, key: str, workload: Workload, bound: Bound) -> None:
        """Store the SVD bound of a workload."""
        with self._lock:
            self._entry(key, workload).bound = bound

    def rows(self, key: str, noise: str) -> dict[str, ComparisonRow]:
        """Finished rows of a workload for one noise family (a copy)."""
        with self._lock:
            entry = self._entries.get(key)
            return dict(entry.rows.get(noise, {})) if entry else {}

    def bound(self, key: str) -> Bound | None:
        """The stored SVD bound, or None when not computed yet."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.bound if entry else None

    def missing(self, key: str, noise: str, names: Iterable[str],
                include_skipped: bool = False) -> list[str]:
        """The names among ``names`` with no finished row yet (skipped ones left out)."""
        have = self.rows(key, noise)
        skipped = set() if include_skipped else self.skipped(key, noise)
        return [n for n in names if n not in have and n not in skipped]

    def comparison(self, key: str, workload: Workload, privacy: Privacy,
                   names: Sequence[str]) -> Comparison | None:
        """The finished part of the comparison, re-scaled to ``privacy`` (None when empty)."""
        rows = self.rows(key, privacy.noise)
        skipped = self.skipped(key, privacy.noise)
        chosen = tuple(rows[n] if n in rows else ComparisonRow(
            n, mechanism_title(n), None, "not planned: skipped by the user (plan it with "
            "'Plan missing mechanisms')", 0.0) for n in names if n in rows or n in skipped)
        bound = self.bound(key)
        if not chosen and bound is None:
            return None
        if bound is None:
            bound = Bound(None, "pending", "the bound is still being computed")
        return Comparison(workload, privacy_snapshot(privacy), bound, chosen).with_privacy(
            privacy_snapshot(privacy))

    def start(self, workload: Workload, privacy: Privacy, names: Sequence[str],
              key: str | None = None, background: bool = True,
              include_skipped: bool = False) -> PlanningJob | None:
        """Plan what is missing; None when everything is cached already.

        A job already running for the same workload and noise is returned instead of starting
        a second one (two pages of one session, or two sessions, share it).
        """
        key = key or workload_key(workload)
        with self._lock:
            job = self._jobs.get((key, privacy.noise))
            if job is not None and not job.status().finished:
                return job
            names = self.missing(key, privacy.noise, names, include_skipped)
            if include_skipped and key in self._entries:
                self._entries[key].skipped.pop(privacy.noise, None)
            need_bound = self.bound(key) is None
            if not names and not need_bound:
                return None
            job = PlanningJob(self, key, workload, privacy, names, need_bound)
            self._jobs[(key, privacy.noise)] = job
            if background:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self._workers,
                                                        thread_name_prefix="explorer-planner")
                self._executor.submit(job.run)
        if not background:
            job.run()
        return job

    def clear(self) -> None:
        """Forget every plan (running jobs finish, and store what they finish)."""
        with self._lock:
            self._entries.clear()


#: The store shared by every session of this process.
STORE = PlanStore()


# ----- the session ----------------------------------------------------------------------
class Session(param.Parameterized):
    """One user's view-model, shared by every page they open.

    Args:
        spec: the scenario to start from (default :data:`DEFAULT_SPEC`).
        store: the plan store (default: the process-wide :data:`STORE`).
    """

    scenario = param.ClassSelector(class_=Scenario, doc=(
        "The current (last valid) scenario; its privacy is the level it was loaded with, the "
        "live level is ``privacy``."))
    privacy = param.ClassSelector(class_=Privacy, instantiate=False,
                                  doc="The live privacy level; sliders bind to its parameters.")
    mechanisms = param.ListSelector(default=[], objects=[], doc="Mechanisms to compare.")
    selected = param.Selector(default=None, objects=[], allow_None=True,
                              doc="The mechanism shown on the strategy and per-query views.")
    comparison = param.ClassSelector(class_=Comparison, allow_None=True, default=None,
                                     doc="The finished comparison at the live privacy level.")
    planned = param.Integer(default=0, doc="Bumped whenever new plans arrive (not on rescale).")
    job = param.ClassSelector(class_=PlanningJob, allow_None=True, default=None,
                              doc="The planning job the session waits for, if any.")
    draft = param.Dict(default={}, doc="The spec being edited in the builder (may be invalid).")
    draft_text = param.String(default="", doc="The builder's YAML text.")
    draft_error = param.String(default="", doc="Why the draft is not valid ('' when it is).")
    stash = param.Dict(default=None, allow_None=True,
                       doc="A draft put aside while an example is loaded (the tour).")

    def __init__(self, spec: dict[str, Any] | None = None, store: PlanStore | None = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.store = store or STORE
        self._key = ""
        self._applying = False
        self._own_text = False
        self._seen_done = -1
        # Separate lists: param may add None to a Selector's objects (allow_None).
        self.param.mechanisms.objects = list(registry_names())
        self.param.selected.objects = list(registry_names())
        spec = copy.deepcopy(spec if spec is not None else DEFAULT_SPEC)
        scenario = Scenario.from_spec(spec)
        self.privacy = privacy_snapshot(scenario.privacy)
        self.privacy.param.watch(self._privacy_changed, list(PRIVACY_FIELDS))
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

    def set_scenario(self, scenario: Scenario, draft: dict[str, Any] | None = None,
                     text: str | None = None) -> None:
        """Make ``scenario`` current (its privacy becomes the live privacy level)."""
        draft = copy.deepcopy(draft) if draft is not None else scenario.to_spec()
        names = list(self.param.mechanisms.objects)
        wanted = [n for n in scenario.mechanisms if n in names] or names
        self._applying = True
        try:
            self.privacy.param.update(**{f: getattr(scenario.privacy, f)
                                         for f in PRIVACY_FIELDS})
        finally:
            self._applying = False
        self._key = workload_key(scenario.workload)
        self._update_draft(scenario=scenario, mechanisms=wanted, draft=draft,
                           draft_text=text if text is not None else dump_yaml(draft),
                           draft_error="")
        self.refresh(new_plans=True)

    def _update_draft(self, **values: Any) -> None:
        # The session's own writes to draft_text must not be taken for editor input.
        self._own_text = True
        try:
            self.param.update(**values)
        finally:
            self._own_text = False

    @param.depends("draft_text", watch=True)
    def _text_edited(self) -> None:
        # The spec editor is bound to draft_text: apply what the user typed.
        if not self._own_text:
            self.apply_text(self.draft_text)

    def apply_draft(self, draft: Any, text: str | None = None) -> str:
        """Validate a draft spec; make it current when valid.

        The draft (and its text) are kept either way, so the user's work is never lost.

        Returns:
            '' when valid, else the validator's one-line message (also in ``draft_error``).
        """
        if not isinstance(draft, dict):
            message = "scenario: expected a mapping with domain and workload"
            self._update_draft(draft_error=message,
                               **({"draft_text": text} if text is not None else {}))
            return message
        try:
            scenario = Scenario.from_spec(copy.deepcopy(draft))
        except Exception as exc:  # SpecError normally; anything else is shown the same way
            message = one_line(exc)
            self._update_draft(draft=copy.deepcopy(draft), draft_error=message,
                               draft_text=text if text is not None else dump_yaml(draft))
            return message
        self.set_scenario(scenario, draft=draft, text=text)
        return ""

    def apply_text(self, text: str) -> str:
        """Parse YAML text from the spec editor and apply it (see :meth:`apply_draft`)."""
        try:
            draft = load_text(text) if text.strip() else {}
        except SpecError as exc:
            message = one_line(exc)
            self._update_draft(draft_text=text, draft_error=message)
            return message
        return self.apply_draft(draft, text=text)

    def load_text(self, text: str, filename: str = "scenario.yaml") -> str:
        """Load an uploaded scenario file; on error nothing changes except the message returned.

        Unlike :meth:`apply_text`, a bad file does not replace the draft: the previous
        workload, draft and editor text all stay.
        """
        fmt = "json" if filename.lower().endswith(".json") else "yaml"
        try:
            scenario = Scenario.loads(text, fmt)
            draft = load_text(text, fmt)
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
        spec["mechanisms"] = list(self.mechanisms)
        return spec

    def export_yaml(self) -> str:
        """:meth:`export_spec` as YAML text (what the download button saves)."""
        return dump_yaml(self.export_spec())

    # ----- privacy ------------------------------------------------------------------------
    def _privacy_changed(self, *events: param.parameterized.Event) -> None:
        if self._applying:
            return
        # Only the comparison follows the slider here: re-scaling cached plans is cheap, and
        # the builder's YAML is brought in step by the builder itself (sync_draft_privacy), so
        # a slider never pays for re-dumping a large spec.
        if any(e.name == "noise" for e in events):
            self.refresh(new_plans=True)
        elif self.comparison is not None:
            self.comparison = self.comparison.with_privacy(privacy_snapshot(self.privacy))

    def sync_draft_privacy(self) -> None:
        """Write the live privacy level into the draft (unless it holds invalid edits)."""
        spec = self.privacy.to_spec()
        if self.draft_error or not isinstance(self.draft, dict) or not self.draft:
            return
        if self.draft.get("privacy") == spec:
            return
        draft = dict(self.draft, privacy=spec)
        self._update_draft(draft=draft, draft_text=dump_yaml(draft))

    # ----- comparisons --------------------------------------------------------------------
    @param.depends("mechanisms", watch=True)
    def _mechanisms_changed(self) -> None:
        self.refresh(new_plans=True)

    def refresh(self, new_plans: bool = False) -> None:
        """Rebuild the comparison from the store at the live privacy level."""
        comparison = self.store.comparison(self._key, self.scenario.workload, self.privacy,
                                           self.mechanisms)
        if comparison is not None:
            comparison = dataclasses.replace(comparison, rows=tuple(sorted(
                comparison.rows, key=lambda r: (r.rmse is None, r.rmse or 0.0))))
        selected = self.selected
        planned = [r.mechanism for r in comparison.rows if r.plan is not None] \
            if comparison else []
        if selected not in planned:
            best = comparison.best() if comparison else None
            selected = best.mechanism if best else None
        self.param.update(comparison=comparison, selected=selected)
        if new_plans:
            self.planned += 1

    def missing(self) -> list[str]:
        """Chosen mechanisms without a finished plan for the current workload and noise."""
        return self.store.missing(self._key, self.privacy.noise, self.mechanisms)

    @property
    def complete(self) -> bool:
        """True when every chosen mechanism and the bound are finished."""
        return not self.missing() and self.store.bound(self._key) is not None

    def request_comparison(self, background: bool = True, include_skipped: bool = False
                           ) -> PlanningJob | None:
        """Start planning what is missing (None when all is cached; the result is shown).

        Mechanisms the user skipped are planned again only with ``include_skipped``.
        """
        job = self.store.start(self.scenario.workload, self.privacy, list(self.mechanisms),
                               key=self._key, background=background,
                               include_skipped=include_skipped)
        self.job = job if job is not None and not job.status().finished else None
        self._seen_done = -1
        self.refresh(new_plans=True)
        return job

    def compare_now(self) -> None:
        """Plan what is missing on the calling thread (notebooks, tests)."""
        self.request_comparison(background=False)

    def poll(self) -> JobStatus | None:
        """Pick up rows finished since the last poll; clear the job once it is over."""
        job = self.job
        if job is None:
            return None
        status = job.status()
        if status.finished or job.key != self._key or job.privacy.noise != self.privacy.noise:
            self.job = None
        elif status.done == self._seen_done:
            return status  # nothing new: keep the displayed comparison as it is
        self._seen_done = status.done
        self.refresh(new_plans=True)
        return status

    def cancel(self) -> None:
        """Cancel the running planning job (finished rows are kept)."""
        if self.job is not None:
            self.job.cancel()

    def skip(self) -> str | None:
        """Skip the mechanism being planned; the job goes on with the others."""
        return self.job.skip() if self.job is not None else None

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


def dump_yaml(spec: Any) -> str:
    """A spec as YAML: block style for the top levels, flow style for short inner lists."""
    return yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=100)


# ----- sessions shared by the pages of one user ------------------------------------------------
_SESSIONS: OrderedDict[str, Session] = OrderedDict()
_SESSIONS_LOCK = threading.Lock()
MAX_SESSIONS = 200


def session_for(sid: str | None, factory: Callable[[], Session] = Session
                ) -> tuple[str, Session]:
    """The session with id ``sid``, or a new one (with a new id) when there is none."""
    with _SESSIONS_LOCK:
        if sid and sid in _SESSIONS:
            _SESSIONS.move_to_end(sid)
            return sid, _SESSIONS[sid]
    session = factory()
    with _SESSIONS_LOCK:
        sid = sid if sid and len(sid) <= 64 and sid.isalnum() else secrets.token_hex(8)
        _SESSIONS[sid] = session
        while len(_SESSIONS) > MAX_SESSIONS:
            _SESSIONS.popitem(last=False)
    return sid, session
