"""The SVD lower bound on the error of any matrix mechanism (HDMM Def. 11, Thm. 5, Thm. 12).

``SVDB(W) = (tr (W^T W)^(1/2))**2 / n`` bounds ``||A||**2 tr[(A^T A)^+ W^T W]`` from below
for every strategy A that supports W, in both the L2 and (more loosely) the L1 norm. As an RMSE
at a privacy level: ``sigma * sqrt(SVDB / m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.analysis.block_spectrum import (
    BlockTooLargeError,
    factor_key,
    gram_of,
    is_marginal_factor,
    marginal_pair,
    union_sqrt_trace,
)
from engine.analysis.cost_model import FLOAT, format_bytes, memory_limit
from engine.analysis.expected_error import EXPLICIT_LIMIT
from engine.analysis.svd_bound_spectra import (
    DENSE_COPIES,
    FACTOR_LIMIT,
    nuclear_norm,
    spectrum_refusal,
)
from engine.domain import Domain
from engine.linalg.marginals import marginal_svd_bound
from engine.linalg.matrix import Matrix
from engine.linalg.pinv import psd_sqrt_trace
from engine.privacy import Privacy, budget_for_rmse
from engine.workloads.workload import Workload

#: ``(weight, per-attribute factors)`` of every term of a union of Kronecker products.
Products = list[tuple[float, tuple[Matrix, ...]]]

#: Most entries (products x 2**attributes) of the marginal-weight sums of Thm. 10: the
#: closed form builds a 2**d vector per product.
MARGINAL_WEIGHT_LIMIT = 50_000_000
#: Largest side of one block's dense eigendecomposition (about 2.5 s at 2,048 on one core of
#: the 2-core benchmark machine); the memory budget may lower it (:func:`dense_side_limit`).
DENSE_SIDE_LIMIT = 2048


@dataclass(frozen=True)
class Bound:
    """An SVD bound: ``value`` (unit-noise, in squared-sensitivity units) or why there is none.

    ``floor_parts`` is set when ``value`` is a certified floor rather than the exact bound:
    it partitions the term indices into sub-workloads, and ``value`` is the sum of their exact
    bounds (see :func:`svd_bound`), never above the whole workload's exact bound.
    """

    value: float | None
    method: str
    reason: str = ""
    floor_parts: tuple[tuple[int, ...], ...] | None = None

    @property
    def kind(self) -> str:
        """``"exact"`` (the SVD bound itself), ``"floor"`` (a certified lower bound on it:
        the exact bound of a sub-workload) or ``"none"`` (no value)."""
        if self.value is None:
            return "none"
        return "exact" if self.floor_parts is None else "floor"

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
    """``SVDB = (sum sigma)**2 / n`` of one Kronecker factor: closed forms for the 1-D blocks
    that have them (prefix, all-range, ...: any n up to ``SPECTRUM_LIMIT``, no n x n matrix
    formed), else from its Gram's eigenvalues (engine.analysis.svd_bound_spectra).

    Raises:
        ValueError: when the spectrum is not computed (too large, or over the memory budget).
    """
    return nuclear_norm(block) ** 2 / block.shape[1]


def _marginal_like(block: Matrix) -> bool:
    """True when the factor's Gram is ``alpha I + beta 1`` (Thm. 10 loses nothing on it)."""
    return block.shape[1] <= FACTOR_LIMIT and is_marginal_factor(block)


#: Largest attribute whose factor Grams are compared entry by entry.
COMPARE_LIMIT = 2048


def _same_gram(a: Matrix, b: Matrix) -> bool:
    """True when two factors certainly have the same Gram (False when unsure)."""
    if a is b:
        return True
    if a.shape[1] != b.shape[1]:
        return False
    if factor_key(a) == factor_key(b):
        return True
    if a.is_total() and b.is_total():
        return True
    return a.shape[1] <= COMPARE_LIMIT and bool(np.array_equal(gram_of(a), gram_of(b)))


def _shared_attributes(products: Products, d: int) -> list[int]:
    """Attributes on which every product has a factor with the same Gram."""
    return [i for i in range(d)
            if all(_same_gram(products[0][1][i], fs[i]) for _, fs in products[1:])]


def _marginal_weights(weights: list[float], factors: list[list[Matrix]]) -> np.ndarray:
    """Thm. 10 weights ``w`` of a union of marginal-like products."""
    w = None
    for weight, fs in zip(weights, factors, strict=True):
        vec = np.array([weight**2])
        for f in fs:
            vec = np.kron(vec, marginal_pair(f))
        w = vec if w is None else w + vec
    return w


