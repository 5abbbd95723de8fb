"""THE release pipeline: plan -> ledger charge -> measure -> reconstruct -> post-process ->
record, used by every caller (``run``, ``census``, the explorer's pages).

:func:`release` is the one door. It serves

* the data-independent mechanisms (a registered name, planned here, or an already computed
  :class:`~engine.mechanisms.base.Plan`): the exact samplers of the plan
  (:meth:`Plan.measure`), its reconstruction, then the post-processing hook
  :func:`publishable` (one call site);
* ``aim-grem`` (data-dependent; selection and measurements inside the mechanism's run);
* ``hierarchical-pgsr`` on a region hierarchy (its variants as ``knobs``).

Order, for every kind: everything that can fail on the input is checked first (mechanism,
workload, memory, output directory); then the release's cost is charged to the ledger
**before any noise is drawn** (a refusal raises :class:`~engine.ledger.BudgetExceeded`, draws
nothing and writes nothing); then the noise, the estimate, the tables and the record, written
atomically (:func:`engine.workflows.release_files.write_release`). A cancel
(:class:`~engine.errors.Cancelled`) or a crash after the charge marks the reservation
``failed`` (it does not count) and leaves no file.

Who is charged (:func:`release` never prints; its :attr:`Release.notes` say what happened):

* a seeded run (``seed``: teaching and tests; :data:`engine.noise.SEEDED_LABEL`), bundled
  demo data (``bundled``) and a run marked ``teaching`` run in the teaching sandbox: never
  charged, every output says so;
* a run that writes nothing (no ``out``, no ``store``) is an evaluation, not a release;
* synthetic data (no ``fingerprint``) releases nothing private;
* data not registered in the ledger is released unbudgeted (a note says how to register it);
* a registered data set is charged; an archived one takes no new release.

Example:
    >>> import numpy as np, tempfile
    >>> from engine.domain import Domain
    >>> from engine.privacy import DEFAULT_DELTA, Privacy
    >>> from engine.workloads import Workload
    >>> d = Domain.from_sizes([2, 3])
    >>> w = Workload.marginals(d, k=1)
    >>> r = release("identity", data=np.arange(6.0), workload=w,
    ...             privacy=Privacy(noise="zcdp", rho=1.0), seed=1, out=tempfile.mkdtemp())
    >>> r.record["notice"], r.charged
    ('seeded: reproducible, not a private release', None)
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.analysis.cost_model import require
from engine.errors import NotApplicable, SpecError
from engine.executor import map_ordered
from engine.ledger import (
    BudgetStatus,
    Cost,
    Ledger,
    Spent,
    composed,
    default_url,
    sqlite_file,
)
from engine.ledger.charge import release_cost
from engine.mechanisms import get
from engine.mechanisms.base import Measurement, Mechanism, Plan
from engine.mechanisms.hierarchical.level_noise import LAPLACE_GRID_EXPONENT
from engine.noise import SEEDED_LABEL, release_rng
from engine.privacy import DEFAULT_DELTA, Privacy
from engine.progress import Progress
from engine.workflows.adaptive_tables import adaptive_tables
from engine.workflows.census_tables import hierarchy_tables
from engine.workflows.release_files import (
    TEACHING_LABEL,
    check_out_dir,
    package_version,
    release_directory,
    utc_now,
    workload_summary,
    write_release,
)
from engine.workflows.tables import (
    PublishedTables,
    check_publishing,
    publishable_tables,
)

RECORD_UNIT = "one record (add/remove) of the data"
INDIVIDUAL_UNIT = "one individual joining or leaving a group"
HIERARCHICAL = "hierarchical-pgsr"
ADAPTIVE = "aim-grem"


@dataclass(frozen=True)
class Release:
    """What :func:`release` did.

    Attributes:
        record: the release record (JSON values; ``release.json`` when written).
        tables: the released tables and the post-processing that made them.
        out_dir: where the tables and record were written (None: nothing written).
        status: the data set's ledger status after the release (None: not charged).
        charged: the cost charged to the ledger (None: not charged).
        notes: one line per thing a caller should tell the user (not charged and why, or
            what was charged and what is left).
        result: the mechanism's raw output, for evaluation against the truth by the caller:
            the workload answers (data-independent, a float vector in counts), the
            ``AdaptiveResult`` (aim-grem) or the released ``Hierarchy`` (hierarchical-pgsr).
        records: the number of records (data sets) or groups (hierarchies) released from.
    """

    record: dict[str, Any]
    tables: PublishedTables
    out_dir: Path | None
    status: BudgetStatus | None
    charged: Cost | None
    notes: tuple[str, ...]
    result: Any
    records: int


def release(mechanism: str | Plan, *, data: Any, workload: Any = None,
            privacy: Privacy | None = None, knobs: dict[str, Any] | None = None,
            fingerprint: str | None = None, bundled: bool = False, teaching: bool = False,
            seed: int | None = None, out: str | os.PathLike[str] | None = None,
            store: bool = False, ledger: str | None = None, user: str | None = None,
            at_delta: float | None = None, grid: int | None = None,
            executor: Executor | None = None, progress: Progress | None = None,
            on_round: Callable[[Any], None] | None = None,
            post_process: str = "consistent", fit_space: str = "auto") -> Release:
    """Release ``data`` through ``mechanism`` (module docstring: the order and who is charged).

    Args:
        mechanism: a registered name, or a Plan already computed (it carries its workload and
            privacy).
        data: an ``engine.data.Dataset`` (or a data vector, data-independent mechanisms
            only); a ``Hierarchy`` for ``hierarchical-pgsr``.
        workload: the workload (not for a Plan nor for ``hierarchical-pgsr``).
        privacy: the privacy level (eps / delta / rho; a pure-eps ``laplace`` level for
            ``hierarchical-pgsr``); a Plan is re-calibrated to it when given.
        knobs: mechanism constructor knobs (``hierarchical-pgsr``: ``variant``, ``noise``
            (sampler), ``split``, ``level_weights``; ``aim-grem``: ``max_rounds``).
        fingerprint: SHA-256 (hex) of the data file's bytes: the data set's identity in the
            ledger (None: synthetic data, nothing private).
        bundled: the data is bundled demo data (teaching sandbox, never charged).
        teaching: mark the run as teaching (sandbox, never charged).
        seed: integer seed of the noise (teaching and tests; None: OS entropy).
        out: directory to write the tables and ``release.json`` into.
        store: write a charged release beside the ledger
            (:func:`~engine.workflows.release_files.release_directory`) when ``out`` is None.
        ledger: SQLAlchemy URL of the ledger (None: ``$DPWB_LEDGER_URL`` or the default
            SQLite file; a SQLite file that does not exist holds nothing and is not created).
        user: who releases (kept with the charge).
        at_delta: delta at which a refusal and the notes state what remains as eps.
        grid: exponent k of the release grid ``2**-k`` (data-independent real strategies).
        executor: plans a named data-independent mechanism off this process.
        progress: reported and cancellable (``engine.errors.Cancelled``) by the data-dependent
            mechanisms.
        on_round: called with every ``aim-grem`` round record (live charts).
        post_process: the post-processing of a data-independent release's tables
            (:func:`publishable`): ``consistent`` (whole non-negative counts that agree across
            tables, with the raw column) or ``raw`` (the unbiased estimates only); for
            ``aim-grem`` the same on its GReM-MLE marginals
            (:func:`~engine.workflows.adaptive_tables.adaptive_tables`);
            ``hierarchical-pgsr`` publishes its variant's own counts either way
            (:func:`~engine.workflows.census_tables.hierarchy_tables`).
        fit_space: where the consistent counts are fitted (``auto``, ``cells``,
            ``marginals`` or ``three-way``, :func:`~engine.workflows.tables.publishable_tables`):
            the last two fit 1- and 2-way marginal tables in their own space (``three-way`` as
            the margins of agreeing 3-way tables), faster on large domains; ``auto`` (the
            default) takes ``three-way`` for such tables of a Kronecker plan on a domain of
            more than 100,000 cells, ``cells`` otherwise.

    Returns:
        The :class:`Release`.

    Raises:
        SpecError: bad input (one line naming the field), before anything is charged.
        NotApplicable: the mechanism cannot serve the workload or the privacy level.
        BudgetExceeded: the release does not fit what the data set has left (nothing drawn).
        LedgerError: the ledger cannot be used, or the data set is archived.
        Cancelled: ``progress`` was cancelled (the charge is marked failed; nothing written).
    """
    check_publishing(post_process, fit_space)
    if out is not None:
        check_out_dir(out)
    step = _prepare(mechanism, data, workload, privacy, knobs or {}, grid, executor,
                    post_process, fit_space)
    sandbox = seed is not None or bundled or teaching
    notice = SEEDED_LABEL if seed is not None else (TEACHING_LABEL if sandbox else None)
    record: dict[str, Any] = {
        "mechanism": step.name, "notice": notice, "seeded": seed is not None, "seed": seed,
        "teaching": sandbox and seed is None, "time": utc_now(),
        "package_version": package_version(), "knobs": step.knobs,
        "privacy": step.privacy_spec, "privacy_unit": step.unit, "data_sha256": fingerprint,
        **step.describe}
    notes: list[str] = []
    note = _not_charged(seed, sandbox, out is not None or store, fingerprint)
    with ExitStack() as stack:
        holder = None if note is not None else _open_ledger(ledger)
        if holder is not None:
            stack.enter_context(holder)
        entry = None if holder is None else holder.dataset(fingerprint)
        if note is None and entry is None:
            note = _UNREGISTERED.format(cost=step.cost.describe())
        if note is not None:
            notes.append(note)
        charge: Any = nullcontext(None) if entry is None else holder.reserve(
            entry.fingerprint, step.cost, mechanism=step.name, knobs=step.knobs,
            workload_sha256=step.describe.get("workload", {}).get("sha256"),
            privacy=step.privacy_spec, user=user, at_delta=at_delta)
        with charge as reservation:  # charged here, before the generator exists
            start = time.perf_counter()
            result, tables, drawn = step.run(release_rng(seed), progress, on_round)
            record.update(drawn, post_processing=tables.method,
                          seconds=time.perf_counter() - start)
            status = None
            if reservation is not None:
                status = holder.status(entry.name, _delta(step.cost, at_delta))
                record["budget"] = status.as_json()
            else:
                record["budget"] = {"charged": False, "reason": note}
            target = out if out is not None else (
                release_directory(entry.name, reservation.id)
                if store and reservation is not None else None)
            written = None if target is None else write_release(target, tables, record)
            if reservation is not None:
                reservation.record_path = str(Path(written).resolve()) if written else None
                reservation.rounds = record.get("ledger")
    if reservation is not None:
        notes.append(f"charged {step.cost.describe()} to {entry.name}: spent "
                     f"{status.spent.spent:.6g} of {entry.budget.describe()}")
    return Release(record, tables, written, status, None if reservation is None else step.cost,
                   tuple(notes), result, step.records)


@dataclass(frozen=True)
class Quote:
    """What a release would cost and leave, before it is made (:func:`quote`).

    Attributes:
        cost: the release's privacy cost.
        dataset: the registered data set it would be charged to (None: not charged).
        note: why it would not be charged (None: it would be).
        refusal: the ledger's refusal, with what still fits (None: it fits).
        before: the data set's budget composition now (None: not charged).
        after: the composition with this release (None: not charged).
        at_delta: the delta the remaining budget is stated at as eps.
    """

    cost: Cost
    dataset: str | None
    note: str | None
    refusal: str | None
    before: Spent | None
    after: Spent | None
    at_delta: float

    def line(self) -> str:
        """One line for a page: the note, the refusal, or the cost and what remains after."""
        if self.note is not None:
            return f"Not charged ({self.cost.describe()}): {self.note}."
        if self.refusal is not None:
            return self.refusal
        budget = self.after.budget
        return (f"This release costs {self.cost.describe()}, charged to {self.dataset} "
                f"({budget.describe()} in all); remaining after it: {self.after.remaining:.6g} "
                f"(rho {self.after.remaining_rho:.6g} = eps "
                f"{self.after.remaining_epsilon(self.at_delta):.6g} at delta "
                f"{self.at_delta:.3g}).")


def quote(cost: Cost, *, fingerprint: str | None, bundled: bool = False,
          teaching: bool = False, seed: int | None = None, ledger: str | None = None,
          at_delta: float | None = None) -> Quote:
    """What a release of ``cost`` (e.g. :func:`engine.ledger.charge.release_cost`) from the
    data with ``fingerprint`` would be charged and leave, by the rules of :func:`release`
    (a release that writes its files). Reads the ledger; writes nothing, creates nothing.

    Raises:
        LedgerError: the ledger cannot be used.
    """
    delta = _delta(cost, at_delta)
    note = _not_charged(seed, seed is not None or bundled or teaching, True, fingerprint)
    holder = None if note is not None else _open_ledger(ledger)
    if holder is None:
        return Quote(cost, None, note or _UNREGISTERED.format(cost=cost.describe()), None,
                     None, None, delta)
    with holder:
        entry = holder.dataset(fingerprint)
        if entry is None:
            return Quote(cost, None, _UNREGISTERED.format(cost=cost.describe()), None, None,
                         None, delta)
        refusal = holder.refusal(entry.name, cost, delta)
        costs = [r.cost for r in holder.history(entry.name)]
    before = composed(entry.budget, costs)
    after = before if refusal is not None else composed(entry.budget, [*costs, cost])
    return Quote(cost, entry.name, None, refusal, before, after, delta)


_UNREGISTERED = ("data set not registered in the budget ledger: this release ({cost}) is not "
                 "budgeted; register it with `python -m engine budget init --data FILE --name "
                 "NAME --rho R` or on the Budget page")


def _not_charged(seed: int | None, sandbox: bool, writes: bool, fingerprint: str | None
                 ) -> str | None:
    """Why a release is not charged (None: charge it when its data set is registered)."""
    if seed is not None:
        return "seeded run: not a private release; the budget ledger is not charged"
    if sandbox:
        return (f"{TEACHING_LABEL}: the teaching sandbox (bundled demo data) is never charged "
                "to the budget ledger")
    if not writes:
        return ("evaluation only: nothing is written, so nothing is released; the budget ledger "
                "is not charged")
    if fingerprint is None:
        return "synthetic data: nothing private is released; the budget ledger is not charged"
    return None


def _open_ledger(url: str | None) -> Ledger | None:
    """The ledger at ``url``, or None when it is a SQLite file that does not exist yet."""
    url = url or default_url()
    path = sqlite_file(url)
    return None if path is not None and not path.exists() else Ledger(url)


def _delta(cost: Cost, at_delta: float | None) -> float:
    """The delta the remaining budget is stated at: the caller's, else the release's own."""
    if at_delta is not None:
        return float(at_delta)
    return cost.delta if 0 < cost.delta < 1 else DEFAULT_DELTA


@dataclass(frozen=True)
class _Step:
    """One kind of release, prepared: its name, knobs, cost and how to draw it."""

    name: str
    knobs: dict[str, Any]
    cost: Cost
    unit: str
    privacy_spec: dict[str, Any]
    describe: dict[str, Any]
    records: int
    run: Callable[[np.random.Generator, Progress | None, Callable[[Any], None] | None],
                  tuple[Any, PublishedTables, dict[str, Any]]]


def _prepare(mechanism: str | Plan, data: Any, workload: Any, privacy: Privacy | None,
             knobs: dict[str, Any], grid: int | None, executor: Executor | None,
             post_process: str, fit_space: str) -> _Step:
    """Check the input and price the release (no data is read for the noise yet)."""
    if isinstance(mechanism, Plan):
        plan = mechanism if privacy is None else mechanism.with_privacy(privacy)
        return _linear(plan, data, grid, post_process, fit_space)
    mech = get(mechanism, **knobs)
    if mechanism == HIERARCHICAL:
        return _hierarchical(mech, data, privacy)
    if workload is None or privacy is None:
        raise SpecError(f"release: {mechanism} needs a workload and a privacy level")
    if mech.data_dependent:
        return _adaptive(mech, data, workload, privacy, post_process, fit_space)
    mech.check(workload, privacy)
    require(mech.estimate(workload, privacy), mechanism, "run")
    return _linear(plan_on(mech, workload, privacy, executor), data, grid, post_process,
                   fit_space, mechanism_knobs(mech))


def plan_on(mech: Mechanism, workload: Any, privacy: Privacy, executor: Executor | None
            ) -> Plan:
    """``mech``'s plan, made with ``executor`` (None: in this process).

    A mechanism with an ``executor`` knob (QuerySmasher, ResidualPlanner, the HDMM family)
    runs its independent pieces on it; any other one is planned whole as one task there, so
    that its optimisation leaves this process. Either way the plan is the in-process one.
    """
    if executor is None:
        return mech.plan(workload, privacy)
    if "executor" in mech.param:
        mech.executor = executor
        return mech.plan(workload, privacy)
    return map_ordered(executor, _plan_task, [(mech, workload, privacy)])[0]


def _plan_task(task: tuple[Mechanism, Any, Privacy]) -> Plan:
    mech, workload, privacy = task
    return mech.plan(workload, privacy)


def mechanism_knobs(mech: Mechanism) -> dict[str, Any]:
    """A mechanism's constructor knobs as JSON values (param values, ``name`` excluded)."""
    values = mech.param.values()
    return {k: v for k, v in values.items() if k != "name"
            and isinstance(v, int | float | str | bool | type(None) | list | tuple)}


