"""Data-independent baselines: identity, workload, H2, HB and wavelet.

On multi-attribute domains, H2, HB and wavelet use the Kronecker product of the per-attribute
strategies (identity on attributes of size 1). Definitions follow the HDMM spec section 7.3:

* H2: the binary hierarchy with its root, all weights 1 (Hay et al.);
* HB: the hierarchy with the branching factor b* minimising
  ``(b-1) h**3 - 2 (b+1) h**2 / 3``, ``h = ceil(log_b n)``, without its root (Qardaji et al.);
* wavelet: the unweighted Haar matrix (Privelet); for n not a power of two, the Haar matrix
  of the next power of two restricted to the first n cells.

The 1-D matrices themselves are ``engine.linalg.trees`` (Eigen-Design's design sets use them too).
"""

from __future__ import annotations

import numpy as np
import param

from engine.analysis.expected_error import trace_term
from engine.linalg.marginals import MarginalStrategy, key_of
from engine.linalg.matrix import Identity, Kron, Matrix, Sparse
from engine.linalg.trees import haar_matrix, hb_branching, hierarchy_matrix
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.views import Fact, View, WeightsView, factor_matrices, facts
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload


def _plan_from_strategy(name: str, workload: Workload, privacy: Privacy, A: Matrix,
                        views: tuple[View, ...]) -> Plan:
    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=A,
                trace=trace_term(workload, A),
                sensitivity={1: A.sensitivity(1), 2: A.sensitivity(2)}, shown=views)


def _kind(kind: str, meaning: str, *more: Fact) -> View:
    """The baseline's headline: what kind of strategy it is, in words."""
    return facts("baseline", "Strategy", "A fixed strategy: nothing is optimised.",
                 [Fact("kind", "strategy kind", kind), Fact("meaning", "what it measures",
                                                            meaning), *more])


class PerAttributeBaseline(Mechanism):
    """A Kronecker product of one fixed 1-D strategy per attribute."""

    def factor(self, n: int) -> Matrix:
        """The 1-D strategy for an attribute of n cells."""
        raise NotImplementedError(type(self).__name__ + " must define factor")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        factors = [self.factor(n) if n > 1 else Identity(1) for n in workload.domain.shape]
        A = Kron(factors)
        views = (_kind("kron", f"{self.description} (one part per attribute, combined as a "
                       "Kronecker product)"),
                 *factor_matrices(workload.domain.names, factors))
        return _plan_from_strategy(self.name, workload, privacy, A, views)


@register
class IdentityMechanism(PerAttributeBaseline):
    """Measure every cell once (the Laplace/Gaussian histogram)."""

    name = registered_name("identity")
    title = "Identity"
    description = "noisy count of every cell, then add up the cells each query needs"

    def factor(self, n: int) -> Matrix:
        return Identity(n)


@register
class H2Mechanism(PerAttributeBaseline):
    """Binary hierarchical intervals (Hay et al. 2010)."""

    name = registered_name("h2")
    title = "H2"
    description = "noisy counts of a binary tree of intervals on every attribute"

    def factor(self, n: int) -> Matrix:
        return Sparse(hierarchy_matrix(n, 2))


@register
class HBMechanism(PerAttributeBaseline):
    """Hierarchy with the optimised branching factor, without its root (Qardaji et al.)."""

    name = registered_name("hb")
    title = "HB"
    description = "noisy counts of a tree of intervals with a tuned branching factor"

    def factor(self, n: int) -> Matrix:
        return Sparse(hierarchy_matrix(n, hb_branching(n))[1:])


@register
class WaveletMechanism(PerAttributeBaseline):
    """Haar wavelet coefficients (Privelet, Xiao et al.)."""

    name = registered_name("wavelet")
    title = "Wavelet"
    description = "noisy Haar wavelet coefficients on every attribute"

    def factor(self, n: int) -> Matrix:
        return Sparse(haar_matrix(n))


@register
class WorkloadMechanism(Mechanism):
    """The matrix mechanism with A = W: measure the workload itself, then least squares."""

    name = registered_name("workload")
    title = "Workload"
    description = "noisy answers to the queries themselves, made consistent by least squares"
    max_sensitivity_cells = param.Integer(default=50_000_000, bounds=(1, None), doc=(
        "Largest domain on which the sensitivity is computed exactly; beyond it, the sum of "
        "the terms' sensitivities (an upper bound) is used."))

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        marginal = as_marginal_strategy(workload)
        if marginal is not None:
            names = workload.domain.names
            weights = {" x ".join(names[i] for i in axes) or "total": marginal.theta[a]
                       for a, axes in zip(marginal.keys, marginal.block_axes(), strict=True)}
            views = (_kind("marginals", "the workload's own marginal tables, with its weights"),
                     WeightsView.of(weights, key="marginal_weights", title="Weight per marginal",
                                    units="weight", caption=(
                                        "Each measured table (marginal) and the weight its "
                                        "counts are multiplied by before noise is added.")))
            return _plan_from_strategy(self.name, workload, privacy, marginal, views)
        A = workload.matrix
        exact = workload.domain.size <= self.max_sensitivity_cells
        sens = {p: A.sensitivity(p) if exact else A.sensitivity_bound(p) for p in (1, 2)}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy, strategy=A,
                    trace=trace_term(workload, A), sensitivity=sens,
                    shown=(_kind("workload", "the workload's own queries",
                                 Fact("exact_sensitivity", "sensitivity computed exactly",
                                      exact)),))


def as_marginal_strategy(workload: Workload) -> MarginalStrategy | None:
    """The workload as ``M(theta)`` when it is a union of distinct weighted marginals.

    Then least squares on A = W has closed-form error (rank on the marginal eigenspaces) on
    any domain size; None for other workloads.
    """
    d = len(workload.domain)
    theta = np.zeros(2**d)
    for t in workload.terms:
        if not t.is_product or not all(f.is_identity() for f in t.factors):
            return None
        key = key_of(t.attrs, d)
        if theta[key] != 0:
            return None  # a repeated marginal is not a plain M(theta) stack
        theta[key] = t.weight
    return MarginalStrategy(theta, workload.domain.shape)
