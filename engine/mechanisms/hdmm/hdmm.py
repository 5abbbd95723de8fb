"""OPT_HDMM: run every applicable operator and keep the strategy with the least expected
error (HDMM section 9; spec section 4.6).

SELECT never touches the data, so it can afford all of them: OPT_0 on the full domain when
it is small (an explicit n x n Gram), OPT_kron, OPT_+ and OPT_M for unions of products. The
operators' plans are compared by unit-noise error in the privacy level's norm; the chosen
plan keeps its own measure/reconstruct routines and views; the others' errors are added as
the ``candidates`` table (``plan.view("candidates")``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import param

from engine.cost import Cost, estimate_model, worst
from engine.errors import NotApplicable
from engine.mechanisms.base import Plan, register, registered_name
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.kron import check_attributes, kron_plan, opt_kron
from engine.mechanisms.hdmm.marginals import check_marginals, marginals_plan, opt_marginals
from engine.mechanisms.hdmm.opt0 import check_explicit, explicit_plan
from engine.mechanisms.hdmm.plan_views import choice_views
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter, reporter
from engine.mechanisms.hdmm.union import check_groups, groups_of, opt_union, union_plan
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

OPERATORS = ("opt0", "kron", "union", "marginals")


@register
class HdmmMechanism(HdmmBase):
    """HDMM: the best of OPT_0, OPT_kron, OPT_+ and OPT_M by expected error."""

    name = registered_name("hdmm")
    title = "HDMM"
    description = ("the High-Dimensional Matrix Mechanism: tries every strategy family it can "
                   "optimise for the workload and keeps the one with the least expected error")
    operators = param.ListSelector(default=list(OPERATORS), objects=list(OPERATORS), doc=(
        "Operators to try (those that cannot serve the workload are skipped)."))
    opt0_cells = param.Integer(default=1024, bounds=(1, None), doc=(
        "Largest domain on which OPT_0 runs on the explicit n x n Gram (it scales to 8192, "
        "but its Laplace restarts take minutes there; hdmm-opt0 alone goes that far)."))
    marginal_restarts = param.Integer(default=10, bounds=(1, None), doc=(
        "Random starts of the Laplace marginal-weight optimisation."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        reasons = self._skipped(workload, privacy)
        if len(reasons) == len(self.operators):
            raise NotApplicable("hdmm: no operator applies: " + "; ".join(reasons.values()))

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """The worst of the operators that will run (each is planned, the best is kept)."""
        models = {"opt0": "dense", "kron": "factors", "union": "factors",
                  "marginals": "marginals"}
        skipped = self._skipped(workload, privacy)
        return worst([estimate_model(models[op], workload) for op in self.operators
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
            except NotApplicable as exc:
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
        union = ProductUnion.of(workload) if workload.is_product_union else None
        plans: dict[str, Plan] = {}
        for op in self.operators:
            if op in skipped:
                continue
            plans[op] = self._operator(op, workload, privacy, union, rep)
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

    def _operator(self, op: str, workload: Workload, privacy: Privacy,
                  union: ProductUnion | None, rep: Reporter) -> Plan:
        norm = privacy.norm
        common = {"restarts": self.restarts, "seed": self.seed, "maxiter": self.maxiter,
                  "polish_iterations": self.polish_iterations}
        if op == "opt0":
            return explicit_plan(self.name, workload, privacy, union,
                                 progress=rep.staged("OPT_0"), **common)
        assert union is not None
        if op == "kron":
            result = opt_kron(union, norm, progress=rep.staged("OPT_kron"), **common)
            return kron_plan(self.name, workload, privacy, union, result, self.max_cells)
        if op == "union":
            result = opt_union(union, norm, groups_of(workload, "product"),
                               progress=rep.staged("OPT_+"), **common)
            return union_plan(self.name, workload, privacy, union, result, self.max_cells)
        result = opt_marginals(union.marginal_weights, workload.domain.shape, norm,
                               restarts=self.marginal_restarts, seed=self.seed,
                               progress=rep.staged("OPT_M"))
        return marginals_plan(self.name, workload, privacy, union, result, self.max_cells)

