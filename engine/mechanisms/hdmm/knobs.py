"""The base of the HDMM mechanisms: the knobs every operator shares."""

from __future__ import annotations

import param

from engine.mechanisms.base import Mechanism, Plan
from engine.mechanisms.hdmm.blas import blas_threads
from engine.mechanisms.hdmm.reconstruct import MAX_CELLS
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload


class HdmmBase(Mechanism):
    """Knobs shared by the HDMM operators (each one is an explicit keyword)."""

    family = "hdmm"

    restarts = param.Integer(default=4, bounds=(1, None), doc=(
        "Random starts of every non-convex optimisation (p-Identity, marginal weights); "
        "the best one is kept. p-Identity runs at most this many: further starts stop once "
        "they exceed a fixed work budget (about eight fit on 256 cells, one from 512 on) "
        "or, past the nearly free problems, once the best two agree within 0.2 %."))
    seed = param.Integer(default=0, doc="Seed of the random starts (plans are reproducible).")
    maxiter = param.Integer(default=300, bounds=(1, None), doc=(
        "Optimiser iterations per start."))
    polish_iterations = param.Integer(default=200, bounds=(0, None), doc=(
        "Most extra iterations refining the best p-Identity start at a tight tolerance (no "
        "more than half of what that start's screening took)."))
    max_cells = param.Integer(default=MAX_CELLS, bounds=(1, None), doc=(
        "Largest data tensor (cells) measured or reconstructed in memory; larger marginals "
        "cannot be stored and only marginal paths run."))
    executor = param.Parameter(default=None, doc=(
        "A concurrent.futures.Executor (engine.executor.local_pool(), a Dask client's "
        "get_executor()) that runs the further p-Identity restarts of OPT_0, OPT_kron and "
        "OPT_+ as one batch and OPT_M's Laplace starts in batches; the plan is the "
        "in-process one (None: in this process)."))
    blas_threads = param.Integer(default=1, bounds=(1, None), allow_None=True, doc=(
        "BLAS threads while optimising (None: leave the setting alone). The optimisers make "
        "thousands of small BLAS calls, which a thread pool slows down, badly so on a busy "
        "machine."))

    def plan(self, workload: Workload, privacy: Privacy, progress: Progress | None = None
             ) -> Plan:
        """Choose the strategy (see :meth:`Mechanism.plan`), with ``blas_threads`` BLAS
        threads."""
        with blas_threads(self.blas_threads):
            return super().plan(workload, privacy, progress)
