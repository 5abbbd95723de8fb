"""Compare mechanisms on one workload and privacy level, against the SVD bound.

:func:`compare` takes a workload, a :class:`~engine.scenario.Scenario` or a scenario spec
mapping (as ``python -m engine compare`` takes a file). The :class:`Comparison` it returns
shows itself in a notebook (``_repr_html_``: the bound first, then the mechanisms best first,
with RMSE and the error in people at 95 %), becomes a table (``to_pandas``) or a HoloViews
picture (``plot``).

Example:
    >>> c = compare({"domain": {"x": 64}, "workload": [{"product": {"x": "prefix"}}],
    ...              "privacy": {"noise": "laplace", "epsilon": 1}},
    ...             mechanisms=["identity", "h2"])
    >>> [(r.mechanism, round(r.rmse, 2)) for r in c.rows]
    [('identity', 8.06), ('h2', 9.42)]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from engine import html_tables as html
from engine.analysis.per_query_error import METHODS, gaussian_half_width, typical_half_width
from engine.analysis.svd_bound import Bound, svd_bound
from engine.errors import Cancelled, NotApplicable
from engine.executor import SerialExecutor, map_after
from engine.mechanisms import Plan, get, mechanism_class, registry_names
from engine.mechanisms.base import shared_plans
from engine.privacy import Privacy
from engine.progress import Progress
from engine.scenario import Scenario
from engine.workloads.workload import Workload

#: The confidence level of the "error in people" columns.
LEVEL = 0.95


@dataclass(frozen=True)
class ComparisonRow:
    """One mechanism's outcome: its plan and RMSE, or why it does not apply."""

    mechanism: str
    title: str
    plan: Plan | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def rmse(self) -> float | None:
        """RMSE at the comparison's privacy level (None when not applicable)."""
        if self.plan is None:
            return None
        r = self.plan.rmse()
        return r if math.isfinite(r) else None


