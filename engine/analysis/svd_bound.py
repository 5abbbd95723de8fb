"""The SVD lower bound on the error of any matrix mechanism (HDMM Def. 11, Thm. 5, Thm. 12).

``SVDB(W) = (tr (W^T W)^(1/2))**2 / n`` bounds ``||A||**2 tr[(A^T A)^+ W^T W]`` from below
for every strategy A that supports W, in both the L2 and (more loosely) the L1 norm. As an RMSE
at a privacy level: ``sigma * sqrt(SVDB / m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.analysis.expected_error import EXPLICIT_LIMIT
from engine.linalg.marginals import factor_pair, is_marginal_like, marginal_svd_bound
from engine.linalg.matrix import Identity, Matrix, Ones
from engine.linalg.pinv import psd_sqrt_trace
from engine.privacy import Privacy, budget_for_rmse
from engine.workloads.blocks import Block
from engine.workloads.workload import Workload

#: Largest single attribute whose Gram is eigendecomposed for a Kronecker bound.
FACTOR_LIMIT = 16384
#: Most entries (products x 2**attributes) of the marginal-weight sums of Thm. 10: the
#: closed form builds a 2**d vector per product.
MARGINAL_WEIGHT_LIMIT = 50_000_000


@dataclass(frozen=True)
class Bound:
    """An SVD bound: ``value`` (unit-noise, in squared-sensitivity units) or why there is none."""

    value: float | None
    method: str
    reason: str = ""

    def rmse(self, workload: Workload, privacy: Privacy) -> float | None:
        """The bound as an RMSE at ``privacy`` (None when not computable)."""
        if self.value is None:
            return None
        return privacy.sigma() * math.sqrt(self.value / workload.num_queries)

    def budget_for_rmse(self, workload: Workload, target: float, privacy: Privacy
                        ) -> float | None:
        """The smallest eps (or rho for zcdp) at which the bound's RMSE is ``target``: no
        mechanism of this kind reaches the target with less (None when not computable)."""
        if self.value is None:
            return None
        return budget_for_rmse(privacy, target, math.sqrt(self.value / workload.num_queries))


def svd_bound_explicit(V: np.ndarray) -> float:
    """``(tr V^(1/2))**2 / n`` for an explicit n x n Gram V."""
    return psd_sqrt_trace(V) ** 2 / V.shape[0]


def svd_bound_factor(block: Matrix) -> float:
    """``SVDB`` of one Kronecker factor from the eigenvalues of its Gram (closed forms for the
    1-D blocks that have them: all-range, prefix, circular, ...)."""
    n = block.shape[1]
    if isinstance(block, Block):
        lam = block.gram_eigenvalues()
    elif isinstance(block, Identity):
        lam = np.ones(n)
    elif isinstance(block, Ones):  # m rows of ones: one eigenvalue m n, the rest zero
        lam = np.zeros(n)
        lam[-1] = block.m * n
    else:
        lam = np.linalg.eigvalsh(block.gram().dense())
    # round-off "zeros" would add sqrt(eps) each to an SVD *lower* bound: drop them
    tol = 10.0 * n * np.finfo(float).eps * max(float(lam.max(initial=0.0)), 0.0)
    return float(np.sqrt(np.where(lam > tol, lam, 0.0)).sum() ** 2 / n)


def _marginal_like(block: Matrix) -> bool:
    """True when the factor's Gram is ``alpha I + beta 1`` (Thm. 10 loses nothing on it)."""
    if isinstance(block, Identity) or (isinstance(block, Ones) and block.m == 1):
        return True
    if block.shape[1] > FACTOR_LIMIT:  # deciding would allocate over the attribute
        return False
    # a cheap necessary condition first: such a Gram has a constant diagonal
    diag = block.column_norms(2)
    if diag.size > 1 and not np.allclose(diag, diag[0], rtol=1e-12, atol=0.0):
        return False
    return is_marginal_like(block.gram_array() if isinstance(block, Block)
                            else block.gram().dense())


def _gram_of(block: Matrix) -> np.ndarray:
    return block.gram_array() if isinstance(block, Block) else block.gram().dense()


#: Largest attribute whose factor Grams are compared entry by entry.
COMPARE_LIMIT = 2048


def _same_gram(a: Matrix, b: Matrix) -> bool:
    """True when two factors certainly have the same Gram (False when unsure)."""
    if a is b:
        return True
    if a.shape[1] != b.shape[1]:
        return False
    if isinstance(a, Block) and type(a) is type(b) and a.spec() == b.spec():
        return True
    if a.is_total() and b.is_total():
        return True
    return a.shape[1] <= COMPARE_LIMIT and bool(np.array_equal(_gram_of(a), _gram_of(b)))


