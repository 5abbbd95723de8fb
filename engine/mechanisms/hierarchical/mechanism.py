"""The registered ``hierarchical-pgsr`` mechanism: noise step + one post-processor per variant.

Variants (spec §3.0 names):

=========  ===========================================  ==========================
variant    what runs                                    output
=========  ===========================================  ==========================
dp         plain histograms + M_DP                      consistent integers
cdp        cumulative histograms + PAVA/round + M_DP    consistent integers
chain      level-wide prefixes + chain DP (M_CDP*)      consistent integers
relaxed    plain histograms + QP + rounding (M_H^R)     may be inconsistent
topdown    plain histograms + TopDown                   consistent integers
gls        plain histograms + Hay-style GLS             consistent reals
=========  ===========================================  ==========================

Privacy unit: one individual (added to / removed from an existing group). Every variant is
pure eps-DP through its noise step alone (everything after reads only noisy values and the
public n), except the clearly labelled ``chain_noise='paper-not-dp'`` replication setting.
The mechanism is data-dependent, so ``plan()`` refuses: call :meth:`release`.

Example:
    >>> from engine.mechanisms.hierarchical.synthetic import running_example
    >>> out = HierarchicalPGSR(variant="dp").release(running_example(), 1.0)  # OS entropy
    >>> out.is_consistent_integer(), int(out.levels[0].sum())
    (True, 6)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import param

from engine.errors import NotApplicable, SpecError
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.hierarchical.cumulative import (
    CHAIN_SOLVERS,
    build_chain,
    cdp_postprocess,
    chain_postprocess,
    chain_values,
    cumulate,
    level_prefixes,
    prefixes_from_cumulative,
)
from engine.mechanisms.hierarchical.exact_integer_fit import dp_postprocess
from engine.mechanisms.hierarchical.gls import gls_postprocess
from engine.mechanisms.hierarchical.level_noise import (
    NOISE_KINDS,
    SPLITS,
    NoisePlan,
    noise_plan,
)
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, Release, SizeSet
from engine.mechanisms.hierarchical.relaxed import ROUNDINGS, relaxed_postprocess
from engine.mechanisms.hierarchical.topdown import topdown_postprocess
from engine.noise import release_rng
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

VARIANTS = ("dp", "cdp", "chain", "relaxed", "topdown", "gls")
VARIANT_TITLES = {
    "dp": "M_DP (plain, exact DP)",
    "cdp": "M_CDP (cumulative, local fit + DP)",
    "chain": "M_CDP* (chain DP, |R_l| calibration)",
    "relaxed": "M_H^R (relaxed QP + rounding)",
    "topdown": "TopDown",
    "gls": "GLS (Hay-style, linear)",
}
#: variants whose every output is a consistent, valid, faithful integer hierarchy
CONSISTENT_VARIANTS = ("dp", "cdp", "chain", "topdown")
CHAIN_NOISES = ("prefix", "cumulative", "paper-not-dp")
PRIVACY_UNIT = "individual"


@dataclass(frozen=True)
class NoisyMeasurement:
    """What the noise step released (everything post-processing may read).

    Attributes:
        plan: budgets, sensitivities and scales per level.
        values: per level, the noisy ``(regions, buckets)`` plain or cumulative histograms;
            for the chain, the noisy level-wide prefixes ``(buckets, regions)``.
        seconds: time spent drawing the noise.
    """

    plan: NoisePlan
    values: tuple[np.ndarray, ...]
    seconds: float = 0.0


def _measurement_of(variant: str, chain_noise: str) -> str:
    if variant == "cdp" or (variant == "chain" and chain_noise == "cumulative"):
        return "cumulative"
    return "chain" if variant == "chain" else "plain"


@register
class HierarchicalPGSR(Mechanism):
    """Consistent private group-size histograms over a region hierarchy (Fioretto et al.)."""

    name = registered_name("hierarchical-pgsr")
    title: ClassVar[str] = "Hierarchical group sizes (PGSR)"
    family: ClassVar[str] = "hierarchical"
    description: ClassVar[str] = (
        "Noisy group-size histograms for every region of a hierarchy, post-processed into a "
        "consistent non-negative integer release (M_DP, M_CDP, M_CDP*), or the relaxed QP, "
        "TopDown and GLS baselines. Privacy unit: one individual.")
    data_dependent: ClassVar[bool] = True
    noises: ClassVar[tuple[str, ...]] = ("laplace",)

    variant = param.Selector(default="dp", objects=list(VARIANTS),
                             doc="Post-processing: dp, cdp, chain, relaxed, topdown or gls.")
    noise = param.Selector(default="geometric", objects=list(NOISE_KINDS),
                           doc="Integer double-geometric noise or (real) Laplace noise.")
    split = param.Selector(default="uniform", objects=list(SPLITS),
                           doc="Per-level budget split: uniform (eps/L), user (level_weights) "
                               "or inverse-variance (minimum total noise variance).")
    level_weights = param.List(default=[], item_type=(int, float),
                               doc="Budget weights per level (root first) for split='user'.")
    domain_halfwidth = param.Number(default=None, allow_None=True, bounds=(0, None),
                                    doc="DP window half-width in noise standard deviations; "
                                        "None: wide enough for the largest noise draw "
                                        "(about (ln(cells) + 2)/sqrt(2) sd); 0: full [0, n].")
    chain_noise = param.Selector(default="prefix", objects=list(CHAIN_NOISES),
                                 doc="Chain measurement: prefix (level prefixes, Delta=|R_l|), "
                                     "cumulative (per-region cumulative, prefixes formed "
                                     "after), or paper-not-dp (Delta=1: NOT eps-DP).")
    chain_solver = param.Selector(default="auto", objects=list(CHAIN_SOLVERS),
                                  doc="Chain optimum by the Eq. 8 DP, by exact isotonic "
                                      "rounding, or auto (DP when small).")
    rounding = param.Selector(default="half-up", objects=list(ROUNDINGS),
                              doc="Rounding of the relaxed QP solution.")
    qp_solver = param.String(default="CLARABEL", doc="cvxpy solver of the relaxed QP.")
    max_widen = param.Integer(default=3, bounds=(0, 20),
                              doc="How often uncertified DP windows are doubled.")

    # ----- the engine contract ---------------------------------------------------------
    def plan(self, workload: Workload, privacy: Privacy, progress: Progress | None = None
             ) -> Plan:
        """Refuse: the PGSR post-processors are non-linear and data-dependent."""
        raise NotApplicable(
            "hierarchical-pgsr post-processes noisy counts of a region hierarchy (non-linear, "
            "data-dependent): use its release(hierarchy, eps, rng); for a linear comparison "
            "use engine.mechanisms.hierarchical.bridge")

    def run(self, hierarchy: Hierarchy, privacy: Privacy | float,
            rng: np.random.Generator | None = None, progress: Progress | None = None
            ) -> Release:
        """Release ``hierarchy`` at ``privacy`` (a pure-eps Privacy or an eps); the noise comes
        from OS entropy unless ``rng`` is given."""
        if isinstance(privacy, Privacy):
            if privacy.noise != "laplace":
                raise NotApplicable(f"hierarchical-pgsr is pure eps-DP (noise laplace); "
                                    f"{privacy.noise} is not supported")
            privacy = float(privacy.epsilon)
        return self.release(hierarchy, privacy, rng, progress)

    def release(self, hierarchy: Hierarchy, epsilon: float,
                rng: np.random.Generator | None = None, progress: Progress | None = None
                ) -> Release:
        """Noise step then post-processing: the released hierarchy and its report (OS entropy
        unless ``rng`` is given)."""
        measurement = self.measure(hierarchy, epsilon, release_rng() if rng is None else rng)
        return self.postprocess(hierarchy.tree, hierarchy.sizes, hierarchy.total,
                                measurement, progress)

    # ----- the two steps ----------------------------------------------------------------
    def noise_plan(self, tree: RegionTree, epsilon: float) -> NoisePlan:
        """Budgets, sensitivities and scales this configuration uses."""
        measurement = _measurement_of(self.variant, self.chain_noise)
        weights = self.level_weights if self.split == "user" else None
        return noise_plan(tree, epsilon, measurement, self.noise, self.split, weights,
                          paper_chain_scale=(self.variant == "chain"
                                             and self.chain_noise == "paper-not-dp"))

    def measure(self, hierarchy: Hierarchy, epsilon: float, rng: np.random.Generator
                ) -> NoisyMeasurement:
        """The private step: add calibrated noise to what this variant measures."""
        start = time.perf_counter()
        plan = self.noise_plan(hierarchy.tree, epsilon)
        k = hierarchy.sizes.k
        if plan.measurement == "plain":
            exact = list(hierarchy.levels)
        elif plan.measurement == "cumulative":
            exact = [cumulate(a) for a in hierarchy.levels]
        else:  # level-wide prefixes, stored (buckets, regions)
            exact = [p.T for p in level_prefixes(hierarchy.levels)]
        noise = plan.sample(hierarchy.tree, k, rng)
        values = [a + e for a, e in zip(exact, noise, strict=True)]
        if plan.measurement == "chain":
            values = [v.T for v in values]
        return NoisyMeasurement(plan, tuple(values), time.perf_counter() - start)

    def postprocess(self, tree: RegionTree, sizes: SizeSet, total: int,
                    measurement: NoisyMeasurement, progress: Progress | None = None
                    ) -> Release:
        """Turn a noisy measurement into the released hierarchy (uses no privacy budget)."""
        start = time.perf_counter()
        plan = measurement.plan
        values = measurement.values
        k = sizes.k
        variant = self.variant
        facts: dict[str, Any] = {}
        if variant in ("dp", "cdp"):
            weights = plan.weights()
            # M_CDP's repaired counts are differences of two cumulative entries
            spread = math.sqrt(2.0) if variant == "cdp" else 1.0
            hw = self._halfwidths(plan, spread, k * tree.num_regions + 1, total)
            if variant == "dp":
                res = dp_postprocess(tree, values, total, weights, hw, self.max_widen,
                                     progress)
            else:
                cres = cdp_postprocess(tree, values, total, weights, hw, progress)
                res = cres.dp
            levels = res.levels
            facts = {"objective": res.objective, "certified_optimal": res.certified,
                     "widenings": res.widenings,
                     "halfwidths": None if res.halfwidths is None else list(res.halfwidths)}
        elif variant == "chain":
            chain = build_chain(tree, k)
            if plan.measurement == "cumulative":
                prefixes = prefixes_from_cumulative(values)
                var = plan.variances * np.asarray(tree.level_sizes, dtype=float)
            else:
                prefixes = [v for v in values]
                var = plan.variances
            y = chain_values(chain, prefixes)
            w_level = (1.0 / var) / (1.0 / var).max()
            w = w_level[chain.levels]
            hw_level = self._halfwidths_from_sd(np.sqrt(var), chain.length + 1, total)
            hw = None if hw_level is None else np.asarray(hw_level)[chain.levels]
            res = chain_postprocess(tree, k, y, total, w, self.chain_solver, hw,
                                    self.max_widen, progress)
            levels = res.levels
            facts = {"objective": res.objective, "certified_optimal": res.certified,
                     "chain_solver": res.solver, "chain_length": chain.length + 1}
        elif variant == "relaxed":
            rres = relaxed_postprocess(tree, values, total, plan.weights(), self.rounding,
                                       self.qp_solver)
            levels = rres.levels
            facts = {"objective": rres.objective, "sum_multiplier": rres.sum_multiplier,
                     "qp_solver": rres.solver, "rounding": self.rounding}
        elif variant == "topdown":
            levels = topdown_postprocess(tree, values, total, progress).levels
        elif variant == "gls":
            levels = gls_postprocess(tree, values, total, plan.variances).levels
        else:
            raise SpecError(f"variant: unknown {variant!r}; allowed: {', '.join(VARIANTS)}")
        seconds = time.perf_counter() - start
        report: dict[str, Any] = {
            "variant": variant, "title": VARIANT_TITLES[variant], **plan.to_report(),
            "noise_seconds": measurement.seconds, "postprocess_seconds": seconds,
            "seconds": measurement.seconds + seconds, **facts}
        if not plan.eps_dp:
            report["warning"] = ("chain noise calibrated with sensitivity 1 as the paper "
                                 "implies: this release is NOT eps-DP (the level-wide prefix "
                                 "sensitivity is |R_l|)")
        return Release(tree, sizes, tuple(levels), int(total), variant, report)

    # ----- windows ----------------------------------------------------------------------
    def _halfwidths(self, plan: NoisePlan, spread: float, cells: int, total: int
                    ) -> list[int] | None:
        return self._halfwidths_from_sd(spread * np.sqrt(plan.variances), cells, total)

    def _halfwidths_from_sd(self, sd: np.ndarray, cells: int, total: int
                            ) -> list[int] | None:
        """Per-level DP windows in counts (None: the full [0, n])."""
        if self.domain_halfwidth == 0:
            return None
        if self.domain_halfwidth is None:
            # Laplace-like tails: P(|eta| > t sd) ~ exp(-sqrt(2) t), so this many sd make
            # the largest of `cells` draws fall inside with probability about 1 - e^-2
            mult = (math.log(max(cells, 2)) + 2.0) / math.sqrt(2.0)
        else:
            mult = float(self.domain_halfwidth)
        hw = [int(math.ceil(mult * s)) + 1 for s in np.asarray(sd, dtype=float)]
        return None if min(hw) >= total else hw
