"""The residual family's registered mechanisms: QuerySmasher (He et al. 2026) as
``querysmasher`` and ResidualPlanner (Xiao et al. 2023) as ``residual-planner``.

QuerySmasher is a divide-and-conquer matrix mechanism.

Every query is split into orthogonal residual sub-queries (``decomposition``), each residual's
sub-workload gets its own unit-cost Gaussian mechanism from the chosen sub-solver
(``subsolvers``), and the pieces are stitched together with the optimal noise split
(``assemble``). The sub-solver selects the family member:

* ``optimal`` (default): QuerySmasher proper; provably no worse in weighted total squared
  error than any splittable, residual-respecting mechanism (RP, RP+, WFF).
* ``residual``: ResidualPlanner (also registered on its own as ``residual-planner``).
* ``kron_basis``: ResidualPlanner+ with per-attribute bases.
* ``fourier``: Weighted Fourier Factorizations.

The objective is the weighted sum of variances; ``objective="max"`` (ResidualPlanner's
max-variance program) is only defined for the ``residual`` sub-solver (spec 1.6: QuerySmasher
as published optimises sums only) and is planned by ``planner.residual_plan``, as is
ResidualPlanner itself. QuerySmasher is defined first so that it registers first.
"""

from __future__ import annotations

import time

import param

from engine.errors import NotApplicable
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.residual.assemble import Assembly, assembly_plan, timings_table
from engine.mechanisms.residual.decomposition import decompose
from engine.mechanisms.residual.planner import residual_plan
from engine.mechanisms.residual.subsolvers import (
    SUB_SOLVERS,
    make_solver,
    solve_residuals,
)
from engine.mechanisms.views import Fact
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Why a residual mechanism refuses Laplace noise ({name}: the registered mechanism name).
GAUSSIAN_ONLY = ("{name}: privacy cost is a squared L2 sensitivity of correlated Gaussian "
                 "mechanisms (the noise split and the optimality results are for Gaussian "
                 "noise); there is no Laplace calibration. Use gaussian or zcdp noise")


@register
class QuerySmasher(Mechanism):
    """Residual sub-workloads solved independently, then assembled."""

    name = registered_name("querysmasher")
    cost_model = "residuals"
    title = "QuerySmasher"
    family = "residual"
    description = ("splits every query into orthogonal residual pieces, solves each piece's "
                   "small matrix-mechanism problem (optimally, or as RP / RP+ / WFF), and "
                   "stitches the answers back together; scales with the marginals, not the "
                   "domain")
    noises = ("gaussian", "zcdp")

    sub_solver = param.Selector(default="optimal", objects=list(SUB_SOLVERS),
                                doc="Per-residual strategy: optimal (QuerySmasher), residual "
                                    "(ResidualPlanner), kron_basis (RP+), fourier (WFF).")
    objective = param.Selector(default="sum", objects=["sum", "max"],
                               doc="Weighted sum of variances, or the maximum variance "
                                   "(residual sub-solver only).")
    tol = param.Number(default=1e-10, bounds=(0.0, 1e-2), inclusive_bounds=(False, True),
                       doc="Certified relative optimality gap of the optimal sub-solver.")
    max_iter = param.Integer(default=20_000, bounds=(1, None),
                             doc="Iteration cap of one optimal sub-problem.")
    dense_limit = param.Integer(default=4096, bounds=(1, None),
                                doc="Largest residual without Kronecker structure (cells) the "
                                    "optimal sub-solver solves as an explicit SDP.")
    workers = param.Integer(default=None, allow_None=True, bounds=(0, None),
                            doc="Processes for independent sub-problems (None: automatic, "
                                "0 or 1: serial).")
    executor = param.Parameter(default=None, doc="A concurrent.futures.Executor for the "
                                                 "sub-problems, e.g. engine.executor."
                                                 "local_pool() or a Dask client's "
                                                 "get_executor() (overrides workers).")

    def check(self, workload: Workload, privacy: Privacy) -> None:
        if privacy.noise not in self.noises:
            raise NotApplicable(GAUSSIAN_ONLY.format(name=self.name))
        if self.objective == "max" and self.sub_solver != "residual":
            raise NotApplicable(f"{self.name}: the max-variance objective is defined for the "
                                "residual sub-solver (ResidualPlanner) only; QuerySmasher's "
                                "sub-solvers and dominance result are for weighted sums of "
                                "variances")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        if self.objective == "max":
            return residual_plan(self.name, workload, privacy, "max", progress=progress)
        start = time.perf_counter()
        decomposition = decompose(workload, progress)
        solver = make_solver(self.sub_solver, workload, self.tol, self.max_iter,
                             self.dense_limit)
        solved = solve_residuals(decomposition, solver, self.executor, self.workers,
                                 progress, workload.domain.names)
        assemble_start = time.perf_counter()
        assembly = Assembly.from_losses(workload.domain, list(solved.residuals.values()))
        timings = {"decompose": decomposition.seconds, "solve": solved.seconds,
                   "assemble": time.perf_counter() - assemble_start,
                   "total": time.perf_counter() - start}
        settings = (Fact("sub_solver", "sub-solver", self.sub_solver),
                    Fact("objective", "objective (sum or max of variances)", "sum"),
                    Fact("distinct_subproblems", "distinct sub-problems solved",
                         solved.distinct))
        return assembly_plan(self.name, workload, privacy, assembly, settings,
                             (timings_table(timings),))


@register
class ResidualPlanner(Mechanism):
    """Optimal Gaussian mechanism for marginals through residual measurements."""

    name = registered_name("residual-planner")
    cost_model = "residuals"
    title = "ResidualPlanner"
    family = "residual"
    description = ("one subtraction-basis measurement per attribute subset, noise split in "
                   "closed form (sum of variances) or by a convex program (max variance); "
                   "optimal for marginals, scales to huge domains")
    noises = ("gaussian", "zcdp")

    objective = param.Selector(default="sum", objects=["sum", "max"],
                               doc="Minimise the weighted sum of variances, or the maximum "
                                   "weighted query variance.")
    max_profiles = param.Integer(default=20_000, bounds=(1, None),
                                 doc="Cap on distinct query variance profiles in the "
                                     "max-variance program.")

    def check(self, workload: Workload, privacy: Privacy) -> None:
        if privacy.noise not in self.noises:
            raise NotApplicable(GAUSSIAN_ONLY.format(name=self.name))

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        return residual_plan(self.name, workload, privacy, self.objective, self.max_profiles,
                             progress)
