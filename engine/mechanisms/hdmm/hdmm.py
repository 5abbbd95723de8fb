"""OPT_HDMM: run every applicable operator and keep the strategy with the least expected
error (HDMM section 9; spec section 4.6).

SELECT never touches the data, so it can afford all of them: OPT_0 on the full domain
wherever ``hdmm-opt0`` runs (an explicit n x n Gram, up to 8,192 cells), OPT_kron, OPT_+ and
OPT_M for unions of products. Each operator runs as its own registered mechanism with its
own defaults (``hdmm-opt0``, ``hdmm-kron``, ``hdmm-union``, ``hdmm-marginals``), so ``hdmm``
is exactly the best of them: its RMSE equals the least of theirs on every workload where they
apply. The operators' plans are compared by unit-noise error in the privacy level's norm; the
chosen plan keeps its own measure/reconstruct routines and views; the others' errors are
added as the ``candidates`` table (``plan.view("candidates")``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import param

from engine.analysis.cost_model import Cost, MemoryBudgetError, estimate_model, require, worst
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
        plans: dict[str, Plan] = {}
        for op in self.operators:
            if op in skipped:
                continue
            plans[op] = self.operator(op).plan(workload, privacy, rep.staged(STAGES[op]))
        norm = privacy.norm
        errors = {op: p.unit_tse(norm) for op, p in plans.items()}
        best = min(errors, key=lambda op: errors[op] if math.isfinite(errors[op]) else math.inf)
        chosen = plans[best]
        m = workload.num_queries
        rmse = {op: privacy.sigma() * math.sqrt(e / m) if math.isfinite(e) else math.inf
                for op, e in errors.items()}
        names = {op: str(p.fact("operator")) for op, p in plans.items()}
        views = chosen.views() + choice_views(best, names, errors, rmse, skipped)
        return replace(chosen, mechanism=self.name, shown=views)

    def operator(self, op: str) -> HdmmBase:
        """The registered mechanism that runs operator ``op`` with this mechanism's knobs
        (those left at None take the operator's own defaults)."""
        knobs: dict[str, Any] = {"seed": self.seed, "max_cells": self.max_cells,
                                 "blas_threads": self.blas_threads, "executor": self.executor}
        for knob in ("restarts", "maxiter", "polish_iterations"):
            if getattr(self, knob) is not None:
                knobs[knob] = getattr(self, knob)
        if op == "opt0":
            knobs["max_domain"] = self.opt0_cells
        if op == "marginals":
            knobs["restarts"] = self.marginal_restarts
            knobs.pop("polish_iterations", None)
        return OPERATOR_MECHANISMS[op](**knobs)