@dataclass(frozen=True, eq=False)
class Comparison:
    """Every mechanism's plan for a workload at a privacy level, with the SVD bound."""

    workload: Workload
    privacy: Privacy
    bound: Bound
    rows: tuple[ComparisonRow, ...] = field(default_factory=tuple)

    @property
    def bound_rmse(self) -> float | None:
        """The SVD lower bound as an RMSE (None where not computable)."""
        return self.bound.rmse(self.workload, self.privacy)

    def with_privacy(self, privacy: Privacy) -> Comparison:
        """Every plan re-calibrated to ``privacy`` (a rescale, never a re-plan)."""
        rows = tuple(ComparisonRow(r.mechanism, r.title,
                                   None if r.plan is None else r.plan.with_privacy(privacy),
                                   r.error, r.seconds) for r in self.rows)
        return Comparison(self.workload, privacy, self.bound, rows)

    def best(self) -> ComparisonRow | None:
        """The applicable mechanism with the lowest RMSE."""
        ok = [r for r in self.rows if r.rmse is not None]
        return min(ok, key=lambda r: r.rmse) if ok else None

    def to_json(self) -> dict[str, Any]:
        """The ``compare --json`` document of CONTRACT.md."""
        p = self.privacy
        doc: dict[str, Any] = {"queries": self.workload.num_queries,
                               "domain_size": self.workload.domain.size, "noise": p.noise}
        if p.noise in ("laplace", "gaussian"):
            doc["epsilon"] = float(p.epsilon)
        if p.noise == "gaussian":
            doc["delta"] = float(p.delta)
        if p.noise == "zcdp":
            doc["rho"] = float(p.rho)
        doc["svd_bound_rmse"] = self.bound_rmse
        results = []
        for r in self.rows:
            item: dict[str, Any] = {"mechanism": r.mechanism, "rmse": r.rmse,
                                    "plan_seconds": round(r.seconds, 6)}
            if r.error is not None:
                item["error"] = r.error
            elif r.rmse is not None and self.bound_rmse:
                item["ratio_to_bound"] = r.rmse / self.bound_rmse
            results.append(item)
        doc["results"] = results
        doc["svd_bound_kind"] = self.bound.kind
        return doc

    def ranked(self) -> tuple[ComparisonRow, ...]:
        """The rows best first (least RMSE); the not applicable ones after, in their order."""
        return tuple(sorted(self.rows, key=lambda r: (r.rmse is None, r.rmse or 0.0)))

    def bound_error(self, level: float = LEVEL) -> float | None:
        """The SVD bound as an error in people at ``level``: the half-width of a query whose
        error has the bound as its standard deviation, taken as Gaussian (1.96 x the bound at
        95 %; None where the bound is not computable)."""
        bound = self.bound_rmse
        return None if bound is None else float(gaussian_half_width(bound, level))

    def to_pandas(self, *, level: float = LEVEL) -> pd.DataFrame:
        """The comparison as a table, best first, one row per mechanism.

        Columns: ``mechanism``, ``title``, ``rmse`` (people), ``error`` (people: a query
        whose error has the RMSE as standard deviation is within +/- this at ``level``; see
        :func:`engine.analysis.per_query_error.typical_half_width`), ``error_method``,
        ``ratio_to_bound`` (RMSE / SVD bound), ``plan_seconds`` and ``note`` (why a
        mechanism does not apply).
        """
        bound = self.bound_rmse
        records = []
        for r in self.ranked():
            error, method = (None, "") if r.plan is None or r.rmse is None else \
                typical_half_width(r.plan, level)
            records.append({"mechanism": r.mechanism, "title": r.title, "rmse": r.rmse,
                            "error": error, "error_method": method,
                            "ratio_to_bound": (r.rmse / bound) if (r.rmse is not None and bound)
                            else None,
                            "plan_seconds": r.seconds, "note": r.error or ""})
        return pd.DataFrame.from_records(records, columns=[
            "mechanism", "title", "rmse", "error", "error_method", "ratio_to_bound",
            "plan_seconds", "note"])

    def sweep(self, epsilons: Iterable[float]) -> pd.DataFrame:
        """RMSE (people) of every applicable mechanism and of the bound at each eps (rho for
        zCDP), a rescale of the plans (no re-planning): one column per mechanism, one row per
        budget, the budgets in the column named after them (``epsilon`` or ``rho``)."""
        key = "rho" if self.privacy.noise == "zcdp" else "epsilon"
        values = [float(v) for v in epsilons]
        table: dict[str, list[float | None]] = {key: values, "SVD bound": []}
        for value in values:
            level = self.with_privacy(self.privacy.with_(**{key: value}))
            table["SVD bound"].append(level.bound_rmse)
            for r in level.ranked():
                if r.rmse is not None:
                    table.setdefault(r.mechanism, []).append(r.rmse)
        return pd.DataFrame(table)

    def plot(self, *, epsilons: Iterable[float] | None = None) -> Any:
        """A HoloViews picture (needs HoloViews): bars of each mechanism's RMSE (people), best
        first, with the SVD bound as a dashed line; with ``epsilons``, log-log curves of RMSE
        against the budget (see :meth:`sweep`)."""
        from engine import plotting  # HoloViews only when a picture is asked for

        if epsilons is not None:
            table = self.sweep(epsilons)
            key = str(table.columns[0])
            return plotting.error_curves({name: list(table[name]) for name in table.columns},
                                         x=key, title=f"RMSE against {key}")
        return plotting.comparison_bars(
            [{"mechanism": r.mechanism, "rmse": r.rmse} for r in self.rows],
            bound=self.bound_rmse, title=f"RMSE per mechanism, {self.privacy.describe()}")

    def __repr__(self) -> str:
        best = self.best()
        return (f"Comparison({self.workload.describe()}, {self.privacy.describe()}, "
                f"{len(self.rows)} mechanisms, best: "
                f"{'none' if best is None else f'{best.mechanism} RMSE {best.rmse:.4g}'}, "
                f"SVD bound: {html.number(self.bound_rmse)})")

    def _repr_html_(self) -> str:
        """The bound first, then the mechanisms best first: RMSE and the error at 95 %."""
        table = self.to_pandas()
        rows: list[tuple[str, ...]] = [(
            "SVD lower bound", html.number(self.bound_rmse),
            f"+/- {html.number(self.bound_error())}" if self.bound_rmse is not None else "n/a",
            "1" if self.bound_rmse is not None else "", self.bound.reason or self.bound.method)]
        methods = set()
        for r in table.itertuples():
            applicable = r.rmse is not None and np.isfinite(r.rmse)
            if applicable:
                methods.add(r.error_method)
            rows.append((r.mechanism, html.number(r.rmse) if applicable else "n/a",
                         f"+/- {html.number(r.error)}" if applicable else "",
                         html.number(r.ratio_to_bound, 3) if applicable
                         and r.ratio_to_bound is not None else "", r.note))
        note = ("error at 95 %: a query whose error has the row's RMSE as its standard "
                "deviation is within +/- this many people with probability 95 % ("
                + "; ".join(METHODS[m] for m in sorted(methods)) + "; the bound's as Gaussian)")
        return html.titled(
            f"Comparison: {self.workload.describe()}, {self.privacy.describe()}",
            html.table(rows, header=("mechanism", "RMSE (people)", "error at 95 % (people)",
                                     "x bound", "note"), bold_first=True), note=note)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per mechanism (for tables and CSV export)."""
        out = []
        bound = self.bound_rmse
        for r in self.rows:
            out.append({"mechanism": r.mechanism, "title": r.title, "rmse": r.rmse,
                        "ratio_to_bound": (r.rmse / bound) if (r.rmse is not None and bound)
                        else None,
                        "plan_seconds": r.seconds, "note": r.error or ""})
        return out


def default_mechanisms() -> tuple[str, ...]:
    """Every registered data-independent mechanism."""
    return tuple(n for n in registry_names() if not mechanism_class(n).data_dependent)


def _plan_row(name: str, knobs: Mapping[str, Any], workload: Workload, privacy: Privacy,
              progress: Progress | None = None) -> ComparisonRow:
    """One mechanism's row: its plan, or why it does not apply (``Cancelled`` propagates)."""
    cls = mechanism_class(name)
    start = time.perf_counter()
    try:
        if cls.data_dependent:
            raise NotApplicable("data-dependent, needs data: run it with python -m engine run "
                                "--data CSV")
        plan = get(name, **dict(knobs)).plan(workload, privacy, progress)
        if not math.isfinite(plan.rmse()):
            return ComparisonRow(name, cls.title or name, None,
                                 "not applicable: the strategy does not support the workload",
                                 plan.plan_seconds)
        return ComparisonRow(name, cls.title or name, plan, None, plan.plan_seconds)
    except Cancelled:
        raise
    except (ValueError, MemoryError) as exc:  # NotApplicable, SpecError, size guards
        msg = str(exc) if str(exc).startswith("not applicable") else f"not applicable: {exc}"
        return ComparisonRow(name, cls.title or name, None, msg, time.perf_counter() - start)


