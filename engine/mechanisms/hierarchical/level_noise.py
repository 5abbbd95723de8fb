"""Noise for the PGSR mechanisms: double-geometric / Laplace samplers, sensitivities, budget split.

Both kinds are exact integer noise (:func:`engine.noise.discrete_laplace`): ``geometric`` on
the integers, ``laplace`` on the grid of spacing ``2**-LAPLACE_GRID_EXPONENT`` (the counts are
integers, hence on the grid, and a record moves them by whole units, so the sensitivity and
eps are those of the continuous Laplace at the same scale; its variance is below ``2 lambda**2``
by a relative ``(g / lambda)**2 / 12``, and the plans keep ``2 lambda**2``).

Privacy unit: one *individual* is added to or removed from an existing group (the group
moves to the adjacent size bucket; n is unchanged). Per level of the tree the L1 change is

* ``plain``: 2 for the per-region histograms (Lemma 4);
* ``cumulative``: 1 for the per-region cumulative histograms (Lemma 6);
* ``chain``: ``|R_l|`` for the level-wide post-order prefix sums of M_CDP* (spec §3.7.3: the
  paper's implied scale L/eps is *not* eps-DP; see :data:`CHAIN_PAPER_UNSAFE`).

Levels are disjoint partitions, so a level's measurement costs its ``eps_l`` (parallel
composition) and the levels add up (sequential composition): ``sum(eps_l) = eps``. The
noise scale of level l is ``lambda_l = Delta_l / eps_l``.

Example (spec R3):
    >>> round(geometric_variance(2.0), 6), round(geometric_zero_probability(2.0), 6)
    (7.835396, 0.244919)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import SpecError, suggest
from engine.mechanisms.hierarchical.model import RegionTree
from engine.noise import discrete_laplace

NOISE_KINDS = ("geometric", "laplace")
#: the ``laplace`` kind is released on the grid 2**-10 (real-valued, exact discrete noise)
LAPLACE_GRID_EXPONENT = 10
MEASUREMENTS = ("plain", "cumulative", "chain")
SPLITS = ("uniform", "user", "inverse-variance")
#: label of the paper-replication chain calibration (lambda = L/eps), which is not eps-DP
CHAIN_PAPER_UNSAFE = "paper (NOT eps-DP)"


def geometric_alpha(scale: float) -> float:
    """``alpha = exp(-1/lambda)`` of the double-geometric distribution of scale lambda."""
    return math.exp(-1.0 / scale) if scale > 0 else 0.0


def geometric_variance(scale: float | np.ndarray) -> float | np.ndarray:
    """Variance ``2 alpha / (1 - alpha)**2`` of the double-geometric noise of scale lambda."""
    scale = np.asarray(scale, dtype=float)
    alpha = np.exp(-1.0 / scale)
    var = 2.0 * alpha / (-np.expm1(-1.0 / scale)) ** 2
    return float(var) if var.ndim == 0 else var


def geometric_zero_probability(scale: float) -> float:
    """``P(eta = 0) = (1 - alpha) / (1 + alpha)``."""
    a = geometric_alpha(scale)
    return (1.0 - a) / (1.0 + a)


def laplace_variance(scale: float | np.ndarray) -> float | np.ndarray:
    """Variance ``2 lambda**2`` of Laplace noise of scale lambda."""
    var = 2.0 * np.asarray(scale, dtype=float) ** 2
    return float(var) if var.ndim == 0 else var


def noise_variance(kind: str, scale: float | np.ndarray) -> float | np.ndarray:
    """Per-entry variance of ``kind`` noise (geometric or laplace) of scale lambda."""
    check_noise(kind)
    return geometric_variance(scale) if kind == "geometric" else laplace_variance(scale)


def halfwidth_95(kind: str, scale: float, draws: int = 1) -> float:
    """The smallest t on the noise's grid with ``P(|eta| <= t) >= 0.95``, exactly, for one
    ``kind`` draw of scale lambda (``draws=1``) or the difference of two independent ones
    (``draws=2``: a count recovered from two noisy cumulative or prefix entries).

    Both kinds are double-geometric on a grid (spacing 1 or ``2**-LAPLACE_GRID_EXPONENT``).
    One draw: ``P(|eta| > t) = 2 a**(t+1) / (1 + a)``. The difference of two has
    ``P(d) = c**2 a**|d| (|d| + 1 + 2 a**2 / (1 - a**2))``, ``c = (1 - a) / (1 + a)``, whose
    tail is summed in closed form.

    Raises:
        SpecError: an unknown kind, a scale that is not positive or ``draws`` not 1 or 2.
    """
    check_noise(kind)
    if not scale > 0:
        raise SpecError(f"noise scale: must be positive, got {scale!r}")
    if draws not in (1, 2):
        raise SpecError(f"draws: expected 1 or 2, got {draws!r}")
    spacing = 1.0 if kind == "geometric" else 2.0**-LAPLACE_GRID_EXPONENT
    units = scale / spacing
    a = math.exp(-1.0 / units)
    gap = -math.expm1(-1.0 / units)  # 1 - a, accurate for large scales

    def tail(t: int) -> float:
        power = a ** (t + 1)
        if draws == 1:
            return 2.0 * power / (1.0 + a)
        c2 = (gap / (1.0 + a)) ** 2
        s0 = power / gap
        s1 = power * ((t + 1) * gap + a) / gap**2
        return 2.0 * c2 * (s1 + (1.0 + 2.0 * a * a / (gap * (1.0 + a))) * s0)

    lo, hi = 0, 1
    while tail(hi) > 0.05:
        lo, hi = hi, 2 * hi
    while lo < hi:  # the smallest t with tail(t) <= 0.05
        mid = (lo + hi) // 2
        if tail(mid) > 0.05:
            lo = mid + 1
        else:
            hi = mid
    return lo * spacing


def sample_double_geometric(scale: float, size: int | tuple[int, ...],
                            rng: np.random.Generator) -> np.ndarray:
    """Exact integer noise with ``P(eta = x) = (1 - a)/(1 + a) a**|x|``, ``a = e^(-1/scale)``.

    This is the discrete Laplace distribution (Ghosh et al.'s geometric mechanism), drawn by
    :func:`engine.noise.discrete_laplace` in exact integer arithmetic (CKS 2020, Algorithm 2;
    the scale is rounded up to a rational by a relative 2**-20 at most).
    """
    if not scale > 0:
        raise SpecError(f"noise scale: must be positive, got {scale!r}")
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    return discrete_laplace(scale, math.prod(shape), rng).reshape(shape)


def sample_noise(kind: str, scale: float, size: int | tuple[int, ...],
                 rng: np.random.Generator) -> np.ndarray:
    """``kind`` noise of scale lambda, exact: int64 for geometric, float64 multiples of
    ``g = 2**-LAPLACE_GRID_EXPONENT`` for laplace (``g Lap_Z(lambda / g)``)."""
    check_noise(kind)
    if kind == "geometric":
        return sample_double_geometric(scale, size, rng)
    spacing = 2.0**-LAPLACE_GRID_EXPONENT
    return sample_double_geometric(scale / spacing, size, rng) * spacing


def check_noise(kind: str) -> None:
    """SpecError unless ``kind`` is a known noise kind."""
    if kind not in NOISE_KINDS:
        raise SpecError(f"noise: unknown {kind!r}{suggest(str(kind), NOISE_KINDS)}; allowed: "
                        f"{', '.join(NOISE_KINDS)}")


def level_sensitivities(measurement: str, tree: RegionTree) -> np.ndarray:
    """L1 sensitivity of each level's measurement under the individual unit.

    Args:
        measurement: ``plain`` (2), ``cumulative`` (1) or ``chain`` (``|R_l|``).
        tree: the region tree.
    """
    if measurement == "plain":
        return np.full(tree.depth, 2.0)
    if measurement == "cumulative":
        return np.ones(tree.depth)
    if measurement == "chain":
        return np.asarray(tree.level_sizes, dtype=float)
    raise SpecError(f"measurement: unknown {measurement!r}; allowed: {', '.join(MEASUREMENTS)}")


def split_budget(epsilon: float, tree: RegionTree, mode: str = "uniform",
                 weights: Sequence[float] | None = None,
                 sensitivities: Sequence[float] | None = None) -> np.ndarray:
    """Per-level budgets ``eps_l`` summing to ``epsilon``.

    Args:
        epsilon: the total budget (> 0).
        tree: the region tree (levels and their sizes).
        mode: ``uniform`` (eps/L each, the paper's choice); ``user`` (proportional to
            ``weights``); ``inverse-variance`` (the split minimising the total noise
            variance over all k |R| released cells, ``sum_l |R_l| Delta_l**2 / eps_l**2``,
            which gives ``eps_l`` proportional to ``(|R_l| Delta_l**2)**(1/3)``: levels with
            more regions get more budget and so a smaller variance).
        weights: one positive weight per level, for ``user``.
        sensitivities: ``Delta_l`` per level (for ``inverse-variance``; default 1).

    Returns:
        ``eps_l`` per level.
    """
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise SpecError(f"epsilon: must be a positive number, got {epsilon!r}")
    L = tree.depth
    if mode == "uniform":
        share = np.ones(L)
    elif mode == "user":
        if weights is None:
            raise SpecError(f"split: 'user' needs one weight per level ({L} levels)")
        share = np.asarray(weights, dtype=float).reshape(-1)
        if share.size != L:
            raise SpecError(f"split.weights: expected {L} weights (one per level), got "
                            f"{share.size}")
        if not np.all(np.isfinite(share)) or np.any(share <= 0):
            raise SpecError(f"split.weights: must be positive numbers, got {share.tolist()}")
    elif mode == "inverse-variance":
        delta = np.ones(L) if sensitivities is None else np.asarray(sensitivities, float)
        share = np.cbrt(np.asarray(tree.level_sizes, dtype=float) * delta**2)
    else:
        raise SpecError(f"split: unknown {mode!r}{suggest(str(mode), SPLITS)}; allowed: "
                        f"{', '.join(SPLITS)}")
    return epsilon * share / share.sum()


@dataclass(frozen=True)
class NoisePlan:
    """How each level is measured.

    Attributes:
        measurement: plain, cumulative or chain.
        kind: geometric or laplace.
        epsilons: per-level budgets (they sum to the total eps).
        sensitivities: per-level L1 sensitivities.
        scales: per-level noise scales lambda_l = Delta_l / eps_l.
        eps_dp: False only for the labelled paper-replication chain calibration.
    """

    measurement: str
    kind: str
    epsilons: np.ndarray
    sensitivities: np.ndarray
    scales: np.ndarray
    eps_dp: bool = True

    @property
    def epsilon(self) -> float:
        """Total budget spent (sequential composition over levels)."""
        return float(np.sum(self.epsilons))

    @property
    def variances(self) -> np.ndarray:
        """Per-level noise variance of one measured entry."""
        return np.asarray(noise_variance(self.kind, self.scales), dtype=float)

    def weights(self) -> np.ndarray:
        """Least-squares weights per level: ``1/Var_l`` scaled so the largest is 1.

        Equal variances give weight 1 everywhere, the paper's unweighted objective (P10).
        """
        inv = 1.0 / self.variances
        return inv / inv.max()

    def sample(self, tree: RegionTree, k: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Independent noise arrays ``(|R_l|, k)`` per level."""
        return [sample_noise(self.kind, float(s), (n, k), rng)
                for s, n in zip(self.scales, tree.level_sizes, strict=True)]

    def to_report(self) -> dict[str, object]:
        """JSON-able privacy accounting."""
        return {"measurement": self.measurement, "noise": self.kind,
                "epsilon": self.epsilon, "epsilon_by_level": self.epsilons.tolist(),
                "sensitivity_by_level": self.sensitivities.tolist(),
                "scale_by_level": self.scales.tolist(),
                "variance_by_level": self.variances.tolist(),
                "privacy_unit": "individual", "eps_dp": self.eps_dp}


def noise_plan(tree: RegionTree, epsilon: float, measurement: str, kind: str = "geometric",
               split: str = "uniform", weights: Sequence[float] | None = None,
               paper_chain_scale: bool = False) -> NoisePlan:
    """Budgets, sensitivities and scales of one mechanism run.

    Args:
        tree: the region tree.
        epsilon: total budget.
        measurement: ``plain``, ``cumulative`` or ``chain``.
        kind: ``geometric`` (integer) or ``laplace``.
        split: see :func:`split_budget`.
        weights: level weights for ``split='user'``.
        paper_chain_scale: calibrate the chain with sensitivity 1 (lambda = L/eps for a
            uniform split) as the paper implies. This is NOT eps-DP (spec §3.7.3); the plan
            is marked ``eps_dp=False`` and every report says so.
    """
    check_noise(kind)
    sens = level_sensitivities(measurement, tree)
    if paper_chain_scale:
        if measurement != "chain":
            raise SpecError("paper_chain_scale: applies to the chain measurement only")
        sens = np.ones(tree.depth)
    eps = split_budget(epsilon, tree, split, weights, sens)
    reported = level_sensitivities(measurement, tree) if paper_chain_scale else sens
    return NoisePlan(measurement, kind, eps, reported, sens / eps,
                     eps_dp=not paper_chain_scale)
