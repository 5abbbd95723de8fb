"""Data-independent baselines: identity, workload, H2, HB and wavelet.

On multi-attribute domains, H2, HB and wavelet use the Kronecker product of the per-attribute
strategies (identity on attributes of size 1). Definitions follow the HDMM spec section 7.3:

* H2: the binary hierarchy with its root, all weights 1 (Hay et al.);
* HB: the hierarchy with the branching factor b* minimising
  ``(b-1) h**3 - 2 (b+1) h**2 / 3``, ``h = ceil(log_b n)``, without its root (Qardaji et al.);
* wavelet: the unweighted Haar matrix (Privelet); for n not a power of two, the Haar matrix
  of the next power of two restricted to the first n cells.
"""

from __future__ import annotations

import math

import numpy as np
import param
import scipy.sparse as sp

from engine.error import trace_term
from engine.linalg.marginals import MarginalStrategy, key_of
from engine.linalg.matrix import Identity, Kron, Matrix, Sparse
from engine.linalg.spectral import haar_rows
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload


def hierarchy_intervals(n: int, b: int) -> list[tuple[int, int]]:
    """The rows of ``hier(n, b)`` as half-open cell intervals ``[start, stop)``, in row order:
    the root, then each child's hierarchy (depth first).

    With ``n = m b + r``, the first r children cover m+1 cells and the rest m cells; a single
    cell is a leaf.
    """
    out: list[tuple[int, int]] = []

    def visit(start: int, size: int) -> None:
        out.append((start, start + size))
        if size == 1:
            return
        m, r = divmod(size, b)
        for child in [m + 1] * r + [m] * (b - r):
            if child:
                visit(start, child)
                start += child

    visit(0, n)
    return out


def hierarchy_matrix(n: int, b: int) -> sp.csr_matrix:
    """``hier(n, b)`` as a sparse 0/1 matrix (one row per tree node)."""
    iv = np.array(hierarchy_intervals(n, b), dtype=np.int64)
    lengths = iv[:, 1] - iv[:, 0]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.arange(indptr[-1]) - np.repeat(indptr[:-1] - iv[:, 0], lengths)
    return sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(len(iv), n))


def hierarchy(n: int, b: int) -> np.ndarray:
    """The hierarchical strategy ``hier(n, b)`` as a dense array (see hierarchy_matrix)."""
    return hierarchy_matrix(n, b).toarray()


def levels(n: int, b: int) -> int:
    """Smallest h with ``b**h >= n`` (the height of a b-ary tree over n leaves)."""
    h, cap = 0, 1
    while cap < n:
        cap *= b
        h += 1
    return h


def hb_branching(n: int) -> int:
    """Qardaji et al.'s branching factor: argmin over b of ``(b-1) h^3 - 2 (b+1) h^2 / 3``."""
    if n <= 2:
        return 2
    best, best_b = math.inf, 2
    for b in range(2, n + 1):
        h = levels(n, b)
        cost = (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
        if cost < best:
            best, best_b = cost, b
    return best_b


def haar_matrix(n: int) -> sp.csr_matrix:
    """Sparse unweighted Haar matrix for n cells, ``H_n = [H_{n/2} kron [1,1];
    I_{n/2} kron [1,-1]]``; for n not a power of two, that of the next power of two restricted
    to the first n cells (rows left empty dropped)."""
    size = 1 << max(0, (n - 1).bit_length())
    H = haar_rows(size)[:, :n].tocsr()
    return H[np.diff(H.indptr) > 0]


def haar(n: int) -> np.ndarray:
    """The unweighted Haar matrix as a dense array (see haar_matrix)."""
    return haar_matrix(n).toarray()


def _plan_from_strategy(name: str, workload: Workload, privacy: Privacy, A: Matrix,
                        details: dict) -> Plan:
    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=A,
                trace=trace_term(workload, A),
                sensitivity={1: A.sensitivity(1), 2: A.sensitivity(2)}, details=details)


class PerAttributeBaseline(Mechanism):
    """A Kronecker product of one fixed 1-D strategy per attribute."""

    def factor(self, n: int) -> Matrix:
        """The 1-D strategy for an attribute of n cells."""
        raise NotImplementedError(type(self).__name__ + " must define factor")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        factors = [self.factor(n) if n > 1 else Identity(1) for n in workload.domain.shape]
        A = Kron(factors)
        return _plan_from_strategy(self.name, workload, privacy, A,
                                   {"kind": "kron", "factors": factors})


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
            return _plan_from_strategy(self.name, workload, privacy, marginal,
                                       {"kind": "marginals", "theta": marginal.theta})
        A = workload.matrix
        exact = workload.domain.size <= self.max_sensitivity_cells
        sens = {p: A.sensitivity(p) if exact else A.sensitivity_bound(p) for p in (1, 2)}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy, strategy=A,
                    trace=trace_term(workload, A), sensitivity=sens,
                    details={"kind": "workload", "exact_sensitivity": exact})


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