def _linear(plan: Plan, data: Any, grid: int | None, post_process: str, fit_space: str,
            knobs: dict[str, Any] | None = None) -> _Step:
    """A data-independent plan: exact noise on the strategy answers, least squares, tables."""
    workload = plan.workload
    guarantee = None
    if plan.measurer is None:  # the exact sampler's own guarantee
        gridded = plan if grid is None else dataclasses.replace(plan, grid_exponent=grid)
        guarantee = gridded.exact_noise().guarantee
    cost = release_cost(plan.privacy, guarantee)

    def run(rng: np.random.Generator, _progress: Any, _on_round: Any
            ) -> tuple[Any, PublishedTables, dict[str, Any]]:
        measurement = plan.measure(data, rng, grid_exponent=grid)
        estimate = plan.reconstruct(measurement)
        drawn: dict[str, Any] = {}
        if measurement.noise is not None:
            drawn["noise"] = measurement.noise.record()
            # data-independent, so public: the plan's RMSE at the sigma the sampler used
            drawn["expected_rmse"] = plan.rmse() * math.sqrt(measurement.noise.variance_factor)
            drawn["rho_spent"] = measurement.noise.guarantee.get("rho", plan.privacy.zcdp_rho())
        else:
            drawn["noise"] = {"sampler": plan.mechanism, "scale": plan.noise_std(),
                              "exact": False}
            drawn["rho_spent"] = plan.privacy.zcdp_rho()
        return estimate, publishable(plan, measurement, estimate, post_process=post_process,
                                     fit_space=fit_space), drawn

    return _Step(plan.mechanism, knobs or {}, cost, RECORD_UNIT, plan.privacy.to_spec(),
                 {"workload": workload_summary(workload.domain, workload)}, _records(data), run)