def dense_side_limit() -> int:
    """Largest matrix side eigendecomposed for one block of a union: ``DENSE_SIDE_LIMIT``, or
    less when three n x n float64 copies would exceed the memory budget (cost_model)."""
    return int(min(DENSE_SIDE_LIMIT, math.isqrt(int(memory_limit() / (DENSE_COPIES * FLOAT)))))


def _product_union_bound(domain: Domain, products: Products, dense_limit: int,
                         check_only: bool = False) -> Bound | None:
    """Thm. 5 generalised: ``W^T W = (sum_j w_j^2 kron_R V_ij) kron (kron_S V_i)`` when the
    products share their factors on the attributes S, so the bound is the product of the
    shared factors' bounds and the bound of the union over the other attributes R (closed
    form for marginal-like factors, else block by block: engine.analysis.block_spectrum).
    With ``check_only``, only whether it fits (the value is then meaningless).

    Raises:
        BlockTooLargeError: when a block of the union over R is too large to eigendecompose.
    """
    weights = [w for w, _ in products]
    if all(_marginal_like(f) for _, fs in products for f in fs):
        work = len(products) * 2.0 ** len(domain)
        if work > MARGINAL_WEIGHT_LIMIT:
            return Bound(None, "none", f"the marginal closed form needs {len(products):,} "
                                       f"weight vectors of 2**{len(domain)} entries (limit "
                                       f"{MARGINAL_WEIGHT_LIMIT:,} entries in all)")
        w = _marginal_weights(weights, [list(fs) for _, fs in products])
        return Bound(marginal_svd_bound(w, domain.shape), "marginals")
    shared = _shared_attributes(products, len(domain))
    rest = [i for i in range(len(domain)) if i not in shared]
    for i in shared:
        refusal = spectrum_refusal(products[0][1][i], f"attribute {domain.names[i]!r}")
        if refusal:
            return Bound(None, "none", refusal)
    value = 1.0 if check_only else math.prod(svd_bound_factor(products[0][1][i])
                                               for i in shared)
    weights2 = np.array([w**2 for w in weights])
    if not rest:
        return Bound(float(weights2.sum() * value), "kronecker")
    rest_factors = [[fs[i] for i in rest] for _, fs in products]
    rest_shape = tuple(domain.shape[i] for i in rest)
    if len(products) * 2.0 ** len(rest) <= MARGINAL_WEIGHT_LIMIT and all(
            _marginal_like(f) for fs in rest_factors for f in fs):
        value *= marginal_svd_bound(_marginal_weights(weights, rest_factors), rest_shape)
        return Bound(value, "kronecker-marginals")
    nuclear = union_sqrt_trace(weights, rest_factors, dense_limit, check_only)
    return Bound(value * nuclear**2 / math.prod(rest_shape), "kronecker-blocks")


def _fits(domain: Domain, products: Products, dense_limit: int) -> bool:
    try:
        bound = _product_union_bound(domain, products, dense_limit, check_only=True)
    except BlockTooLargeError:
        return False
    return bound is not None and bound.value is not None


