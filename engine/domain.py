"""Attributes and multi-attribute domains.

A :class:`Domain` is an ordered tuple of :class:`Attribute` values. The data vector of a domain
is the histogram over the Cartesian product of the attribute values, vectorised in numpy C
order: attribute 1 varies slowest, which is the order ``np.kron(A1, ..., Ad)`` assumes.

Example:
    >>> d = Domain.from_spec({"age": {"size": 100, "kind": "numeric"}, "sex": 2})
    >>> d.shape, d.size
    ((100, 2), 200)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import html_tables as html
from engine.errors import SpecError, suggest

KINDS = ("numeric", "categorical")


#: Largest attribute size: codes and cell indices are 64-bit integers.
MAX_SIZE = 2**63 - 1

@dataclass(frozen=True)
class Attribute:
    """One attribute of a domain.

    Args:
        name: attribute name (non-empty, unique within a domain).
        size: number of values, at least 1.
        kind: ``numeric`` (ordered: ranges and prefixes make sense) or ``categorical``.
        labels: optional display label per value (``size`` of them).
        bin_edges: optional numeric bin edges (``size + 1`` increasing numbers) for a
            discretised numeric attribute.
    """

    name: str
    size: int
    kind: str = "categorical"
    labels: tuple[str, ...] | None = None
    bin_edges: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        where = f"domain.{self.name}" if self.name else "domain"
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"{where}: attribute name must be a non-empty string")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise SpecError(f"{where}.size: must be a positive integer, got {self.size!r}")
        if self.size > MAX_SIZE:
            raise SpecError(f"{where}.size: must be at most {MAX_SIZE:,} (a 64-bit index), "
                            f"got {self.size:.3g}")
        if self.kind not in KINDS:
            raise SpecError(
                f"{where}.kind: unknown kind {self.kind!r}{suggest(str(self.kind), KINDS)}; "
                f"allowed: {', '.join(KINDS)}"
            )
        if self.labels is not None:
            labels = tuple(str(v) for v in self.labels)
            if len(labels) != self.size:
                raise SpecError(
                    f"{where}.labels: expected {self.size} labels, got {len(labels)}"
                )
            if len(set(labels)) != len(labels):
                raise SpecError(f"{where}.labels: labels must be distinct")
            object.__setattr__(self, "labels", labels)
        if self.bin_edges is not None:
            try:
                edges = tuple(float(v) for v in self.bin_edges)
            except (TypeError, ValueError, OverflowError):
                raise SpecError(f"{where}.bin_edges: expected a list of numbers") from None
            if not all(math.isfinite(e) for e in edges):
                raise SpecError(f"{where}.bin_edges: edges must be finite numbers (no NaN or "
                                "infinity)")
            if len(edges) != self.size + 1:
                raise SpecError(
                    f"{where}.bin_edges: expected {self.size + 1} edges, got {len(edges)}"
                )
            if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
                raise SpecError(f"{where}.bin_edges: edges must be strictly increasing")
            object.__setattr__(self, "bin_edges", edges)

    @property
    def numeric(self) -> bool:
        """True for an ordered attribute."""
        return self.kind == "numeric"

    def value_labels(self) -> tuple[str, ...]:
        """Display labels of the values: the given labels, bin ranges, or ``0..size-1``."""
        if self.labels is not None:
            return self.labels
        if self.bin_edges is not None:
            e = self.bin_edges
            return tuple(f"[{e[i]:g}, {e[i + 1]:g})" for i in range(self.size))
        return tuple(str(i) for i in range(self.size))

    def to_spec(self) -> int | dict[str, Any]:
        """The attribute as a scenario-spec value (a bare int for a plain categorical one)."""
        if self.kind == "categorical" and self.labels is None and self.bin_edges is None:
            return self.size
        spec: dict[str, Any] = {"size": self.size, "kind": self.kind}
        if self.labels is not None:
            spec["labels"] = list(self.labels)
        if self.bin_edges is not None:
            spec["bin_edges"] = list(self.bin_edges)
        return spec

    @classmethod
    def from_spec(cls, name: str, spec: Any) -> Attribute:
        """Parse one ``domain:`` entry (a bare int or a mapping with size/kind/labels)."""
        where = f"domain.{name}"
        if isinstance(spec, bool):
            raise SpecError(f"{where}: expected a size or a mapping, got {spec!r}")
        if isinstance(spec, int):
            return cls(name=name, size=spec)
        if not isinstance(spec, Mapping):
            raise SpecError(f"{where}: expected a size or a mapping with 'size', got {spec!r}")
        allowed = ("size", "kind", "labels", "bin_edges")
        for key in spec:
            if key not in allowed:
                raise SpecError(
                    f"{where}.{key}: unknown key{suggest(str(key), allowed)}; "
                    f"allowed: {', '.join(allowed)}"
                )
        labels = spec.get("labels")
        edges = spec.get("bin_edges")
        size = spec.get("size")
        if size is None:
            if labels is not None:
                size = len(labels)
            elif edges is not None:
                size = len(edges) - 1
            else:
                raise SpecError(f"{where}.size: missing")
        kind = spec.get("kind", "numeric" if edges is not None else "categorical")
        if labels is not None and not isinstance(labels, list | tuple):
            raise SpecError(f"{where}.labels: expected a list")
        if edges is not None and not isinstance(edges, list | tuple):
            raise SpecError(f"{where}.bin_edges: expected a list of numbers")
        return cls(name=name, size=size, kind=kind, labels=labels, bin_edges=edges)


@dataclass(frozen=True)
class Domain:
    """An ordered collection of attributes; the data vector is in C order over them."""

    attributes: tuple[Attribute, ...]
    _index: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        attrs = tuple(self.attributes)
        if not attrs:
            raise SpecError("domain: needs at least one attribute")
        names = [a.name for a in attrs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpecError(f"domain: duplicate attribute names {dupes}")
        object.__setattr__(self, "attributes", attrs)
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    @classmethod
    def from_sizes(cls, sizes: Sequence[int], names: Sequence[str] | None = None,
                   kinds: Sequence[str] | None = None) -> Domain:
        """A domain from attribute sizes; names default to ``a1..ad``, kinds to categorical."""
        names = list(names) if names is not None else [f"a{i + 1}" for i in range(len(sizes))]
        kinds = list(kinds) if kinds is not None else ["categorical"] * len(sizes)
        if not (len(names) == len(sizes) == len(kinds)):
            raise SpecError("domain: sizes, names and kinds must have the same length")
        return cls(tuple(Attribute(n, int(s), k) for n, s, k in zip(names, sizes, kinds,
                                                                   strict=True)))

    @classmethod
    def from_spec(cls, spec: Any) -> Domain:
        """Parse the ``domain:`` block of a scenario spec (mapping name -> size or mapping)."""
        if not isinstance(spec, Mapping) or not spec:
            raise SpecError("domain: expected a non-empty mapping of attribute name -> size")
        return cls(tuple(Attribute.from_spec(str(k), v) for k, v in spec.items()))

    def to_spec(self) -> dict[str, Any]:
        """The ``domain:`` block of a scenario spec."""
        return {a.name: a.to_spec() for a in self.attributes}

    @property
    def names(self) -> tuple[str, ...]:
        """Attribute names in order."""
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Attribute sizes in order."""
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells (an exact Python int; may exceed 2**63)."""
        return math.prod(self.shape)

    def __len__(self) -> int:
        return len(self.attributes)

    def __iter__(self):
        return iter(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Attribute:
        return self.attributes[self.index(name)]

    def index(self, name: str, where: str = "attribute") -> int:
        """Position of attribute ``name``; a SpecError that suggests the nearest name."""
        try:
            return self._index[name]
        except KeyError:
            raise SpecError(
                f"{where}: unknown attribute {name!r}{suggest(str(name), self.names)}; "
                f"attributes: {', '.join(self.names)}"
            ) from None

    def indices(self, names: Iterable[str], where: str = "attribute") -> tuple[int, ...]:
        """Positions of several attributes, in the given order."""
        return tuple(self.index(n, where) for n in names)

    def project(self, names: Iterable[str]) -> Domain:
        """The sub-domain over ``names``, kept in this domain's attribute order."""
        keep = set(self.indices(names))
        return Domain(tuple(a for i, a in enumerate(self.attributes) if i in keep))

    def sorted_names(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` in this domain's attribute order."""
        return tuple(sorted(set(names), key=self.index))

    def _repr_html_(self) -> str:
        """The domain in a notebook: one row per attribute with its first values."""
        rows = []
        for a in self.attributes:
            values = a.value_labels()[:6]
            rows.append((a.name, f"{a.size:,}", a.kind,
                         ", ".join(values) + (", ..." if a.size > len(values) else "")))
        return html.titled(f"Domain: {len(self.attributes)} attributes, {self.size:,} cells",
                           html.table(rows, header=("attribute", "values", "kind", "labels")))