def publishable(plan: Plan, measurement: Measurement, estimate: np.ndarray, *,
                post_process: str = "consistent", fit_space: str = "auto") -> PublishedTables:
    """The published tables of a data-independent release (one call site of the
    post-processing, which costs no privacy): one table per workload term in the domain's own
    values, ``estimate`` (whole non-negative counts derived from one non-negative integer
    estimate of the data, so they agree across tables), ``margin_95`` (the 95 % half-width of
    the unbiased estimate, from the plan's per-query variance at the noise actually drawn) and
    ``raw`` (that unbiased least-squares estimate, ``estimate`` here).

    Where the domain is too large to hold one estimate per cell, marginal tables get their
    counts from a fit of the tables themselves (1- and 2-way) or a graphical model (the
    ``pgm`` extra; :func:`~engine.workflows.tables.publishable_tables`); otherwise, or when
    ``post_process`` is ``raw``, the tables carry the raw estimates only and the method says
    why. ``fit_space`` chooses where consistent counts are fitted (``auto``, ``cells``,
    ``marginals`` or ``three-way``).
    """
    factor = 1.0 if measurement.noise is None else float(measurement.noise.variance_factor)
    variance = np.asarray(plan.variances(), float) * factor
    strategy = plan.strategy if plan.measurer is None else None
    return publishable_tables(
        plan.workload, strategy=strategy,
        measurements=measurement.y if strategy is not None else estimate,
        noise_variances=np.square(measurement.noise_std), total=None,
        per_query_variance=variance, post_process=post_process, noise=plan.privacy.noise,
        raw=estimate, raw_column=True, fit_space=fit_space)