def _certified_floor(domain: Domain, products: Products, dense_limit: int, why: str) -> Bound:
    """A certified floor when the exact bound does not fit: the sum of the exact bounds of
    sub-workloads that partition the terms.

    ``X -> tr X^(1/2)`` is concave and homogeneous of degree 1/2 on PSD matrices, so for
    ``W^T W = sum_g G_g``: ``tr (sum_g G_g)^(1/2) >= sqrt(sum_g (tr G_g^(1/2))**2)``, i.e.
    ``SVDB(W) >= sum_g SVDB(W_g)`` for any partition of W's rows into sub-workloads ``W_g``
    (with one part it is interlacing: a sub-workload's bound is a floor). The partition is
    greedy (:func:`_floor_parts`), once with parts that fit ``dense_limit`` and once with parts
    that fit half of it; the larger sum is returned (both are certified; which one is larger
    depends on the workload: 1.6x apart on Adult's prefix-marginals, equal on Loans').
    """
    best: tuple[float, list[list[int]]] | None = None
    for limit in (dense_limit, max(dense_limit // 2, 1)):
        parts = _floor_parts(domain, products, limit)
        value = 0.0
        for part in parts:
            sub = _product_union_bound(domain, [products[j] for j in part], dense_limit)
            if sub is None or sub.value is None:
                return Bound(None, "none", f"{why}, and a part of it has no bound either")
            value += sub.value
        if best is None or value > best[0]:
            best = (value, parts)
    assert best is not None
    value, parts = best

    def queries(part: list[int]) -> int:
        return sum(math.prod(f.shape[0] for f in products[j][1]) for j in part)

    largest = max(parts, key=queries)
    return Bound(value, "kronecker-blocks",
                 f"a certified floor, not the exact bound: {why}; it is the sum of the exact "
                 f"bounds of {len(parts)} parts of the workload (the largest: "
                 f"{len(largest)} of the {len(products)} terms, {queries(largest):,} of "
                 f"{queries(list(range(len(products)))):,} queries), which the bound of the "
                 "whole workload is never below",
                 floor_parts=tuple(tuple(p) for p in parts))


def _floor_parts(domain: Domain, products: Products, limit: int) -> list[list[int]]:
    """A partition of the terms into sub-workloads whose exact bounds fit ``limit``: terms
    grouped by their factors on the attributes that are not marginal-like; then, group with
    the most queries first, every group that still fits is merged into the first part (the
    largest computable sub-workload found this way); a group that does not fit alone is split
    into single terms (closed form)."""
    free = [i for i in range(len(domain))
            if not all(_marginal_like(fs[i]) for _, fs in products)]
    groups: dict[tuple, list[int]] = {}
    for j, (_, fs) in enumerate(products):
        groups.setdefault(tuple(factor_key(fs[i]) for i in free), []).append(j)

    def queries(part: list[int]) -> int:
        return sum(math.prod(f.shape[0] for f in products[j][1]) for j in part)

    def fits(part: list[int]) -> bool:
        return _fits(domain, [products[j] for j in part], limit)

    parts: list[list[int]] = []
    for group in sorted(groups.values(), key=lambda g: (-queries(g), g[0])):
        if parts and fits(sorted(parts[0] + group)):
            parts[0] = sorted(parts[0] + group)
        elif fits(group):
            parts.append(group)
        else:
            parts.extend([j] for j in group)
    return parts


def svd_bound(workload: Workload, *, dense_limit: int | None = None) -> Bound:
    """The SVD bound of a workload, using its structure where it has one.

    * marginal-like workloads (every factor is identity/total-like): closed form (Thm. 12,
      corrected multiplicities);
    * a single Kronecker product: the product of per-attribute bounds (Thm. 5), from closed-form
      eigenvalues of the 1-D blocks;
    * a union of products that share their factors on some attributes and are marginal-like
      on the others, e.g. prefix-marginals ``P x P x marginals``: the product of the two bounds;
    * any other union of products: exactly, block by block (engine.analysis.block_spectrum);
      when a block is too large on both sides for ``dense_limit`` (default
      :func:`dense_side_limit`), a certified floor: the sum of the exact bounds of
      sub-workloads that partition the terms (``kind == "floor"``, the parts in
      ``floor_parts``; see ``_certified_floor``);
    * any workload on at most ``EXPLICIT_LIMIT`` cells: eigenvalues of the explicit Gram
      (when three copies fit the memory budget);
    * otherwise: no bound (``value=None``) with the reason.
    """
    domain = workload.domain
    limit = dense_side_limit() if dense_limit is None else dense_limit
    if workload.is_product_union:
        products = workload.products()
        try:
            bound = _product_union_bound(domain, products, limit)
        except BlockTooLargeError as exc:
            bound = _certified_floor(domain, products, limit, str(exc))
        if bound is not None and (bound.value is not None or domain.size > EXPLICIT_LIMIT):
            return bound
    if domain.size <= EXPLICIT_LIMIT:
        need = DENSE_COPIES * FLOAT * float(domain.size) ** 2
        if need > memory_limit():
            return Bound(None, "none", f"the explicit eigendecomposition needs "
                                       f"{format_bytes(need)}; the memory limit is "
                                       f"{format_bytes(memory_limit())}")
        return Bound(svd_bound_explicit(workload.gram().dense()), "explicit")
    return Bound(None, "none", f"no closed form for this union of {len(workload.terms)} terms "
                               f"and the domain ({domain.size:,} cells) is too large for an "
                               f"explicit eigendecomposition (limit {EXPLICIT_LIMIT:,})")
