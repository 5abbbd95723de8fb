"""Assembly (Algorithm 1, Phases C-D): noise allocation, privacy check, measure, reconstruct.

With per-residual losses ``L_{A'}`` at privacy cost 1, the optimal split of a total cost beta
is (spec 3.1, lines 14-16, R3)::

    gamma = sum_{A'} sqrt(L_{A'}) / beta,   sigma2_{A'} = gamma / sqrt(L_{A'})

so residual A' spends ``1 / sigma2_{A'} = sqrt(L_{A'}) / gamma`` (its *privacy share*), the
shares add up to beta and the weighted total squared error is ``(sum sqrt L)**2 / beta``.

Measuring needs only the data's marginals on the residuals' attribute sets (group-by counts,
never the full data vector): residual A' releases ``B x_{A'} + N(0, sigma2_{A'} s**2 I)`` where
s is the privacy level's noise scale. Reconstruction turns each release into a centred
estimate ``y_{A'} = B^+ w``, forms every workload marginal as
``x_A = sum_{A' subset A} smear(y_{A'})`` and applies the workload's queries to it; the
variance of a query is ``sum_{A'} sigma2_{A'} q_{=>A'} V^+ q_{=>A'}^T``.

Privacy unit: "privacy cost 1" (beta = 1) is zCDP rho = 1/2, i.e. ``Privacy(noise="zcdp",
rho=0.5)`` with ``sigma() = 1``. The assembled strategy is stored pre-scaled (rows divided by
``sqrt(sigma2)``) so the engine's generic rescaling applies: i.i.d. noise of std
``privacy.sigma() * sensitivity`` with L2 sensitivity ``sqrt(sum max diag V / sigma2) <= 1``.

Exact noise: a release draws no float Gaussian. The whitened answers ``B x / sqrt(sigma2)`` are
rounded to the grid ``2**-k`` and i.i.d. discrete Gaussian integers are added on it
(:meth:`engine.mechanisms.base.Plan.add_noise`), the L2 sensitivity enlarged by the rounding
(at most ``2**-10`` relative with the automatic grid; ``Measurement.noise.variance_factor`` is
the release's error over the plan's, below 1.002
unless sigma passes 2**27 grid units). The noise is not drawn on the integer
marginals: a discrete Gaussian on ``x_{A'}`` pays ``1 / (2 s**2)`` for the whole marginal, which
post-processing cannot lower to the residual's ``prod (n - 1) / n`` share, and it would replace
every optimised ``V`` (QuerySmasher, RP+, WFF) by the isotropic one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.matrix import Matrix
from engine.linalg.residuals import AttrSet, smear_into, subsets
from engine.mechanisms.base import Measurement, Plan
from engine.mechanisms.residual.decomposition import subquery
from engine.mechanisms.residual.submechanisms import SubMechanism
from engine.mechanisms.views import Fact, TableView, View, WeightsView, facts
from engine.privacy import Privacy
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: Largest number of per-query variances listed at once.
QUERY_LIMIT = 20_000_000
#: Largest domain on which the composed privacy cost is checked cell by cell.
EXACT_COST_CELLS = 1 << 22


def allocate(losses: Sequence[float], beta: float = 1.0) -> tuple[float, np.ndarray]:
    """Optimal noise multipliers for per-residual losses at total privacy cost ``beta``.

    Returns:
        ``(gamma, sigma2)`` with ``gamma = sum sqrt(L) / beta`` and ``sigma2 = gamma /
        sqrt(L)``; the total weighted squared error is ``sum sigma2 L = (sum sqrt L)**2 /
        beta``.

    Example (spec R3):
        >>> gamma, s2 = allocate([1.0, 4.0, 9.0])
        >>> gamma, s2.tolist()
        (6.0, [6.0, 3.0, 2.0])
    """
    L = np.asarray(losses, dtype=float)
    if np.any(L <= 0):
        raise ValueError("allocate: every residual loss must be positive")
    gamma = float(np.sqrt(L).sum()) / beta
    return gamma, gamma / np.sqrt(L)


@dataclass(frozen=True)
class Release:
    """One residual's measurement in the assembled mechanism (a row of the residual table).

    Attributes:
        attrs: the residual's attribute set.
        mechanism: its unit-cost sub-mechanism.
        loss: weighted loss ``L`` at privacy cost 1.
        loss_unweighted: the same with all weights 1.
        multiplier: noise variance multiplier ``sigma2`` (at beta = 1).
        method: how it was solved (``kron``, ``dense``, ``fourier``).
        group: index of the distinct sub-problem it shares.
        iterations: solver iterations.
        gap: certified relative optimality gap of the sub-solver.
    """

    attrs: AttrSet
    mechanism: SubMechanism
    loss: float
    loss_unweighted: float
    multiplier: float
    method: str = "kron"
    group: int = 0
    iterations: int = 0
    gap: float = 0.0

    @property
    def share(self) -> float:
        """Privacy cost spent on this residual: ``1 / sigma2`` (the shares sum to beta)."""
        return 1.0 / self.multiplier


class MarginalSource:
    """Marginals of the data by counting (a Dataset) or summing (a small data vector).

    Small marginals (at most ``cache_cells`` cells) are kept, and a marginal one attribute
    short of a kept one is summed out of it instead of being counted again; large ones are
    handed out and forgotten, so memory stays at the size of one large marginal.
    """

    def __init__(self, data: Any, domain: Domain, cache_cells: int = 1 << 14) -> None:
        self.domain = domain
        self.cache_cells = cache_cells
        self._cache: dict[AttrSet, np.ndarray] = {}
        if hasattr(data, "marginal"):
            self._count: Callable[[AttrSet], np.ndarray] = lambda attrs: np.asarray(
                data.marginal([domain.names[i] for i in attrs]), dtype=float)
        else:
            x = np.asarray(data, dtype=float).reshape(domain.shape)
            all_axes = tuple(range(len(domain.shape)))
            self._count = lambda attrs: x.sum(axis=tuple(a for a in all_axes
                                                         if a not in attrs))

    def __call__(self, attrs: AttrSet) -> np.ndarray:
        """The count tensor over ``attrs`` (axes in domain order)."""
        if attrs in self._cache:
            return self._cache[attrs]
        out = None
        for j in range(len(self.domain.shape)):
            if j in attrs:
                continue
            parent = tuple(sorted(attrs + (j,)))
            if parent in self._cache:
                out = self._cache[parent].sum(axis=parent.index(j))
                break
        if out is None:
            out = self._count(attrs)
        if math.prod(self.domain.shape[i] for i in attrs) <= self.cache_cells:
            self._cache[attrs] = out
        return out


class Assembly:
    """The assembled mechanism: one release per residual with its noise multiplier.

    Args:
        domain: the data domain.
        releases: one per residual with a non-zero sub-workload, multipliers set for beta = 1.
    """

    def __init__(self, domain: Domain, releases: Sequence[Release]) -> None:
        self.domain = domain
        self.shape = domain.shape
        self.releases = tuple(sorted(releases, key=lambda r: (len(r.attrs), r.attrs)))
        self.by_attrs = {r.attrs: r for r in self.releases}
        sizes = [r.mechanism.outputs for r in self.releases]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    @classmethod
    def from_losses(cls, domain: Domain, solved: Sequence[Any], beta: float = 1.0
                    ) -> Assembly:
        """Allocate noise (Phase C) over solved residuals (objects with attrs, mechanism,
        loss, loss_unweighted, method, group, iterations, gap)."""
        solved = [s for s in solved if s.loss > 0]
        _, multipliers = allocate([s.loss for s in solved], beta)
        return cls(domain, [Release(s.attrs, s.mechanism, s.loss, s.loss_unweighted,
                                    float(m), s.method, s.group, s.iterations, s.gap)
                            for s, m in zip(solved, multipliers, strict=True)])

    # ----- totals -----------------------------------------------------------------------
    @property
    def outputs(self) -> int:
        """Number of released numbers."""
        return int(self.offsets[-1])

    @property
    def gamma(self) -> float:
        """``sum sqrt(L)`` (beta = 1)."""
        return float(sum(math.sqrt(r.loss) for r in self.releases))

    @property
    def total_loss(self) -> float:
        """Weighted total squared error at beta = 1: ``sum sigma2 L``."""
        return float(sum(r.multiplier * r.loss for r in self.releases))

    @property
    def total_loss_unweighted(self) -> float:
        """Total squared error of the unweighted queries at beta = 1."""
        return float(sum(r.multiplier * r.loss_unweighted for r in self.releases))

    def privacy_cost_bound(self) -> float:
        """``sum_{A'} max diag(V_{A'}) / sigma2_{A'}`` (Theorem 4): an upper bound on the
        composed privacy cost, equal to it when every ``diag V`` is constant."""
        return float(sum(float(np.max(r.mechanism.diag_v())) / r.multiplier
                         for r in self.releases))

    def composed_privacy_cost(self) -> float:
        """The exact composed privacy cost ``max_x sum_{A'} diag(V_{A'})[x_{A'}] / sigma2``
        over every cell of the domain (small domains only)."""
        return float(self.cell_costs().max())

    def cell_costs(self) -> np.ndarray:
        """Composed privacy cost of every cell, ``sum_{A'} diag(V_{A'})[x_{A'}] / sigma2``
        (a tensor over the domain; small domains only)."""
        if self.domain.size > EXACT_COST_CELLS:
            raise NotApplicable(f"the exact composed privacy cost visits every cell; this "
                                f"domain has {self.domain.size:,}")
        everything = tuple(range(len(self.shape)))
        total = np.zeros(self.shape)
        for r in self.releases:
            diag = r.mechanism.diag_v() / r.multiplier
            total = total + np.expand_dims(diag, tuple(i for i in everything
                                                       if i not in r.attrs))
        return total

    def residual_table(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """One record per residual: attribute names (joined by ' x ', 'total' for none),
        cells, loss L, sigma^2, privacy share, how it was solved."""
        return [{"residual": residual_label(r.attrs, names),
                 "cells": math.prod(self.shape[i] for i in r.attrs),
                 "loss": r.loss, "sigma2": r.multiplier, "privacy_share": r.share,
                 "method": r.method, "group": r.group, "iterations": r.iterations,
                 "gap": r.gap} for r in self.releases]

    # ----- measuring ---------------------------------------------------------------------
    def exact_release(self, marginals: MarginalSource) -> np.ndarray:
        """Noise-free ``B_{A'} x_{A'}`` for every residual, concatenated (largest attribute
        sets are read first so that smaller marginals are sums of cached ones)."""
        out = np.empty(self.outputs)
        order = sorted(range(len(self.releases)), key=lambda k: -len(self.releases[k].attrs))
        for k in order:
            r = self.releases[k]
            out[self.offsets[k]:self.offsets[k + 1]] = r.mechanism.release(marginals(r.attrs))
        return out

    def scale_blocks(self, w: np.ndarray, power: float) -> np.ndarray:
        """Multiply each residual's block of ``w`` by ``sigma2**(power / 2)``, in place."""
        for r, lo, hi in zip(self.releases, self.offsets[:-1], self.offsets[1:], strict=True):
            w[lo:hi] *= r.multiplier ** (power / 2.0)
        return w

    def add_noise(self, w: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
        """Add ``N(0, scale**2 sigma2_{A'})`` to each residual's block of ``w``, in place
        (block by block: no temporary of the full release size)."""
        for r, lo, hi in zip(self.releases, self.offsets[:-1], self.offsets[1:], strict=True):
            w[lo:hi] += (scale * math.sqrt(r.multiplier)) * rng.standard_normal(int(hi - lo))
        return w

    def noise_std(self, scale: float) -> np.ndarray:
        """Per-output noise std: ``scale * sqrt(sigma2_{A'})``."""
        return np.concatenate([np.full(r.mechanism.outputs, scale * math.sqrt(r.multiplier))
                               for r in self.releases])

    def split(self, w: np.ndarray) -> dict[AttrSet, np.ndarray]:
        """Cut a concatenated release into per-residual pieces."""
        return {r.attrs: w[lo:hi] for r, lo, hi in zip(self.releases, self.offsets[:-1],
                                                         self.offsets[1:], strict=True)}

    def estimates(self, w: np.ndarray) -> dict[AttrSet, np.ndarray]:
        """Centred residual estimates ``y_{A'} = B^+ w_{A'}``."""
        return {attrs: self.by_attrs[attrs].mechanism.estimate(part)
                for attrs, part in self.split(np.asarray(w, dtype=float)).items()}

    def marginal(self, attrs: AttrSet, estimates: dict[AttrSet, np.ndarray]) -> np.ndarray:
        """``x_A = sum_{A' subset A} smear(y_{A'})`` (residuals without a release are 0)."""
        out = np.zeros(tuple(self.shape[i] for i in attrs))
        for sub in subsets(attrs):
            if sub in estimates:
                out = out + smear_into(estimates[sub], sub, attrs, self.shape)
        return out

    def answers(self, workload: Workload, w: np.ndarray) -> np.ndarray:
        """Every workload answer (weighted rows, as ``workload.answer``) from a release.

        Residual estimates that several workload marginals share are kept; the others (the
        largest, one per workload marginal) are computed when needed and dropped, as is each
        reconstructed marginal once the terms on it are answered.
        """
        parts = self.split(np.asarray(w, dtype=float))
        out = np.empty(workload.num_queries)
        position = 0
        for t, answers in self._term_answers(
                workload, lambda attrs: self.by_attrs[attrs].mechanism.estimate(parts[attrs])):
            out[position:position + t.num_queries] = answers
            position += t.num_queries
        return out

    def stream_answers(self, workload: Workload,
                       marginals: Callable[[AttrSet], np.ndarray], scale: float,
                       rng: np.random.Generator) -> Iterator[tuple[Term, np.ndarray]]:
        """Measure and reconstruct view by view: ``(term, its weighted answers)`` in term
        order, each residual measured once (its marginal from ``marginals``, e.g. a
        :class:`MarginalSource`), when first needed, with float Gaussian noise
        ``N(0, scale**2 sigma2_{A'})`` (as :meth:`add_noise`: for timing and teaching;
        releases go through ``Plan.add_noise``, exact noise from OS entropy).

        Neither the whole release nor the whole answer vector is ever held: on [40]^40's
        Table 7 workload they are 586 M and 632 M numbers (4.7 and 5.1 GB), while the
        estimates shared by several views (the 1- and 2-way residuals) are 1.2 M.
        """
        def estimate(attrs: AttrSet) -> np.ndarray:
            r = self.by_attrs[attrs]
            w = r.mechanism.release(marginals(attrs))
            w = w + (scale * math.sqrt(r.multiplier)) * rng.standard_normal(w.shape[0])
            return r.mechanism.estimate(w)

        return self._term_answers(workload, estimate)

    def _term_answers(self, workload: Workload, estimate: Callable[[AttrSet], np.ndarray]
                      ) -> Iterator[tuple[Term, np.ndarray]]:
        """``(term, weighted answers)`` for every term, reconstructing each workload marginal
        once per run of terms on it. ``estimate`` is called once per residual: estimates
        needed by more than one marginal are kept, the others dropped after use."""
        runs = [t.attrs for i, t in enumerate(workload.terms)
                if i == 0 or workload.terms[i - 1].attrs != t.attrs]
        needed: dict[AttrSet, int] = {}
        for attrs in runs:
            for sub in subsets(attrs):
                needed[sub] = needed.get(sub, 0) + 1
        kept: dict[AttrSet, np.ndarray] = {}

        def cached(attrs: AttrSet) -> np.ndarray:
            if attrs in kept:
                return kept[attrs]
            y = estimate(attrs)
            if needed[attrs] > 1:
                kept[attrs] = y
            return y

        current: tuple[AttrSet | None, np.ndarray | None] = (None, None)
        for t in workload.terms:
            if current[0] != t.attrs:
                marginal = np.zeros(t.marginal_shape)
                for sub in subsets(t.attrs):
                    if sub in self.by_attrs:
                        marginal = marginal + smear_into(cached(sub), sub, t.attrs,
                                                         self.shape)
                current = (t.attrs, marginal)
            yield t, t.weight * t.answer_marginal(current[1])

    # ----- error -----------------------------------------------------------------------
    def term_variances(self, term: Term) -> np.ndarray:
        """Unit variances of the term's (weighted) queries at beta = 1."""
        sizes = term.marginal_shape
        positions = range(len(term.attrs))
        out = np.zeros(term.num_queries)
        if term.is_product:
            dense = [f.dense() for f in term.factors or ()]
            centred = [F - F.mean(axis=1, keepdims=True) for F in dense]
            mean2 = [F.mean(axis=1) ** 2 for F in dense]
            full = tuple(F.shape[0] for F in dense)
        for keep in subsets(tuple(positions)):
            sub_attrs = tuple(term.attrs[p] for p in keep)
            rel = self.by_attrs.get(sub_attrs)
            if rel is None:
                continue
            if term.is_product:
                part = rel.mechanism.quad_product([centred[p] for p in keep])
                part = np.expand_dims(part, tuple(p for p in positions if p not in keep))
                for p in positions:
                    if p not in keep:
                        shape = [1] * len(full)
                        shape[p] = full[p]
                        part = part * mean2[p].reshape(shape)
                vec = np.broadcast_to(part, full).reshape(-1)
            else:
                vec = rel.mechanism.quad(subquery(term.query.dense(), sizes, keep))
            out += rel.multiplier * vec
        return term.weight**2 * out

    def query_variances(self, workload: Workload) -> np.ndarray:
        """Unit variances of every workload query (weighted rows) at beta = 1."""
        if workload.num_queries > QUERY_LIMIT:
            raise NotApplicable(f"{workload.num_queries:,} queries: per-query variances are "
                                f"listed up to {QUERY_LIMIT:,}")
        return np.concatenate([self.term_variances(t) for t in workload.terms])

    def strategy(self) -> ResidualStrategy:
        """The pre-scaled strategy over the full domain (an implicit matrix)."""
        return ResidualStrategy(self)


class ResidualStrategy(Matrix):
    """``[B_{A'} Q^marg_{A'} / sqrt(sigma2_{A'})]`` stacked over residuals, never materialised.

    Applying it to a data vector marginalises to each residual's attributes; the L2
    sensitivity is ``sqrt(sum max diag V / sigma2)`` (the Theorem 4 bound; exact per cell on
    small domains through ``column_norms``).
    """

    def __init__(self, assembly: Assembly) -> None:
        self.assembly = assembly

    @property
    def shape(self) -> tuple[int, int]:
        return (self.assembly.outputs, self.assembly.domain.size)

    def _columns(self, x: np.ndarray) -> tuple[np.ndarray, bool]:
        x = np.asarray(x, dtype=float)
        return (x[:, None], True) if x.ndim == 1 else (x, False)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        X, squeeze = self._columns(x)
        out = np.empty((self.shape[0], X.shape[1]))
        for k in range(X.shape[1]):
            source = MarginalSource(X[:, k], self.assembly.domain)
            out[:, k] = self.assembly.scale_blocks(self.assembly.exact_release(source), -1)
        return out[:, 0] if squeeze else out

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        Y, squeeze = self._columns(y)
        shape = self.assembly.shape
        everything = tuple(range(len(shape)))
        out = np.zeros((self.shape[1], Y.shape[1]))
        for k in range(Y.shape[1]):
            total = np.zeros(shape)
            for r, part in self.assembly.split(Y[:, k]).items():
                rel = self.assembly.by_attrs[r]
                back = rel.mechanism.release_adjoint(part) / math.sqrt(rel.multiplier)
                total = total + np.broadcast_to(np.expand_dims(
                    back, tuple(i for i in everything if i not in r)), shape)
            out[:, k] = total.reshape(-1)
        return out[:, 0] if squeeze else out

    def column_norms(self, p: int) -> np.ndarray:
        if p != 2:
            return super().column_norms(p)
        if self.shape[1] > EXACT_COST_CELLS:
            raise ValueError(f"refusing to list {self.shape[1]:,} column norms; use "
                             "sensitivity()")
        return np.sqrt(self.assembly.cell_costs().reshape(-1))

    def sensitivity(self, p: int) -> float:
        if p == 2:
            if self.shape[1] <= EXACT_COST_CELLS:
                return float(self.column_norms(2).max())
            return math.sqrt(self.assembly.privacy_cost_bound())
        return super().sensitivity(p)


def gdp_delta(mu: float, epsilon: float) -> float:
    """The (eps, delta) curve of mu-Gaussian DP: ``Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 -
    eps/mu)`` (spec 1.4; privacy cost beta gives mu = sqrt(beta))."""
    from scipy.stats import norm

    return float(norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(
        -mu / 2 - epsilon / mu))


def privacy_conversions(beta: float, epsilon: float = 1.0) -> dict[str, float]:
    """What privacy cost ``beta`` means: mu-GDP, rho-zCDP and delta at ``epsilon``."""
    mu = math.sqrt(beta)
    return {"privacy_cost": beta, "gdp_mu": mu, "zcdp_rho": beta / 2.0,
            "epsilon": epsilon, "delta": gdp_delta(mu, epsilon)}


def timings_table(seconds: dict[str, float]) -> TableView:
    """Wall-clock seconds per planning stage, as a table."""
    return TableView.of([{"stage": k, "seconds": v} for k, v in seconds.items()],
                        key="timings", title="Time per stage", units="s", detail=True,
                        caption="Wall-clock time of each planning stage.")


def residual_label(attrs: AttrSet, names: Sequence[str]) -> str:
    """A residual's (or marginal's) attributes in words: ``a x b``, ``total`` for none."""
    return " x ".join(names[i] for i in attrs) or "total"


def assembly_plan(mechanism: str, workload: Workload, privacy: Privacy, assembly: Assembly,
                  settings: Sequence[Fact] = (), views: Sequence[View] = ()) -> Plan:
    """A :class:`~engine.mechanisms.base.Plan` for an assembled residual mechanism.

    The stored strategy is the pre-scaled ``ResidualStrategy`` (noise i.i.d. with std
    ``privacy.sigma() * sensitivity``), ``trace`` its ``tr[(A^T A)^+ W^T W]`` (the weighted
    total squared error at beta = 1), and measure / reconstruct / variances go through the
    residual structure, never the full domain. ``settings`` (how it was planned) join the
    plan's facts; ``views`` follow the residual table.
    """
    bound = assembly.privacy_cost_bound()
    if bound > 1.0 + 1e-9:  # Theorem 1: the shares must add up to at most beta = 1
        raise RuntimeError(f"{mechanism}: assembled privacy cost {bound:.12g} exceeds 1")
    sensitivity = math.sqrt(bound)

    # Measurements are in the units of the stored (pre-scaled) strategy A: y = A x + noise
    # with i.i.d. noise, as for every engine plan; the residual releases are y * sqrt(sigma2).
    # Each block B x / sqrt(sigma2) is whitened (its noise in the plan is i.i.d.), so the exact
    # release is the engine's: A x rounded to the grid 2**-k plus i.i.d. discrete Gaussian
    # integers, with the L2 sensitivity enlarged by the rounding (engine.noise).
    def measurer(plan: Plan, data: Any, rng: np.random.Generator) -> Measurement:
        start = time.perf_counter()
        exact = assembly.scale_blocks(assembly.exact_release(MarginalSource(data,
                                                                             workload.domain)),
                                      -1)
        y, noise = plan.add_noise(exact, rng)
        return Measurement(y, noise.noise_std, time.perf_counter() - start, noise)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        return assembly.answers(workload, assembly.scale_blocks(np.array(y, dtype=float), 1))

    def query_variances(plan: Plan) -> np.ndarray:
        return assembly.query_variances(workload)

    rmse_unweighted = math.sqrt(privacy.unit_variance() * bound * assembly.total_loss_unweighted
                                / workload.num_queries)
    conversions = privacy_conversions(1.0)
    shown = (
        facts("residual", "Residual mechanism", "How the noise is split over residuals and "
              "the error it gives (losses at privacy cost 1).", [
                  Fact("kind", "strategy kind", "residual"),
                  Fact("num_residuals", "residuals measured", len(assembly.releases)),
                  Fact("gamma", "loss multiplier gamma (square of the sum of root losses)",
                       assembly.gamma, detail=True),
                  Fact("privacy_cost", "privacy cost of the assembled release", bound,
                       "cost units (1 = rho 0.5)", detail=True),
                  Fact("total_loss", "weighted total variance at privacy cost 1",
                       assembly.total_loss, "squared counts", detail=True),
                  Fact("total_loss_unweighted", "unweighted total variance at privacy cost 1",
                       assembly.total_loss_unweighted, "squared counts", detail=True),
                  Fact("rmse_unweighted", "RMSE of the unweighted queries at the plan's "
                       "privacy level", rmse_unweighted, "counts", detail=True),
                  *(replace(f, detail=True) for f in settings)]),
        WeightsView.of({residual_label(r.attrs, workload.domain.names): r.share
                        for r in assembly.releases}, key="residual_shares",
                       title="Share of the privacy budget per residual",
                       units="share of the budget", caption=(
                           "A residual is what a table adds beyond its smaller sub-tables; "
                           "each is measured once with its own noise. A larger share means "
                           "less noise on that piece; the shares add up to the whole budget.")),
        TableView.of(assembly.residual_table(workload.domain.names), key="residual_table",
                     title="Noise per residual", detail=True, caption=(
                         "How the noise is spread over residuals: a residual is what a table "
                         "adds beyond its smaller sub-tables. Each is measured once with its "
                         "own noise level (sigma2, at privacy cost 1).")),
        *views,
        replace(facts("privacy_conversions", "What privacy cost 1 means", "The same privacy "
              "cost in other units.", [
                  Fact("gdp_mu", "Gaussian DP mu", conversions["gdp_mu"]),
                  Fact("zcdp_rho", "zero-concentrated DP rho", conversions["zcdp_rho"]),
                  Fact("epsilon", "epsilon", conversions["epsilon"]),
                  Fact("delta", "delta at this epsilon", conversions["delta"])]),
                detail=True),
    )
    # Laplace noise is not calibrated for these Gaussian mechanisms: no L1 sensitivity.
    return Plan(mechanism=mechanism, workload=workload, privacy=privacy,
                strategy=assembly.strategy(), trace=assembly.total_loss,
                sensitivity={1: math.inf, 2: sensitivity}, shown=shown,
                reconstructor=reconstructor, query_variances=query_variances,
                measurer=measurer)
