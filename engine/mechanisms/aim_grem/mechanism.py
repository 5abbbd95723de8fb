"""The registered ``aim-grem`` mechanism: AIM+GReM run end to end on data.

AIM+GReM is data-dependent: it has no plan (``plan()`` raises NotApplicable) and is used through
``run(workload, privacy, data, rng)``, which returns an :class:`AdaptiveResult`. It answers
marginal workloads (all k-way marginals, or explicit attribute sets) and accepts Gaussian
(eps, delta) privacy, converted to rho-zCDP by the Canonne-Kamath-Steinke bound, or rho-zCDP
directly.

Example:
    >>> from engine.data import Dataset
    >>> from engine.domain import Domain
    >>> from engine.privacy import Privacy
    >>> from engine.workloads import Workload
    >>> d = Domain.from_sizes([2, 3, 2])
    >>> data = Dataset.synthetic(d, 500, rng=0, correlation=0.5)
    >>> result = AIMGReM().run(Workload.marginals(d, k=2), Privacy(noise="zcdp", rho=1.0), data)
    >>> abs(result.rho_spent - 1.0) < 1e-12
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import param

from engine.domain import Domain
from engine.errors import NotApplicable, SpecError
from engine.linalg.residuals import AttrSet
from engine.mechanisms.aim_grem.aim import MEASUREMENTS, RoundCallback, aim_grem
from engine.mechanisms.aim_grem.baseline import residual_planner
from engine.mechanisms.aim_grem.crp import ETA
from engine.mechanisms.aim_grem.grem import UPDATES
from engine.mechanisms.aim_grem.result import AdaptiveResult
from engine.mechanisms.base import Mechanism, register, registered_name
from engine.noise import release_rng
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.blocks import IdentityBlock
from engine.workloads.workload import Workload


def marginal_sets(workload: Workload) -> tuple[tuple[AttrSet, ...], tuple[float, ...]]:
    """The attribute sets and weights of a marginal workload.

    Raises:
        NotApplicable: a term that is not a plain marginal (prefix, range, pair or random
            queries), naming the term.
    """
    for term in workload.terms:
        factors = term.factors
        if factors is None or not all(isinstance(f, IdentityBlock) for f in factors):
            raise NotApplicable(f"aim-grem answers marginal workloads only (all k-way marginals "
                                f"or explicit attribute sets); term {term.label!r} is not a "
                                "marginal")
    return (tuple(term.attrs for term in workload.terms),
            tuple(float(term.weight) for term in workload.terms))


def zcdp_budget(privacy: Privacy) -> float:
    """rho of a Gaussian (eps, delta) level (Canonne-Kamath-Steinke) or of a zCDP level.

    Raises:
        NotApplicable: Laplace (pure eps-DP) levels: the mechanism's guarantee is zCDP.
    """
    if privacy.noise == "laplace":
        raise NotApplicable("aim-grem gives rho-zCDP / (eps, delta)-DP, not pure eps-DP: "
                            "choose gaussian or zcdp noise")
    return float(privacy.zcdp_rho())


def marginal_counter(data: Any, domain: Domain) -> Callable[[AttrSet], np.ndarray]:
    """``axes -> true marginal`` counted from a Dataset over ``domain`` (never the full
    data vector).

    Raises:
        SpecError: the data's domain differs from the workload's.
    """
    if not hasattr(data, "marginal") or not hasattr(data, "domain"):
        raise SpecError("data: expected an engine.data.Dataset (records over a public domain)")
    if tuple(data.domain.names) != tuple(domain.names) or data.domain.shape != domain.shape:
        given = dict(zip(data.domain.names, data.domain.shape, strict=False))
        wanted = dict(zip(domain.names, domain.shape, strict=True))
        raise SpecError(f"data: its domain {given} differs from the workload's {wanted}")
    names = domain.names
    return lambda axes: np.asarray(data.marginal([names[i] for i in axes]))


@register
class AIMGReM(Mechanism):
    """AIM with GReM-MLE reconstruction, lazy updates and Conditional ResidualPlanner."""

    name = registered_name("aim-grem")
    title = "AIM+GReM"
    family = "adaptive"
    description = ("Adaptive, data-dependent marginal release (Fuentes, Mullins et al.): AIM's "
                   "select-measure loop with residual measurements allocated by Conditional "
                   "ResidualPlanner and GReM-MLE reconstruction with lazy updates.")
    data_dependent = True
    noises = ("gaussian", "zcdp")

    measurement = param.Selector(default="crp", objects=list(MEASUREMENTS),
                                 doc="Per-round noise: crp (Conditional ResidualPlanner) or iid "
                                     "(isotropic noise on the selected marginal).")
    update = param.Selector(default="lazy", objects=list(UPDATES),
                            doc="GReM-MLE updates: lazy (only supersets of a changed residual) "
                                "or full (rebuild every marginal each round).")
    eta = param.Number(default=ETA, bounds=(0, 1), doc="CRP skip threshold on a residual's "
                                                       "budget share.")
    include_empty_in_k = param.Boolean(default=True, doc="Count the empty set in K = |W down| "
                                                         "(the paper) or not (AIM's code).")
    max_rounds = param.Integer(default=None, bounds=(1, None), allow_None=True,
                               doc="Optional rounds cap (not in the paper): the budget is "
                                   "spread over about this many rounds and the last one spends "
                                   "the remainder.")

    def check(self, workload: Workload, privacy: Privacy) -> None:
        """Refuse non-marginal workloads and Laplace noise (NotApplicable)."""
        super().check(workload, privacy)
        marginal_sets(workload)

    def run(self, workload: Workload, privacy: Privacy, data: Any,
            rng: np.random.Generator | None = None, progress: Progress | None = None,
            on_round: RoundCallback | None = None) -> AdaptiveResult:
        """Release every workload marginal from ``data`` at ``privacy``.

        Args:
            workload: a marginal workload over the data's domain.
            privacy: gaussian (eps, delta) or zcdp rho.
            data: an ``engine.data.Dataset`` over the workload's domain.
            rng: the generator of the selection and the measurements; None (the default,
                for a release) seeds one from the operating system's entropy.
            progress: reported once per round; ``progress.cancel()`` stops the run
                (``engine.errors.Cancelled``).
            on_round: called with every round's record (for live charts).

        Returns:
            The raw estimates, per-round log, ledger (summing to rho) and timing.
        """
        self.check(workload, privacy)
        sets, weights = marginal_sets(workload)
        rho = zcdp_budget(privacy)
        counter = marginal_counter(data, workload.domain)
        rng = release_rng() if rng is None else rng
        result = aim_grem(workload.domain, sets, counter, rho, rng, weights=weights,
                          measurement=self.measurement, update=self.update, eta=self.eta,
                          include_empty_in_K=self.include_empty_in_k,
                          max_rounds=self.max_rounds, progress=progress, on_round=on_round,
                          mechanism=self.name)
        return replace(result, privacy=privacy)


def run_residual_planner(workload: Workload, privacy: Privacy, data: Any,
                         rng: np.random.Generator | None = None, progress: Progress | None = None
                         ) -> AdaptiveResult:
    """The batch ResidualPlanner baseline (spec 6.7) on the same data and budget."""
    sets, weights = marginal_sets(workload)
    rho = zcdp_budget(privacy)
    counter = marginal_counter(data, workload.domain)
    rng = release_rng() if rng is None else rng
    result = residual_planner(workload.domain, sets, counter, rho, rng, weights=weights,
                              progress=progress)
    return replace(result, privacy=privacy)
