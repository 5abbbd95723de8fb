"""OPT_HDMM: run the applicable operators and keep the strategy with the least expected
error (HDMM section 9; spec section 4.6), stopping where no further operator can pay for
itself.

The operators are OPT_0 on the full domain wherever ``hdmm-opt0`` runs (an explicit n x n
Gram, up to 8,192 cells), OPT_kron, OPT_+ and OPT_M for unions of products. Each runs as its
own registered mechanism with its own defaults (``hdmm-opt0``, ``hdmm-kron``, ``hdmm-union``,
``hdmm-marginals``); their plans are compared by unit-noise error in the privacy level's
norm, the chosen plan keeps its own measure/reconstruct routines and views, and every
operator's error (or why it did not run) is added as the ``candidates`` and ``skipped``
tables.

They run cheapest first (:data:`ORDER`: the per-attribute OPT_kron, which on one attribute
is OPT_0 itself, then OPT_+, OPT_M, and OPT_0 on the whole domain, whose evaluations cost
O(p n**2)), and each further one is skipped when it cannot pay for itself:

* **the bound**: no strategy has less error than a lower bound ``L``, so no operator can
  beat the best so far by more than ``best / L - 1``; at most ``STOP_RTOL`` ends the search.
  ``L`` is the SVD bound, and for one product under Gaussian noise the product of OPT_kron's
  certified per-attribute dual bounds (the convex problem separates over the attributes, so
  the Kronecker product of the per-attribute optima is the optimum over every strategy);
* **the cost model**: under Laplace noise the bound (an L2 bound) is loose by the ratio of
  L1 to L2 sensitivities, so cost decides. OPT_M's Laplace starts stop once they have used
  ``max_cost_ratio`` times the objective evaluations of the operators run before; under Laplace
  noise OPT_0 on several attributes is skipped when the cost model puts it over
  ``OPT0_FREE_WORK`` and over
  ``max_cost_ratio`` times the operators run before (on R128 x P32 it was 1,000 times
  OPT_kron's CPU for a 0.001 % lower error).

With ``max_cost_ratio=None`` every applicable operator runs: ``hdmm`` is then exactly the
best of them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import param

from engine.analysis.cost_model import Cost, MemoryBudgetError, estimate_model, require, worst
from engine.analysis.svd_bound import svd_bound
from engine.errors import NotApplicable
from engine.mechanisms.base import Plan, register, registered_name
from engine.mechanisms.hdmm.display import choice_views
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.kron import KronMechanism, check_attributes
from engine.mechanisms.hdmm.opt0_mechanism import MAX_CELLS, Opt0Mechanism, check_explicit
from engine.mechanisms.hdmm.opt_marginals import MarginalsMechanism, check_marginals
from engine.mechanisms.hdmm.tracking import reporter
from engine.mechanisms.hdmm.union import UnionMechanism, check_groups
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

OPERATORS = ("opt0", "kron", "union", "marginals")
#: The order the operators run in, cheapest first (on one attribute OPT_0 is the
#: per-attribute operator and runs first).
ORDER = ("kron", "union", "marginals", "opt0")
#: A best error within this relative distance of a lower bound ends the search.
STOP_RTOL = 1e-6
#: OPT_0's cost-model work under which it always runs: 100 n**3 at n = 1,024 (about a
#: second of CPU).
OPT0_FREE_WORK = 100.0 * 1024**3
#: Largest domain on which a union's SVD bound (possibly an explicit eigendecomposition) is
#: computed to decide whether to stop.
BOUND_CELLS = 1024
#: the registered mechanism that runs each operator
OPERATOR_MECHANISMS: dict[str, type[HdmmBase]] = {
    "opt0": Opt0Mechanism, "kron": KronMechanism, "union": UnionMechanism,
    "marginals": MarginalsMechanism}
#: progress labels of the operators
STAGES = {"opt0": "OPT_0", "kron": "OPT_kron", "union": "OPT_+", "marginals": "OPT_M"}


@register
class HdmmMechanism(HdmmBase):
    """HDMM: the best of OPT_0, OPT_kron, OPT_+ and OPT_M by expected error."""

    name = registered_name("hdmm")
    composes = tuple(cls.name for cls in OPERATOR_MECHANISMS.values())
    title = "HDMM"
    description = ("the High-Dimensional Matrix Mechanism: tries every strategy family it can "
                   "optimise for the workload and keeps the one with the least expected error")
    operators = param.ListSelector(default=list(OPERATORS), objects=list(OPERATORS), doc=(
        "Operators to try (those that cannot serve the workload are skipped)."))
    restarts = param.Integer(default=None, bounds=(1, None), allow_None=True, doc=(
        "Random starts of every non-convex optimisation except OPT_M's (None: each "
        "operator's own default)."))
    maxiter = param.Integer(default=None, bounds=(1, None), allow_None=True, doc=(
        "L-BFGS-B iterations per start (None: each operator's own default)."))
    polish_iterations = param.Integer(default=None, bounds=(0, None), allow_None=True, doc=(
        "Extra iterations refining the best p-Identity start (None: each operator's own "
        "default)."))
    opt0_cells = param.Integer(default=MAX_CELLS, bounds=(1, None), doc=(
        "Largest domain on which OPT_0 runs on the explicit n x n Gram (the default is "
        "hdmm-opt0's own limit, so hdmm is the best of its operators wherever hdmm-opt0 "
        "runs; Laplace restarts take about a minute at 1,400 cells)."))
    marginal_restarts = param.Integer(default=10, bounds=(1, None), doc=(
        "Random starts of the Laplace marginal-weight optimisation."))
    max_cost_ratio = param.Number(default=1.0, bounds=(0, None), allow_None=True, doc=(
        "An operator after the first runs only while it costs at most this many times the "
        "operators run before it (OPT_M's Laplace starts: objective evaluations; OPT_0 on "
        "several attributes: the cost model's work, when over about a second). None: every "
        "applicable operator runs."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        reasons = self._skipped(workload, privacy)
        if len(reasons) == len(self.operators):
            raise NotApplicable("hdmm: no operator applies: " + "; ".join(reasons.values()))

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """The worst of the operators that will run (each is planned, the best is kept);
        operators over the memory budget are skipped, not run."""
        skipped = self._skipped(workload, privacy)
        return worst([self.operator(op).estimate(workload, privacy) for op in self.operators
                      if op not in skipped] or [estimate_model("domain", workload)])

    def _skipped(self, workload: Workload, privacy: Privacy) -> dict[str, str]:
        out = {}
        for op in self.operators:
            try:
                if op == "opt0":
                    check_explicit(workload, self.opt0_cells, "OPT_0")
                elif op in ("kron", "union"):
                    check_attributes(workload, "OPT_kron" if op == "kron" else "OPT_+")
                    if op == "union":
                        check_groups(workload, "product", "OPT_+")
                else:
                    check_marginals(workload, "OPT_M")
                require(self.operator(op).estimate(workload, privacy), STAGES[op])
            except (NotApplicable, MemoryBudgetError) as exc:
                out[op] = str(exc)
        return out

    def _redundant(self, workload: Workload, skipped: dict[str, str]) -> dict[str, str]:
        """Operators that would solve exactly the problem of another one that runs."""
        runs = [op for op in self.operators if op not in skipped]
        out = {}
        if "opt0" in runs and len(workload.domain) == 1:
            out.update({op: "one attribute: the same problem as OPT_0" for op in runs
                        if op in ("kron", "union")})
        elif "kron" in runs and "union" in runs and len(workload.terms) == 1:
            out["union"] = "one product: OPT_+ is OPT_kron"
        return out

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        skipped = self._skipped(workload, privacy)
        skipped.update(self._redundant(workload, skipped))
        rep = reporter(progress, "OPT_HDMM")
        order = ("opt0", *ORDER[:-1]) if len(workload.domain) == 1 else ORDER
        plans: dict[str, Plan] = {}
        spent = 0  # objective evaluations of the operators run
        bound: float | None = None
        for op in [op for op in order if op in self.operators and op not in skipped]:
            knobs: dict[str, Any] = {}
            made = self.operator(op).shared_plan(workload, privacy)
            if made is not None:  # its own row made it already: free, whatever the rules say
                plans[op] = made
                continue
            if plans:
                best = min(p.unit_tse(privacy.norm) for p in plans.values())
                if bound is None:
                    bound = self._lower_bound(workload, privacy, plans)
                if bound > 0.0 and best <= bound * (1.0 + STOP_RTOL):
                    skipped[op] = (f"cannot beat the best so far by more than best / bound - 1 "
                                   f"= {max(best / bound - 1.0, 0.0):.1e}")
                    continue
                why = self._too_dear(op, workload, privacy, plans)
                if why:
                    skipped[op] = why
                    continue
                if (op == "marginals" and privacy.norm == 1
                        and self.max_cost_ratio is not None):
                    knobs["max_evaluations"] = max(1, math.ceil(self.max_cost_ratio * spent))
            before = rep.iteration
            plans[op] = self.operator(op, **knobs).plan(workload, privacy,
                                                        rep.staged(STAGES[op]))
            spent += rep.iteration - before
        norm = privacy.norm
        errors = {op: p.unit_tse(norm) for op, p in plans.items()}
        best_op = min(errors,
                      key=lambda op: errors[op] if math.isfinite(errors[op]) else math.inf)
        chosen = plans[best_op]
        m = workload.num_queries
        rmse = {op: privacy.sigma() * math.sqrt(e / m) if math.isfinite(e) else math.inf
                for op, e in errors.items()}
        names = {op: str(p.fact("operator")) for op, p in plans.items()}
        views = chosen.views() + choice_views(best_op, names, errors, rmse, skipped)
        return replace(chosen, mechanism=self.name, shown=views)

    def _lower_bound(self, workload: Workload, privacy: Privacy, plans: dict[str, Plan]
                     ) -> float:
        """A lower bound on every strategy's unit-noise error (0 when none is known): the
        SVD bound where it is cheap (one product: closed forms per attribute; up to
        ``BOUND_CELLS`` cells), and for one product under Gaussian noise OPT_kron's
        certificate."""
        cheap = len(workload.terms) == 1 or workload.domain.size <= BOUND_CELLS
        value = (svd_bound(workload).value or 0.0) if cheap else 0.0
        kron = plans.get("kron")
        if kron is not None and privacy.norm == 2 and len(workload.terms) == 1:
            # OPT_kron's error is the product of its per-attribute errors (each on its
            # scaled Gram); each certified dual bound scales it down to a bound
            facts = kron.facts()
            certificate = kron.unit_tse(2)
            for name in workload.domain.names:
                loss = float(facts.get(f"loss[{name}]", 0.0))
                lower = float(facts.get(f"lower_bound[{name}]", loss))
                certificate *= lower / loss if loss > 0.0 else 0.0
            value = max(value, certificate)
        return float(value)

    def _too_dear(self, op: str, workload: Workload, privacy: Privacy,
                  plans: dict[str, Plan]) -> str:
        """Why OPT_0 on several attributes cannot pay for itself ('' when it can).

        Only under Laplace noise: there the (L2) bound is too loose to decide, so cost does.
        Under Gaussian noise the bound decides alone: on the analyst's 1,400-cell union OPT_0
        is 13 % better than the best of the other operators (7.71 against 8.85), which a cost
        rule skipped."""
        if (op != "opt0" or self.max_cost_ratio is None or len(workload.domain) == 1
                or privacy.norm != 1):
            return ""
        work = self.operator(op).estimate(workload, privacy).plan_operations
        before = sum(self.operator(o).estimate(workload, privacy).plan_operations
                     for o in plans)
        if work <= OPT0_FREE_WORK or work <= self.max_cost_ratio * before:
            return ""
        return (f"the cost model puts OPT_0 at {work / max(before, 1.0):,.0f} times the work "
                f"of the operators run (limit {self.max_cost_ratio:g}), and under "
                f"{'Laplace' if privacy.norm == 1 else 'this'} noise the bound cannot show a "
                "gain worth it")

    def operator(self, op: str, **extra: Any) -> HdmmBase:
        """The registered mechanism that runs operator ``op`` with this mechanism's knobs
        (those left at None take the operator's own defaults) and ``extra`` ones."""
        knobs: dict[str, Any] = {"seed": self.seed, "max_cells": self.max_cells,
                                 "blas_threads": self.blas_threads, "executor": self.executor,
                                 **extra}
        for knob in ("restarts", "maxiter", "polish_iterations"):
            if getattr(self, knob) is not None:
                knobs[knob] = getattr(self, knob)
        if op == "opt0":
            knobs["max_domain"] = self.opt0_cells
        if op == "marginals":
            knobs["restarts"] = self.marginal_restarts
            knobs.pop("polish_iterations", None)
        return OPERATOR_MECHANISMS[op](**knobs)
