"""Query groups: the items of a workload spec, each expanding into one or more terms."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from engine.domain import Domain
from engine.linalg.matrix import Dense, Kron, Matrix
from engine.workloads.blocks import Block, IdentityBlock, PrefixBlock, random_predicates
from engine.workloads.term import Term

Subset = tuple[str, ...]


def _block_label(block: Matrix) -> str:
    spec = block.spec() if isinstance(block, Block) else "matrix"
    return spec if isinstance(spec, str) else spec.get("block", "matrix")


@dataclass(frozen=True)
class Group:
    """Base of the query groups; ``weight`` scales every query of the group."""

    weight: float = field(default=1.0, kw_only=True)

    kind: ClassVar[str] = ""

    def terms(self, domain: Domain, index: int) -> list[Term]:
        """Expand into terms over ``domain``; ``index`` is the group's position."""
        raise NotImplementedError(type(self).__name__ + " must define terms")

    def body(self) -> Any:
        """The value under the group's kind key in the spec."""
        raise NotImplementedError(type(self).__name__ + " must define body")

    def to_spec(self) -> dict[str, Any]:
        """The group as a workload-spec item."""
        spec: dict[str, Any] = {self.kind: self.body()}
        if self.weight != 1.0:
            spec["weight"] = self.weight
        return spec


def _product_term(domain: Domain, blocks: dict[str, Matrix], weight: float, group: int,
                  label: str | None = None) -> Term:
    names = domain.sorted_names(blocks)
    attrs = domain.indices(names)
    factors = tuple(blocks[n] for n in names)
    query = Kron(factors) if factors else Dense(np.ones((1, 1)))
    if label is None:
        label = " x ".join(f"{_block_label(blocks[n])}({n})" for n in names) or "total"
    return Term(domain, attrs, query, factors, weight, label, group)


@dataclass(frozen=True)
class Product(Group):
    """A Kronecker product of per-attribute blocks; omitted attributes are 'total'."""

    blocks: tuple[tuple[str, Block], ...] = ()
    kind: ClassVar[str] = "product"

    def terms(self, domain: Domain, index: int) -> list[Term]:
        return [_product_term(domain, dict(self.blocks), self.weight, index)]

    def body(self) -> Any:
        return {name: block.spec() for name, block in self.blocks}


def subsets_of(domain: Domain, k: int | None, upto: int | None,
               sets: tuple[Subset, ...] | None) -> list[Subset]:
    """Attribute subsets for a marginals group, smallest first, each in domain order."""
    if sets is not None:
        return [domain.sorted_names(s) for s in sets]
    sizes = [k] if k is not None else list(range(0, (upto or 0) + 1))
    out: list[Subset] = []
    for size in sizes:
        out.extend(itertools.combinations(domain.names, size))
    return out


@dataclass(frozen=True)
class Marginals(Group):
    """Marginal tables: all k-way (``k``), all up to ``upto``-way, or explicit ``sets``."""

    k: int | None = None
    upto: int | None = None
    sets: tuple[Subset, ...] | None = None
    kind: ClassVar[str] = "marginals"

    def block_for(self, domain: Domain, name: str) -> Block:
        """The block a marginal puts on one of its attributes."""
        return IdentityBlock(domain[name].size)

    def terms(self, domain: Domain, index: int) -> list[Term]:
        out = []
        for subset in subsets_of(domain, self.k, self.upto, self.sets):
            blocks = {n: self.block_for(domain, n) for n in subset}
            label = ("marginal(" + ", ".join(subset) + ")") if subset else "total"
            out.append(_product_term(domain, blocks, self.weight, index, label))
        return out

    def body(self) -> Any:
        if self.sets is not None:
            return {"sets": [list(s) for s in self.sets]}
        return {"k": self.k} if self.k is not None else {"upto": self.upto}


@dataclass(frozen=True)
class PrefixMarginals(Marginals):
    """Marginals whose numeric attributes use prefix (CDF) queries instead of identity."""

    kind: ClassVar[str] = "prefix_marginals"

    def block_for(self, domain: Domain, name: str) -> Block:
        attr = domain[name]
        return PrefixBlock(attr.size) if attr.numeric else IdentityBlock(attr.size)


def pair_query_matrix(kind: str, na: int, nb: int) -> np.ndarray:
    """Rows over the (a, b) marginal: ``a + b <= c`` (affine) or ``|a - b| <= c`` (abs_diff),
    one row per threshold c that is not trivially empty or repeated."""
    a, b = np.meshgrid(np.arange(na), np.arange(nb), indexing="ij")
    stat = (a + b) if kind == "affine" else np.abs(a - b)
    thresholds = np.arange(int(stat.max()) + 1)
    return (stat.reshape(1, -1) <= thresholds[:, None]).astype(float)


@dataclass(frozen=True)
class PairQueries(Group):
    """Threshold queries on a statistic of two attributes (``affine`` or ``abs_diff``)."""

    attrs: Subset = ()
    pair_kind: str = "affine"

    @property
    def kind(self) -> str:  # type: ignore[override]  # depends on the instance
        return self.pair_kind

    def terms(self, domain: Domain, index: int) -> list[Term]:
        a, b = self.attrs
        ia, ib = domain.index(a), domain.index(b)
        rows = pair_query_matrix(self.pair_kind, domain[a].size, domain[b].size)
        if ia > ib:  # the marginal is in domain order: transpose the (a, b) grid
            rows = rows.reshape(-1, domain[a].size, domain[b].size).transpose(0, 2, 1)
            rows = rows.reshape(rows.shape[0], -1)
        symbol = "+" if self.pair_kind == "affine" else "-"
        label = f"{a} {symbol} {b} <= c" if symbol == "+" else f"|{a} - {b}| <= c"
        return [Term(domain, tuple(sorted((ia, ib))), Dense(rows), None, self.weight, label,
                     index)]

    def body(self) -> Any:
        return list(self.attrs)


@dataclass(frozen=True)
class SubsetMatrix(Group):
    """Explicit rows over the marginal of ``on`` (C order, attributes in the given order),
    or ``count`` random predicates over it."""

    on: Subset = ()
    rows: tuple[tuple[float, ...], ...] | None = None
    count: int | None = None
    p: float = 0.5
    seed: int = 0

    @property
    def kind(self) -> str:  # type: ignore[override]  # depends on the instance
        return "matrix" if self.rows is not None else "random"

    def matrix(self, domain: Domain) -> np.ndarray:
        """The rows over the marginal of ``on`` in the order the user gave."""
        cells = int(np.prod([domain[n].size for n in self.on]))
        if self.rows is not None:
            return np.asarray(self.rows, dtype=float)
        return random_predicates(cells, int(self.count or 0), self.p, self.seed)

    def terms(self, domain: Domain, index: int) -> list[Term]:
        rows = self.matrix(domain)
        order = domain.indices(self.on)
        sizes = [domain[n].size for n in self.on]
        perm = np.argsort(order)
        rows = rows.reshape([-1] + sizes).transpose([0] + [1 + int(i) for i in perm])
        rows = rows.reshape(rows.shape[0], -1)
        label = f"{self.kind}({', '.join(self.on)})"
        return [Term(domain, tuple(sorted(order)), Dense(rows), None, self.weight, label,
                     index)]

    def body(self) -> Any:
        if self.rows is not None:
            return {"on": list(self.on), "rows": [list(r) for r in self.rows]}
        return {"on": list(self.on), "count": self.count, "p": self.p, "seed": self.seed}