def _adaptive(mech: Mechanism, data: Any, workload: Any, privacy: Privacy,
              post_process: str, fit_space: str) -> _Step:
    """AIM+GReM: selection and measurements from the data inside the mechanism's run."""
    cost = release_cost(privacy)

    def run(rng: np.random.Generator, progress: Progress | None,
            on_round: Callable[[Any], None] | None) -> tuple[Any, PublishedTables, dict[str, Any]]:
        result = mech.run(workload, privacy, data, rng, progress=progress, on_round=on_round)
        drawn = {"noise": dict(result.details["noise"]), "rho_spent": result.rho_spent,
                 "ledger": [{"charge": what, "rho": c} for what, c in result.ledger]}
        return result, adaptive_tables(workload, result, post_process=post_process,
                                                fit_space=fit_space), drawn

    return _Step(mech.name, mechanism_knobs(mech), cost, RECORD_UNIT, privacy.to_spec(),
                 {"workload": workload_summary(workload.domain, workload)}, _records(data), run)


def _hierarchical(mech: Mechanism, hierarchy: Any, privacy: Privacy | None) -> _Step:
    """hierarchical-pgsr: per-level noise, then the variant's post-processing."""
    if privacy is None or privacy.noise != "laplace":
        raise NotApplicable("hierarchical-pgsr is pure eps-DP: give a laplace privacy level")
    epsilon = float(privacy.epsilon)
    knobs = {"variant": mech.variant, "split": mech.split, "sampler": mech.noise,
             "level_weights": list(mech.level_weights) or None}
    noise_plan = mech.noise_plan(hierarchy.tree, epsilon)
    exponent = 0 if mech.noise == "geometric" else LAPLACE_GRID_EXPONENT

    def run(rng: np.random.Generator, progress: Progress | None, _on_round: Any
            ) -> tuple[Any, PublishedTables, dict[str, Any]]:
        measurement = mech.measure(hierarchy, epsilon, rng)
        released = mech.postprocess(hierarchy.tree, hierarchy.sizes, hierarchy.total,
                                    measurement, progress)
        drawn = {"noise": {"sampler": "discrete_laplace", "exact": True,
                           "grid_exponent": exponent, "grid_spacing": 2.0**-exponent,
                           "scale_by_level": noise_plan.scales.tolist()},
                 "consistency_violations": int(released.violations)}
        return released, hierarchy_tables(released, measurement), drawn

    describe = {"domain": {"regions_by_level": list(hierarchy.tree.level_sizes),
                           "sizes": hierarchy.sizes.to_spec(),
                           "groups_public": hierarchy.total}}
    return _Step(HIERARCHICAL, knobs, Cost.pure(epsilon), INDIVIDUAL_UNIT,
                 {"noise": "laplace", "epsilon": epsilon}, describe, int(hierarchy.total), run)


def _records(data: Any) -> int:
    """Records of a Dataset (the sum of a data vector)."""
    records = getattr(data, "records", None)
    return int(records) if records is not None else int(round(float(np.sum(data))))
