"""A term of a workload: one set of queries that touches only some attributes.

A term's queries are ``Q @ marginal_S(x)``: a matrix ``Q`` applied to the marginal of the data
over an attribute subset S (attributes outside S enter as 'total'). When Q is a Kronecker
product of per-attribute blocks (a *product* term), the full-domain matrix is the Kronecker
product of those blocks with Total on the other attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.domain import Domain
from engine.linalg.matrix import Kron, Matrix, Ones


@dataclass(frozen=True, eq=False)
class Term:
    """Queries ``weight * Q`` over the marginal on ``attrs`` (axis indices, domain order).

    Attributes:
        domain: the full domain.
        attrs: axes of the attributes the queries depend on (sorted).
        query: the matrix Q acting on the C-ordered marginal over ``attrs``.
        factors: per-attribute blocks (one per attribute in ``attrs``) when Q is their
            Kronecker product, else None.
        weight: the term's weight (its queries count weight**2 in squared error).
        label: a short human-readable name.
        group: index of the workload group the term came from.
    """

    domain: Domain
    attrs: tuple[int, ...]
    query: Matrix
    factors: tuple[Matrix, ...] | None
    weight: float = 1.0
    label: str = ""
    group: int = 0

    @property
    def num_queries(self) -> int:
        """Number of query rows."""
        return self.query.shape[0]

    @cached_property
    def marginal_shape(self) -> tuple[int, ...]:
        """Sizes of the attributes in ``attrs``."""
        return tuple(self.domain.shape[i] for i in self.attrs)

    @property
    def is_product(self) -> bool:
        """True when the queries are a Kronecker product of per-attribute blocks."""
        return self.factors is not None

    def full_factors(self) -> tuple[Matrix, ...]:
        """Per-attribute factors over the whole domain (Total outside ``attrs``)."""
        if self.factors is None:
            raise ValueError(f"term {self.label!r} is not a Kronecker product")
        out: list[Matrix] = []
        it = iter(self.factors)
        for i, n in enumerate(self.domain.shape):
            out.append(next(it) if i in self.attrs else Ones(1, n))
        return tuple(out)

    def full_matrix(self) -> Matrix:
        """The term's (unweighted) matrix over the full data vector."""
        if self.factors is not None:
            return Kron(self.full_factors())
        return MarginalQuery(self.domain.shape, self.attrs, self.query)

    def answer_marginal(self, marginal: np.ndarray) -> np.ndarray:
        """Unweighted answers from the data's marginal tensor over ``attrs``."""
        return self.query.matvec(np.asarray(marginal, dtype=float).reshape(-1))

    def gram_on_attrs(self) -> Matrix:
        """``Q.T @ Q`` over the marginal (a Kronecker product for product terms)."""
        if self.factors is not None:
            return Kron([f.gram() for f in self.factors]) if self.factors else Ones(1, 1)
        return self.query.gram()


class MarginalQuery(Matrix):
    """``Q @ marginal_S(x)`` as a matrix over the full data vector (C order)."""

    def __init__(self, shape: tuple[int, ...], attrs: tuple[int, ...], query: Matrix) -> None:
        self.domain_shape, self.attrs, self.query = tuple(shape), tuple(attrs), query
        self.others = tuple(i for i in range(len(shape)) if i not in attrs)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.query.shape[0], math.prod(self.domain_shape))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        batch = x.shape[1:] if x.ndim == 2 else ()
        t = x.reshape(self.domain_shape + batch).sum(axis=self.others)
        return self.query.matvec(t.reshape((-1,) + batch))

    def column_norms(self, p: int) -> np.ndarray:
        # a cell's column is the query's column of the marginal cell it falls in
        marginal = tuple(self.domain_shape[i] for i in self.attrs)
        c = np.expand_dims(self.query.column_norms(p).reshape(marginal), self.others)
        return np.broadcast_to(c, self.domain_shape).reshape(-1)

    def sensitivity(self, p: int) -> float:
        return self.query.sensitivity(p)

    def fro2(self) -> float:
        return self.query.fro2() * math.prod(self.domain_shape[i] for i in self.others)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        batch = y.shape[1:] if y.ndim == 2 else ()
        t = self.query.rmatvec(y).reshape(tuple(self.domain_shape[i] for i in self.attrs)
                                          + batch)
        expanded = np.expand_dims(t, self.others)
        full = np.broadcast_to(expanded, self.domain_shape + batch)
        return np.ascontiguousarray(full).reshape((-1,) + batch)