def plan_row(name: str, workload: Workload, privacy: Privacy,
             knobs: Mapping[str, Any] | None = None,
             known: Iterable[tuple[str, Mapping[str, Any], Plan]] = (),
             progress: Progress | None = None) -> ComparisonRow:
    """One mechanism's comparison row, reusing the finished plans of the rows it composes.

    Args:
        name: a registered mechanism.
        workload: the workload (``known`` plans must hold this very object as their workload).
        privacy: the privacy level.
        knobs: the mechanism's knobs (default: none).
        known: ``(mechanism, knobs, plan)`` of rows already planned (e.g. hdmm's operators),
            as :func:`engine.mechanisms.base.shared_plans` takes them.
        progress: passed to the mechanism's optimiser; a cancel raises ``Cancelled``.
    """
    with shared_plans([(get(other, **dict(k)), plan) for other, k, plan in known]):
        return _plan_row(name, knobs or {}, workload, privacy, progress)


def _plan_row_task(args: tuple[str, Mapping[str, Any], Workload, Privacy,
                                tuple[tuple[str, Mapping[str, Any], Plan], ...]]
                   ) -> ComparisonRow:
    """One row on an executor, reusing the plans of ``known`` rows it composes."""
    name, knobs, workload, privacy, known = args
    return plan_row(name, workload, privacy, knobs, known)


