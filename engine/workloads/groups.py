"""Query groups: the items of a workload spec, each expanding into one or more terms.

Each group class parses its spec body (``from_body``) and writes it back (``body``); the
registry :data:`GROUPS` maps every group kind of the spec to its class, and
:meth:`Group.from_spec` dispatches one workload item through it.

Example:
    >>> from engine.domain import Domain
    >>> Group.from_spec({"marginals": {"k": 1}}, Domain.from_spec({"a": 2, "b": 3}), 0)
    Marginals(weight=1.0, k=1, upto=None, sets=None)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from engine.domain import Domain
from engine.errors import SpecError, suggest
from engine.linalg.matrix import Dense, Kron, Matrix
from engine.workloads.blocks import Block, IdentityBlock, PrefixBlock, random_predicates
from engine.workloads.fields import check_keys, explicit_rows, integer, number, row_array
from engine.workloads.term import Term

Subset = tuple[str, ...]

#: Largest number of explicit cells a random/matrix group may span.
MAX_EXPLICIT_CELLS = 1_000_000


def _block_label(block: Matrix) -> str:
    spec = block.spec() if isinstance(block, Block) else "matrix"
    return spec if isinstance(spec, str) else spec.get("block", "matrix")


@dataclass(frozen=True)
class Group:
    """Base of the query groups; ``weight`` scales every query of the group."""

    weight: float = field(default=1.0, kw_only=True)

    kind: ClassVar[str] = ""
    #: The spec kinds this class reads, each with one plain line on what it asks.
    kinds: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_spec(cls, spec: Any, domain: Domain, index: int) -> Group:
        """Parse item ``index`` of the ``workload:`` list, dispatching on its kind.

        Raises:
            SpecError: one line naming the field, e.g. ``workload[0].prodct: unknown group
                kind (did you mean 'product'?); allowed: ...``.
        """
        where = f"workload[{index}]"
        names = tuple(GROUPS)
        if not isinstance(spec, Mapping):
            raise SpecError(f"{where}: expected a mapping such as {{product: {{...}}}}")
        given = [k for k in spec if k != "weight"]
        if len(given) != 1:
            if not given:
                raise SpecError(f"{where}: missing the group kind (one of {', '.join(names)})")
            extra = [k for k in given if k not in GROUPS]
            if extra:
                k = str(extra[0])
                raise SpecError(f"{where}.{k}: unknown key{suggest(k, names + ('weight',))}")
            raise SpecError(f"{where}: one group kind per item, got {', '.join(map(str, given))}")
        kind = str(given[0])
        if kind not in GROUPS:
            raise SpecError(f"{where}.{kind}: unknown group kind{suggest(kind, names)}; "
                            f"allowed: {', '.join(names)}")
        weight = number(spec.get("weight", 1.0), f"{where}.weight", 0.0, open_lo=True)
        return GROUPS[kind].from_body(kind, spec[kind], domain, f"{where}.{kind}", weight)

    @classmethod
    def from_body(cls, kind: str, body: Any, domain: Domain, where: str,
                  weight: float) -> Group:
        """The group from the value under its ``kind`` key (``where`` names that field)."""
        raise NotImplementedError(cls.__name__ + " must define from_body")

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
    kinds: ClassVar[dict[str, str]] = {
        "product": "one block per attribute, combined: e.g. the age CDF for each sex"}

    @classmethod
    def from_body(cls, kind: str, body: Any, domain: Domain, where: str,
                  weight: float) -> Group:
        if not isinstance(body, Mapping):
            raise SpecError(f"{where}: expected a mapping attribute -> block")
        blocks = []
        for name, value in body.items():
            attr = domain.attributes[domain.index(str(name), f"{where}.{name}")]
            blocks.append((str(name), Block.from_spec(value, attr.size, f"{where}.{name}")))
        return cls(tuple(blocks), weight=weight)

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
    kinds: ClassVar[dict[str, str]] = {
        "marginals": "the full table of counts over the chosen attributes"}

    @classmethod
    def from_body(cls, kind: str, body: Any, domain: Domain, where: str,
                  weight: float) -> Group:
        if not isinstance(body, Mapping):
            raise SpecError(f"{where}: expected a mapping with one of k, upto, sets")
        check_keys(body, ("k", "upto", "sets"), where)
        given = [k for k in ("k", "upto", "sets") if k in body]
        if len(given) != 1:
            raise SpecError(f"{where}: give exactly one of k, upto, sets (got "
                            f"{', '.join(given) or 'none'})")
        d = len(domain)
        if "k" in body:
            return cls(k=integer(body["k"], f"{where}.k", 0, d), weight=weight)
        if "upto" in body:
            return cls(upto=integer(body["upto"], f"{where}.upto", 0, d), weight=weight)
        return cls(sets=_subset_list(body["sets"], domain, f"{where}.sets"), weight=weight)

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
    kinds: ClassVar[dict[str, str]] = {
        "prefix_marginals": "that table, but cumulative ('at most v') on numeric attributes"}

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
    kinds: ClassVar[dict[str, str]] = {
        "affine": "for two numeric attributes a, b: how many records have a + b <= c, "
                  "for every c",
        "abs_diff": "for two numeric attributes a, b: how many records have |a - b| <= c"}

    @classmethod
    def from_body(cls, kind: str, body: Any, domain: Domain, where: str,
                  weight: float) -> Group:
        if not isinstance(body, list | tuple) or len(body) != 2:
            raise SpecError(f"{where}: expected a list of two attribute names")
        a, b = (str(v) for v in body)
        domain.index(a, f"{where}[0]")
        domain.index(b, f"{where}[1]")
        if a == b:
            raise SpecError(f"{where}: the two attributes must differ")
        return cls(attrs=(a, b), pair_kind=kind, weight=weight)

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
    kinds: ClassVar[dict[str, str]] = {
        "random": "random subsets of the cells of the chosen attributes "
                  "(options: on, count, p, seed)",
        "matrix": "explicit rows over the cells of the chosen attributes (options: on, rows)"}

    @classmethod
    def from_body(cls, kind: str, body: Any, domain: Domain, where: str,
                  weight: float) -> Group:
        if not isinstance(body, Mapping):
            raise SpecError(f"{where}: expected a mapping with 'on'")
        if kind == "random":
            check_keys(body, ("on", "count", "p", "seed"), where)
            on = _on(body.get("on"), domain, f"{where}.on")
            count = explicit_rows(integer(body.get("count", 16), f"{where}.count", 1, 100_000),
                                  int(np.prod([domain[n].size for n in on])), f"{where}.count")
            return cls(on=on, count=count,
                       p=number(body.get("p", 0.5), f"{where}.p", 0.0, 1.0, open_lo=True),
                       seed=integer(body.get("seed", 0), f"{where}.seed", 0), weight=weight)
        check_keys(body, ("on", "rows"), where)
        on = _on(body.get("on"), domain, f"{where}.on")
        cells = int(np.prod([domain[n].size for n in on]))
        if "rows" not in body:
            raise SpecError(f"{where}.rows: missing")
        rows = row_array(body["rows"], f"{where}.rows", cells)
        return cls(on=on, rows=tuple(tuple(r) for r in rows.tolist()), weight=weight)

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


def _subset_list(value: Any, domain: Domain, where: str) -> tuple[Subset, ...]:
    if not isinstance(value, list | tuple):
        raise SpecError(f"{where}: expected a list of attribute lists")
    out = []
    for i, s in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(s, list | tuple):
            raise SpecError(f"{w}: expected a list of attribute names")
        for name in s:
            domain.index(str(name), w)
        if len(set(s)) != len(s):
            raise SpecError(f"{w}: repeated attribute")
        out.append(tuple(str(n) for n in s))
    return tuple(out)


def _on(value: Any, domain: Domain, where: str) -> Subset:
    if not isinstance(value, list | tuple) or not value:
        raise SpecError(f"{where}: expected a non-empty list of attribute names")
    names = tuple(str(v) for v in value)
    for i, name in enumerate(names):
        domain.index(name, f"{where}[{i}]")
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: repeated attribute")
    cells = int(np.prod([domain[n].size for n in names]))
    if cells > MAX_EXPLICIT_CELLS:
        raise SpecError(f"{where}: explicit queries over {cells:,} cells exceed the limit "
                        f"{MAX_EXPLICIT_CELLS:,}")
    return names


#: Every group kind of the spec -> its class, in the order error messages and menus list them.
GROUPS: dict[str, type[Group]] = {
    kind: cls for cls in (Product, Marginals, PrefixMarginals, PairQueries, SubsetMatrix)
    for kind in cls.kinds}