def _shared_attributes(products: list[tuple[float, tuple[Matrix, ...]]], d: int
                       ) -> list[int]:
    """Attributes on which every product has a factor with the same Gram."""
    return [i for i in range(d)
            if all(_same_gram(products[0][1][i], fs[i]) for _, fs in products[1:])]


def _pair(block: Matrix) -> tuple[float, float]:
    """``(beta, alpha)`` of a marginal-like factor (Thm. 10), without a Gram for I and T."""
    n = block.shape[1]
    if n > 1 and isinstance(block, Identity):
        return 0.0, 1.0
    if n > 1 and isinstance(block, Ones) and block.m == 1:
        return 1.0, 0.0
    return factor_pair(_gram_of(block))


def _marginal_weights(weights: list[float], factors: list[list[Matrix]]) -> np.ndarray:
    """Thm. 10 weights ``w`` of a union of marginal-like products."""
    w = None
    for weight, fs in zip(weights, factors, strict=True):
        vec = np.array([weight**2])
        for f in fs:
            vec = np.kron(vec, _pair(f))
        w = vec if w is None else w + vec
    return w


def _product_union_bound(workload: Workload) -> Bound | None:
    """Thm. 5 generalised: ``W^T W = (sum_j w_j^2 kron_R V_ij) kron (kron_S V_i)`` when the
    products share their factors on the attributes S, so the bound is the product of the
    shared factors' bounds and the bound of the union over the other attributes R (closed
    form for marginal-like factors, explicit when R is small)."""
    domain = workload.domain
    products = workload.products()
    weights = [w for w, _ in products]
    if all(_marginal_like(f) for _, fs in products for f in fs):
        work = len(products) * 2.0 ** len(domain)
        if work > MARGINAL_WEIGHT_LIMIT:
            return Bound(None, "none", f"the marginal closed form needs {len(products):,} "
                                       f"weight vectors of 2**{len(domain)} entries (limit "
                                       f"{MARGINAL_WEIGHT_LIMIT:,} entries in all)")
        w = _marginal_weights(weights, [list(fs) for _, fs in products])
        return Bound(marginal_svd_bound(w, domain.shape), "marginals")
    if max(domain.shape) > FACTOR_LIMIT:
        return None
    shared = _shared_attributes(products, len(domain))
    rest = [i for i in range(len(domain)) if i not in shared]
    value = math.prod(svd_bound_factor(products[0][1][i]) for i in shared)
    weights2 = np.array([w**2 for w, _ in products])
    if not rest:
        return Bound(float(weights2.sum() * value), "kronecker")
    rest_factors = [[fs[i] for i in rest] for _, fs in products]
    rest_shape = tuple(domain.shape[i] for i in rest)
    if len(products) * 2.0 ** len(rest) <= MARGINAL_WEIGHT_LIMIT and all(
            _marginal_like(f) for fs in rest_factors for f in fs):
        value *= marginal_svd_bound(_marginal_weights(weights, rest_factors), rest_shape)
        return Bound(value, "kronecker-marginals")
    if shared and math.prod(rest_shape) <= EXPLICIT_LIMIT:
        V = sum(w2 * _kron_all([_gram_of(f) for f in fs])
                for w2, fs in zip(weights2, rest_factors, strict=True))
        return Bound(value * svd_bound_explicit(V), "kronecker-explicit")
    return None


def _kron_all(arrays: list[np.ndarray]) -> np.ndarray:
    out = np.ones((1, 1))
    for a in arrays:
        out = np.kron(out, a)
    return out


def svd_bound(workload: Workload) -> Bound:
    """The SVD bound of a workload, using its structure where it has one.

    * marginal-like workloads (every factor is identity/total-like): closed form (Thm. 12,
      corrected multiplicities);
    * a single Kronecker product: the product of per-attribute bounds (Thm. 5), from closed-form
      eigenvalues of the 1-D blocks;
    * a union of products that share their factors on some attributes and are marginal-like
      (or small) on the others, e.g. prefix-marginals ``P x P x marginals``: the product of
      the two bounds;
    * any workload on at most ``EXPLICIT_LIMIT`` cells: eigenvalues of the explicit Gram;
    * otherwise: no bound (``value=None``) with the reason.
    """
    domain = workload.domain
    if workload.is_product_union:
        bound = _product_union_bound(workload)
        if bound is not None:
            return bound
    if domain.size <= EXPLICIT_LIMIT:
        return Bound(svd_bound_explicit(workload.gram().dense()), "explicit")
    return Bound(None, "none", f"no closed form for this union of {len(workload.terms)} terms "
                               f"and the domain ({domain.size:,} cells) is too large for an "
                               f"explicit eigendecomposition (limit {EXPLICIT_LIMIT:,})")