def compare(subject: Workload | Scenario | Mapping[str, Any],
            privacy: Privacy | Mapping[str, Any] | None = None,
            mechanisms: Iterable[str] | None = None, *,
            params: Mapping[str, Mapping[str, Any]] | None = None,
            progress: Progress | None = None,
            on_row: Callable[[ComparisonRow], None] | None = None,
            executor: Executor | None = None) -> Comparison:
    """Plan every mechanism on a workload at a privacy level, beside the SVD bound.

    Args:
        subject: the workload, a :class:`~engine.scenario.Scenario`, or a scenario spec
            mapping (``{"domain": ..., "workload": ..., "privacy": ..., "mechanisms": ...}``,
            validated as ``python -m engine compare`` validates a file).
        privacy: the privacy level, or a ``privacy:`` spec mapping (default: the scenario's;
            for a bare workload ``Privacy()``, Gaussian eps = 1, delta = 1e-6).
        mechanisms: registered names (default: the scenario's, else every data-independent
            one).
        params: optional knobs per mechanism name.
        progress: passed to each mechanism's optimiser when planning in this process;
            cancellation stops the comparison (on an executor: between finished mechanisms,
            and no pending mechanism starts).
        on_row: called with each finished row, in mechanism order (for live displays).
        executor: plans the mechanisms concurrently on any ``concurrent.futures.Executor``
            (e.g. :func:`engine.executor.local_pool` or a Dask client's executor); None plans
            them one after the other in this process. The plans are the same either way.
    """
    workload, privacy, mechanisms = _resolve(subject, privacy, mechanisms)
    names = tuple(mechanisms) if mechanisms is not None else default_mechanisms()
    knobs = {name: dict((params or {}).get(name, {})) for name in names}
    finished: dict[int, ComparisonRow] = {}
    delivered = 0

    def deliver_in_order(index: int, row: ComparisonRow) -> None:
        nonlocal delivered
        finished[index] = row
        while delivered in finished:
            if on_row is not None:
                on_row(finished[delivered])
            delivered += 1

    # a row that composes others' plans (hdmm: its operators' rows) is planned after those
    # rows and reuses their plans: one optimisation each (hdmm planned first would run its
    # own, cheaper-capped operators, which the rows could not reuse); rows are still
    # delivered in mechanism order
    composes = [set(mechanism_class(name).composes) for name in names]
    needs = [[j for j, other in enumerate(names) if other in composes[i]]
             for i in range(len(names))]
    if executor is None or isinstance(executor, SerialExecutor):
        with shared_plans():
            for index in sorted(range(len(names)), key=lambda i: bool(needs[i])):
                name = names[index]
                deliver_in_order(index, _plan_row(name, knobs[name], workload, privacy,
                                                  progress))
        rows = [finished[i] for i in range(len(names))]
        return Comparison(workload, privacy, svd_bound(workload), tuple(rows))

    def make_task(index: int, _: Mapping[int, ComparisonRow]) -> tuple:
        name = names[index]
        return (name, knobs[name], workload, privacy,
                _known_plans(name, names, knobs, finished, workload))

    map_after(executor, _plan_row_task, make_task, needs, deliver_in_order, progress)
    rows = [finished[i] for i in range(len(names))]
    return Comparison(workload, privacy, svd_bound(workload), tuple(rows))


def _resolve(subject: Workload | Scenario | Mapping[str, Any],
             privacy: Privacy | Mapping[str, Any] | None, mechanisms: Iterable[str] | None
             ) -> tuple[Workload, Privacy, Iterable[str] | None]:
    """The workload, privacy level and mechanisms that :func:`compare` was asked about."""
    if isinstance(subject, Mapping):
        subject = Scenario.from_spec(subject)
    if isinstance(privacy, Mapping):
        privacy = Privacy.from_spec(dict(privacy))
    if isinstance(subject, Scenario):
        return (subject.workload, subject.privacy if privacy is None else privacy,
                mechanisms if mechanisms is not None else (subject.mechanisms or None))
    if not isinstance(subject, Workload):
        raise TypeError(f"compare: expected a Workload, a Scenario or a spec mapping, got "
                        f"{type(subject).__name__}")
    return subject, Privacy() if privacy is None else privacy, mechanisms


def _known_plans(name: str, names: tuple[str, ...], knobs: Mapping[str, Mapping[str, Any]],
                 finished: Mapping[int, ComparisonRow], workload: Workload
                 ) -> tuple[tuple[str, Mapping[str, Any], Plan], ...]:
    """The finished plans of the rows that ``name`` composes, ``(name, knobs, plan)``, each
    on the comparison's workload object (as shared_plans requires)."""
    composed = set(mechanism_class(name).composes)
    return tuple((names[i], knobs[names[i]], replace(row.plan, workload=workload))
                 for i, row in finished.items()
                 if names[i] in composed and row.plan is not None)


def compare_scenario(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a scenario spec and return its ``compare --json`` document."""
    return compare(spec).to_json()


def plan(subject: Workload | Scenario | Mapping[str, Any], mechanism: str, *,
         privacy: Privacy | Mapping[str, Any] | None = None,
         progress: Progress | None = None, **knobs: Any) -> Plan:
    """Plan one mechanism on a workload (uses no privacy budget: nothing touches data).

    Args:
        subject: the workload, a :class:`~engine.scenario.Scenario` or a scenario spec mapping.
        mechanism: a registered name (see :func:`engine.mechanism_names`).
        privacy: the privacy level or a ``privacy:`` spec mapping (default: the scenario's,
            for a bare workload ``Privacy()``). The plan's error at another level is a
            rescale: ``plan.rmse(other)``.
        progress: passed to the mechanism's optimiser (cancel raises ``Cancelled``).
        **knobs: the mechanism's keyword knobs (e.g. ``restarts=5`` for hdmm).

    Raises:
        SpecError: an unknown mechanism or knob (one line, with "did you mean").
        NotApplicable: the mechanism cannot serve this workload or noise.
    """
    workload, level, _ = _resolve(subject, privacy, None)
    return get(mechanism, **knobs).plan(workload, level, progress)
