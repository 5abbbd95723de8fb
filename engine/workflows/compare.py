"""Compare mechanisms on one workload and privacy level, against the SVD bound.

Example:
    >>> from engine.scenario import Scenario
    >>> s = Scenario.from_spec({"domain": {"x": 64}, "workload": [{"product": {"x": "prefix"}}],
    ...                         "privacy": {"noise": "laplace", "epsilon": 1}})
    >>> c = compare(s.workload, s.privacy, ["identity", "h2"])
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

from engine.analysis.svd_bound import Bound, svd_bound
from engine.errors import Cancelled, NotApplicable
from engine.executor import SerialExecutor, map_after
from engine.mechanisms import Plan, get, mechanism_class, registry_names
from engine.mechanisms.base import shared_plans
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload


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


def compare(workload: Workload, privacy: Privacy, mechanisms: Iterable[str] | None = None,
            params: Mapping[str, Mapping[str, Any]] | None = None,
            progress: Progress | None = None,
            on_row: Callable[[ComparisonRow], None] | None = None,
            executor: Executor | None = None) -> Comparison:
    """Plan every mechanism on ``workload`` at ``privacy``.

    Args:
        workload: the workload.
        privacy: the privacy level.
        mechanisms: registered names (default: every data-independent one).
        params: optional knobs per mechanism name.
        progress: passed to each mechanism's optimiser when planning in this process;
            cancellation stops the comparison (on an executor: between finished mechanisms,
            and no pending mechanism starts).
        on_row: called with each finished row, in mechanism order (for live displays).
        executor: plans the mechanisms concurrently on any ``concurrent.futures.Executor``
            (e.g. :func:`engine.executor.local_pool` or a Dask client's executor); None plans
            them one after the other in this process. The plans are the same either way.
    """
    names = tuple(mechanisms) if mechanisms is not None else default_mechanisms()
    knobs = {name: dict((params or {}).get(name, {})) for name in names}
    if executor is None or isinstance(executor, SerialExecutor):
        rows = []
        with shared_plans():  # hdmm and its operators' rows share one optimisation each
            for name in names:
                rows.append(_plan_row(name, knobs[name], workload, privacy, progress))
                if on_row is not None:
                    on_row(rows[-1])
        return Comparison(workload, privacy, svd_bound(workload), tuple(rows))
    finished: dict[int, ComparisonRow] = {}
    delivered = 0

    def deliver_in_order(index: int, row: ComparisonRow) -> None:
        nonlocal delivered
        finished[index] = row
        while delivered in finished:
            if on_row is not None:
                on_row(finished[delivered])
            delivered += 1

    # a row that composes others' plans (hdmm: its operators' rows) starts as soon as those
    # rows are done and reuses their plans, as shared_plans does in process: one optimisation
    # each, and no waiting for the unrelated rows
    composes = [set(mechanism_class(name).composes) for name in names]
    needs = [[j for j, other in enumerate(names) if other in composes[i]]
             for i in range(len(names))]

    def make_task(index: int, _: Mapping[int, ComparisonRow]) -> tuple:
        name = names[index]
        return (name, knobs[name], workload, privacy,
                _known_plans(name, names, knobs, finished, workload))

    map_after(executor, _plan_row_task, make_task, needs, deliver_in_order, progress)
    rows = [finished[i] for i in range(len(names))]
    return Comparison(workload, privacy, svd_bound(workload), tuple(rows))


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
    from engine.scenario import Scenario

    s = Scenario.from_spec(spec)
    return compare(s.workload, s.privacy, s.mechanisms or None).to_json()
