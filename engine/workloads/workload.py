"""The workload: a weighted union of query groups over a domain."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from engine import html_tables as html
from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.matrix import Matrix, Sum, VStack
from engine.workloads.blocks import Block
from engine.workloads.groups import Group, Marginals, Product
from engine.workloads.term import Term


@dataclass(frozen=True, eq=False)
class Workload:
    """A union of query groups over ``domain``.

    The implicit matrix is the stack ``[w_1 W_1; ...; w_k W_k]`` over the terms of all
    groups; its Gram is ``sum_j w_j**2 W_j.T W_j``. Nothing here materialises the domain.
    """

    domain: Domain
    groups: tuple[Group, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))
        if not self.groups:
            raise ValueError("workload: needs at least one query group")

    # ----- construction helpers -------------------------------------------------------
    @classmethod
    def product(cls, domain: Domain, blocks: Mapping[str, Block], weight: float = 1.0
                ) -> Workload:
        """A single Kronecker product (omitted attributes are 'total')."""
        return cls(domain, (Product(tuple(blocks.items()), weight=weight),))

    @classmethod
    def one_dim(cls, block: Block, name: str = "x", kind: str = "numeric") -> Workload:
        """A workload of one block over a single attribute of the block's size."""
        domain = Domain.from_sizes([block.shape[1]], [name], [kind])
        return cls.product(domain, {name: block})

    @classmethod
    def marginals(cls, domain: Domain, k: int | None = None, upto: int | None = None,
                  sets: Sequence[Sequence[str]] | None = None) -> Workload:
        """All k-way marginals, all up to ``upto``-way, or the given attribute ``sets``."""
        sets_t = None if sets is None else tuple(tuple(s) for s in sets)
        return cls(domain, (Marginals(k=k, upto=upto, sets=sets_t),))

    # ----- structure ------------------------------------------------------------------
    @cached_property
    def terms(self) -> tuple[Term, ...]:
        """Every term of every group, in spec order."""
        out: list[Term] = []
        for i, g in enumerate(self.groups):
            out.extend(g.terms(self.domain, i))
        return tuple(out)

    @property
    def weights(self) -> np.ndarray:
        """Per-term weights."""
        return np.array([t.weight for t in self.terms], dtype=float)

    @cached_property
    def num_queries(self) -> int:
        """Total number of query rows m."""
        return int(sum(t.num_queries for t in self.terms))

    @property
    def is_product_union(self) -> bool:
        """True when every term is a Kronecker product of per-attribute blocks."""
        return all(t.is_product for t in self.terms)

    def products(self) -> list[tuple[float, tuple[Matrix, ...]]]:
        """``(weight, per-attribute factors over the full domain)`` for every term."""
        if not self.is_product_union:
            bad = next(t.label for t in self.terms if not t.is_product)
            raise NotApplicable(f"term {bad!r} is not a Kronecker product of per-attribute "
                                "queries")
        return [(t.weight, t.full_factors()) for t in self.terms]

    def factor_grams(self) -> list[tuple[float, tuple[np.ndarray, ...]]]:
        """``(weight, per-attribute Gram arrays)`` for every product term (HDMM's V_i^(j))."""
        out = []
        for w, factors in self.products():
            out.append((w, tuple(_gram_array(f) for f in factors)))
        return out

    @cached_property
    def attribute_sets(self) -> tuple[tuple[int, ...], ...]:
        """The attribute subsets (axis tuples) the terms depend on, without repeats."""
        seen: dict[tuple[int, ...], None] = {}
        for t in self.terms:
            seen.setdefault(t.attrs, None)
        return tuple(seen)

    def downward_closure(self) -> tuple[tuple[int, ...], ...]:
        """Every subset of every term's attribute set, smallest first."""
        from itertools import combinations

        closure: set[tuple[int, ...]] = set()
        for s in self.attribute_sets:
            for k in range(len(s) + 1):
                closure.update(combinations(s, k))
        return tuple(sorted(closure, key=lambda s: (len(s), s)))

    # ----- linear algebra -------------------------------------------------------------
    @cached_property
    def matrix(self) -> VStack:
        """The workload as an implicit stacked matrix over the full data vector."""
        return VStack([t.full_matrix() for t in self.terms], self.weights)

    @property
    def shape(self) -> tuple[int, int]:
        """(queries, cells)."""
        return (self.num_queries, self.domain.size)

    def gram(self) -> Sum:
        """``W.T W`` as a weighted sum of per-term Grams over the full domain."""
        return Sum([t.full_matrix().gram() for t in self.terms], self.weights**2)

    def dense(self) -> np.ndarray:
        """The explicit matrix (refused above the size guard)."""
        return self.matrix.dense()

    def fro2(self) -> float:
        """Squared Frobenius norm ``||W||_F**2`` (closed form per term).

        A term's matrix over the full domain repeats each column of its query Q once per cell
        of the attributes outside the term, so it contributes ``||Q||_F**2`` times their size.
        """
        shape = self.domain.shape
        return float(sum(t.weight**2 * t.query.fro2()
                         * math.prod(n for i, n in enumerate(shape) if i not in t.attrs)
                         for t in self.terms))

    def sensitivity(self, p: int) -> float:
        """L1 (p=1) or L2 (p=2) sensitivity of ``x -> W x`` (see ``VStack.sensitivity``)."""
        return self.matrix.sensitivity(p)

    def answer(self, x: np.ndarray) -> np.ndarray:
        """True answers ``W x`` for a data vector in C order."""
        return self.matrix.matvec(np.asarray(x, dtype=float))

    def answer_from_marginals(self, marginal: Callable[[tuple[int, ...]], np.ndarray]
                              ) -> np.ndarray:
        """True answers computed from marginal tensors, never the full data vector.

        Args:
            marginal: returns the count tensor over an axis tuple (domain order).
        """
        cache: dict[tuple[int, ...], np.ndarray] = {}
        parts = []
        for t in self.terms:
            if t.attrs not in cache:
                cache[t.attrs] = marginal(t.attrs)
            parts.append(t.weight * t.answer_marginal(cache[t.attrs]))
        return np.concatenate(parts)

    def split(self, answers: np.ndarray) -> list[np.ndarray]:
        """Cut a stacked answer vector into per-term pieces."""
        return self.matrix.split(answers)

    def query_labels(self, limit: int = 100_000) -> list[str]:
        """Per-query labels ``term[i]`` (only for workloads with at most ``limit`` queries)."""
        if self.num_queries > limit:
            raise ValueError(f"workload has {self.num_queries:,} queries; labels are listed "
                             f"up to {limit:,}")
        return [f"{t.label} [{i}]" for t in self.terms for i in range(t.num_queries)]

    # ----- spec -----------------------------------------------------------------------
    def to_spec(self) -> list[dict[str, Any]]:
        """The ``workload:`` block of a scenario spec."""
        return [g.to_spec() for g in self.groups]

    def describe(self) -> str:
        """One line: queries, cells, terms."""
        return (f"{self.num_queries:,} queries over {self.domain.size:,} cells "
                f"({len(self.terms)} terms)")

    def _repr_html_(self) -> str:
        """The workload in a notebook: its size, its terms, and the matrix when it is small."""
        terms = [(t.label, f"{t.num_queries:,}", f"{t.weight:g}") for t in self.terms[:20]]
        if len(self.terms) > 20:
            terms.append((f"... {len(self.terms) - 20} more terms", "", ""))
        shown = ""
        if self.num_queries <= html.GRID_LIMIT[0] and self.domain.size <= html.GRID_LIMIT[1]:
            shown = html.grid(self.dense(), title="the query matrix: one row per query, one "
                                                  "column per data cell")
        return html.titled(
            f"Workload: {self.describe()}",
            html.table([(a.name, f"{a.size:,}", "numeric" if a.numeric else "categorical")
                        for a in self.domain], header=("attribute", "values", "kind")),
            html.table(terms, header=("term", "queries", "weight")), shown,
            note=f"L1 sensitivity {html.number(self.sensitivity(1))}, L2 sensitivity "
                 f"{html.number(self.sensitivity(2))}: how far one person can move the answers")


def _gram_array(f: Matrix) -> np.ndarray:
    if isinstance(f, Block):
        return f.gram_array()
    return f.gram().dense()
