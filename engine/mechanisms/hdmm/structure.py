"""The union-of-products structure that HDMM's implicit operators optimise over.

A product-union workload ``W = [w_j (W_1j kron ... kron W_dj)]`` enters OPT_kron, OPT_+ and
OPT_M only through its per-attribute factor Grams ``V_ij = W_ij^T W_ij`` (spec section 1.4).
Workloads such as Adult's 470 marginals repeat the same few factors (identity, total, prefix)
hundreds of times, so each attribute keeps its *distinct* Grams once and every product holds
an index into them: memory ``sum_i (#distinct) n_i**2`` instead of ``k sum_i n_i**2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.marginals import factor_pair, is_marginal_like
from engine.linalg.matrix import Matrix
from engine.workloads.blocks import Block
from engine.workloads.workload import Workload


def _factor_key(f: Matrix) -> tuple:
    """Two factors with equal keys have equal Grams."""
    n = f.shape[1]
    if f.is_total():
        return (n, "total")
    if f.is_identity():
        return (n, "identity")
    if isinstance(f, Block):
        return (n, type(f).__name__, repr(f.spec()))
    return (n, "object", id(f))


def _gram(f: Matrix) -> np.ndarray:
    n = f.shape[1]
    if f.is_total():
        return np.ones((n, n))
    if f.is_identity():
        return np.eye(n)
    return f.gram_array() if isinstance(f, Block) else f.gram().dense()


@dataclass(frozen=True, eq=False)
class ProductUnion:
    """Per-attribute distinct factor Grams of a product-union workload.

    Attributes:
        shape: attribute sizes.
        grams: ``grams[i][u]`` is the u-th distinct Gram on attribute i.
        index: ``index[j, i]`` is the Gram of product j on attribute i (k x d ints).
        weights2: squared product weights ``w_j**2`` (length k).
        labels: one label per product.
    """

    shape: tuple[int, ...]
    grams: tuple[tuple[np.ndarray, ...], ...]
    index: np.ndarray
    weights2: np.ndarray
    labels: tuple[str, ...]

    @classmethod
    def of(cls, workload: Workload) -> ProductUnion:
        """Build from a workload; NotApplicable when a term is not a Kronecker product."""
        if not workload.is_product_union:
            bad = next(t.label for t in workload.terms if not t.is_product)
            raise NotApplicable(f"term {bad!r} is not a Kronecker product of per-attribute "
                                "queries (HDMM's implicit operators need products)")
        d = len(workload.domain)
        keys: list[dict[tuple, int]] = [{} for _ in range(d)]
        grams: list[list[np.ndarray]] = [[] for _ in range(d)]
        index = np.zeros((len(workload.terms), d), dtype=np.int64)
        for j, t in enumerate(workload.terms):
            for i, f in enumerate(t.full_factors()):
                key = _factor_key(f)
                u = keys[i].get(key)
                if u is None:
                    u = keys[i][key] = len(grams[i])
                    grams[i].append(_gram(f))
                index[j, i] = u
        return cls(tuple(workload.domain.shape), tuple(tuple(g) for g in grams), index,
                   np.array([t.weight**2 for t in workload.terms], dtype=float),
                   tuple(t.label for t in workload.terms))

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.shape)

    @property
    def k(self) -> int:
        """Number of products."""
        return int(self.index.shape[0])

    def product_grams(self, j: int) -> list[np.ndarray]:
        """The d factor Grams of product j."""
        return [self.grams[i][self.index[j, i]] for i in range(self.d)]

    def subset(self, products: list[int]) -> ProductUnion:
        """The union of some of the products (sharing the Gram arrays)."""
        return ProductUnion(self.shape, self.grams, self.index[products],
                            self.weights2[products], tuple(self.labels[j] for j in products))

    def marginal_like(self, i: int) -> bool:
        """True when every Gram on attribute i is ``alpha I + beta 1`` (identity/total-like)."""
        used = np.unique(self.index[:, i])
        return all(is_marginal_like(self.grams[i][u]) for u in used)

    def surrogate(self, i: int, coefs: np.ndarray) -> np.ndarray:
        """``sum_j coefs_j V_ij``: the Gram OPT_kron optimises attribute i against (Eq. 5)."""
        per_gram = np.bincount(self.index[:, i], weights=coefs, minlength=len(self.grams[i]))
        out = np.zeros((self.shape[i], self.shape[i]))
        for u, c in enumerate(per_gram):
            if c != 0.0:
                out += c * self.grams[i][u]
        return out

    @cached_property
    def marginal_weights(self) -> np.ndarray:
        """Thm. 10: ``w`` with ``tr[G(u) W^T W] = tr[G(u) G(w)]`` for every marginal Gram.

        ``w = sum_j w_j**2 kron_i [beta_ij, alpha_ij]`` where ``alpha I + beta 1`` matches
        the trace and sum of ``V_ij``; attribute 1 is the most significant bit.
        """
        pairs = [[np.array(factor_pair(g)) for g in gs] for gs in self.grams]
        w = np.zeros(2**self.d)
        for j in range(self.k):
            vec = np.array([self.weights2[j]])
            for i in range(self.d):
                vec = np.kron(vec, pairs[i][self.index[j, i]])
            w += vec
        return w

    @cached_property
    def cells(self) -> int:
        """Domain size ``prod n_i`` (exact)."""
        return math.prod(self.shape)
