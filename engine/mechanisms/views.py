"""Typed, frozen views of a plan: what a page draws to show how a mechanism works.

A mechanism attaches a tuple of views to its :class:`~engine.mechanisms.base.Plan`
(``plan.views()``); a page draws each by its type, never by guessing a value's shape:

* :class:`FactsView`: named scalars (:class:`Fact`), each with plain words and units;
* :class:`MatrixView`: a 2-D array below :data:`MAX_VIEW_ENTRIES` entries, or an implicit
  Matrix of any size (pictured block by block);
* :class:`WeightsView`: one named weight per part (marginal, eigenvector, residual, group);
* :class:`TableView`: columns and rows of scalars;
* :class:`SeriesView`: a sequence of values in order (optimiser progress, restarts).

Every view has a machine ``key`` (unique within a plan), a ``title``, a ``caption`` in plain
words, ``units`` (empty when the numbers have none) and ``detail`` (a diagnostic a page folds
under "Details"; single facts carry the same flag). Values are validated when the view is
made: a bad one raises ``ValueError`` naming the view and the value.

Example:
    >>> gap = Fact("gap", "certified duality gap (relative)", 2e-8)
    >>> view = FactsView(key="solver", title="Solver", caption="How the optimiser ended.",
    ...                  facts=(gap,))
    >>> view["gap"]
    2e-08
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analysis.strategy_picture import BlockImage, block_image
from engine.linalg.matrix import Matrix

#: Largest matrix (rows x columns) a MatrixView holds, as many as a heat map draws (32 MB).
MAX_VIEW_ENTRIES = 4_000_000

#: What a fact or a table cell may hold.
Scalar = float | int | str | bool


def _scalar(value: Any, where: str) -> Scalar:
    """``value`` as a plain Python scalar; ValueError naming ``where`` otherwise."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, str):
        return value
    raise ValueError(f"{where}: expected a number, text or flag, got {value!r}")


def _frozen_array(values: Any, ndim: int, where: str) -> np.ndarray:
    """A read-only float copy of ``values`` with ``ndim`` dimensions (ValueError otherwise)."""
    try:
        array = np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected numbers, got {values!r}") from None
    if array.ndim != ndim:
        raise ValueError(f"{where}: expected a {ndim}-D array, got shape {array.shape}")
    if np.isnan(array).any():
        raise ValueError(f"{where}: contains NaN")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class Fact:
    """One named scalar: ``label`` in plain words, ``value``, ``units`` ('' for none).

    ``key`` is the machine name by which code reads it (``plan.fact(key)``); ``detail``
    marks a diagnostic (how an optimiser ended) that a page folds under "Details".
    """

    key: str
    label: str
    value: Scalar
    units: str = ""
    detail: bool = False

    def __post_init__(self) -> None:
        if not self.key or not self.label:
            raise ValueError(f"Fact: key and label must be non-empty, got {self.key!r}, "
                             f"{self.label!r}")
        object.__setattr__(self, "value", _scalar(self.value, f"fact {self.key!r}"))


@dataclass(frozen=True, kw_only=True, eq=False)
class View:
    """What every view has: a unique ``key``, a ``title``, a plain-words ``caption``, the
    ``units`` of its numbers ('' when they have none), and ``detail``: True for a diagnostic
    (optimiser progress, candidates, timings) that a page folds under "Details"."""

    key: str
    title: str
    caption: str
    units: str = ""
    detail: bool = False

    def __post_init__(self) -> None:
        kind = type(self).__name__
        if not self.key:
            raise ValueError(f"{kind}: key must be non-empty")
        if not self.title.strip():
            raise ValueError(f"{kind} {self.key!r}: title must be non-empty")
        if not self.caption.strip():
            raise ValueError(f"{kind} {self.key!r}: caption must be non-empty")


@dataclass(frozen=True, kw_only=True, eq=False)
class FactsView(View):
    """Named scalars, shown as a two-column table (words, value with units)."""

    facts: tuple[Fact, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "facts", tuple(self.facts))
        keys = [f.key for f in self.facts]
        if not keys:
            raise ValueError(f"FactsView {self.key!r}: needs at least one fact")
        if any(not isinstance(f, Fact) for f in self.facts):
            raise ValueError(f"FactsView {self.key!r}: facts must be Fact objects")
        if len(set(keys)) != len(keys):
            raise ValueError(f"FactsView {self.key!r}: repeated fact keys {keys}")

    def __contains__(self, key: str) -> bool:
        return any(f.key == key for f in self.facts)

    def __getitem__(self, key: str) -> Scalar:
        for f in self.facts:
            if f.key == key:
                return f.value
        known = ", ".join(f.key for f in self.facts)
        raise KeyError(f"{self.key}: no fact {key!r}; facts: {known}")


@dataclass(frozen=True, kw_only=True, eq=False)
class MatrixView(View):
    """A matrix drawn as a heat map: ``matrix`` is a 2-D array of at most
    :data:`MAX_VIEW_ENTRIES` entries or an implicit Matrix of any size (drawn through
    :meth:`picture`, block means at screen resolution); ``row_label`` / ``column_label`` say
    what one row and one column are."""

    matrix: np.ndarray | Matrix
    row_label: str = "row"
    column_label: str = "column"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.matrix, Matrix):
            return
        where = f"MatrixView {self.key!r}"
        array = _frozen_array(self.matrix, 2, where)
        if array.size > MAX_VIEW_ENTRIES:
            raise ValueError(f"{where}: a {array.shape[0]:,} x {array.shape[1]:,} array "
                             f"exceeds the {MAX_VIEW_ENTRIES:,} entries a view may hold; "
                             "pass the implicit matrix instead")
        object.__setattr__(self, "matrix", array)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return tuple(int(s) for s in self.matrix.shape)  # type: ignore[return-value]

    @property
    def explicit(self) -> bool:
        """True when the entries can be listed (at most :data:`MAX_VIEW_ENTRIES`)."""
        return self.shape[0] * self.shape[1] <= MAX_VIEW_ENTRIES

    def array(self) -> np.ndarray:
        """The entries as a dense array (an implicit matrix is densified here).

        Raises:
            ValueError: for more than :data:`MAX_VIEW_ENTRIES` entries (use :meth:`picture`).
        """
        if isinstance(self.matrix, Matrix):
            if not self.explicit:
                rows, cols = self.shape
                raise ValueError(f"MatrixView {self.key!r}: a {rows:,} x {cols:,} matrix is "
                                 f"listed only up to {MAX_VIEW_ENTRIES:,} entries; draw its "
                                 "picture instead")
            return np.asarray(self.matrix.dense(), dtype=float)
        return self.matrix

    def picture(self, rows: int, cols: int, *, row_range: Sequence[float] | None = None,
                col_range: Sequence[float] | None = None,
                statistic: str = "mean_abs") -> BlockImage:
        """Block means of the visible ranges at ``rows`` x ``cols`` blocks (see
        :func:`~engine.analysis.strategy_picture.block_image`); never densifies a large
        implicit matrix."""
        return block_image(self.matrix, rows, cols, row_range=row_range, col_range=col_range,
                           statistic=statistic)


@dataclass(frozen=True, kw_only=True, eq=False)
class WeightsView(View):
    """One finite weight per named part, drawn as bars (a table when there are many)."""

    names: tuple[str, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        super().__post_init__()
        where = f"WeightsView {self.key!r}"
        object.__setattr__(self, "names", tuple(map(str, self.names)))
        values = _frozen_array(self.values, 1, where)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{where}: weights must be finite, got {values.tolist()}")
        if len(self.names) != values.size:
            raise ValueError(f"{where}: {len(self.names)} names for {values.size} weights")
        if not self.names:
            raise ValueError(f"{where}: needs at least one weight")
        object.__setattr__(self, "values", values)

    @classmethod
    def of(cls, weights: Mapping[Any, float], **kwargs: Any) -> WeightsView:
        """A view of a ``{name: weight}`` mapping (names are turned into text)."""
        return cls(names=tuple(map(str, weights)), values=np.array(list(weights.values()),
                                                                    dtype=float), **kwargs)

    def as_dict(self) -> dict[str, float]:
        """``{name: weight}``."""
        return dict(zip(self.names, self.values.tolist(), strict=True))


@dataclass(frozen=True, kw_only=True, eq=False)
class TableView(View):
    """Rows of scalars under named ``columns`` (drawn as a table with a CSV download)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Scalar, ...], ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        where = f"TableView {self.key!r}"
        columns = tuple(map(str, self.columns))
        if not columns or len(set(columns)) != len(columns):
            raise ValueError(f"{where}: columns must be distinct and non-empty, got {columns}")
        rows = []
        for i, row in enumerate(self.rows):
            row = tuple(row)
            if len(row) != len(columns):
                raise ValueError(f"{where}: row {i} has {len(row)} values for "
                                 f"{len(columns)} columns")
            rows.append(tuple(_scalar(v, f"{where} row {i} column {c!r}")
                              for c, v in zip(columns, row, strict=True)))
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "rows", tuple(rows))

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]], **kwargs: Any) -> TableView:
        """A table from records: every key any record has is a column (first-seen order);
        a record without that key shows an empty cell."""
        records = list(records)
        columns = tuple(dict.fromkeys(k for r in records for k in r))
        return cls(columns=columns, rows=tuple(tuple(r.get(c, "") for c in columns)
                                               for r in records), **kwargs)

    def column(self, name: str) -> list[Scalar]:
        """The values of one column, top to bottom."""
        if name not in self.columns:
            raise KeyError(f"{self.key}: no column {name!r}; columns: {', '.join(self.columns)}")
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def records(self) -> list[dict[str, Scalar]]:
        """One ``{column: value}`` per row."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True, kw_only=True, eq=False)
class SeriesView(View):
    """Values in order (one per iteration, sweep or restart), drawn as a line; ``x_label``
    says what one step is. Infinite values (an unsupported candidate) are allowed."""

    values: np.ndarray
    x_label: str = "step"

    def __post_init__(self) -> None:
        super().__post_init__()
        values = _frozen_array(self.values, 1, f"SeriesView {self.key!r}")
        if not values.size:
            raise ValueError(f"SeriesView {self.key!r}: needs at least one value")
        object.__setattr__(self, "values", values)


#: Every kind of view a page knows how to draw.
VIEW_TYPES = (FactsView, MatrixView, WeightsView, TableView, SeriesView)


def check_views(views: Sequence[View]) -> tuple[View, ...]:
    """``views`` as a tuple, after checking each is a known view and keys are unique."""
    out = tuple(views)
    for v in out:
        if not isinstance(v, VIEW_TYPES):
            raise ValueError(f"plan views: {v!r} is not one of "
                             f"{', '.join(t.__name__ for t in VIEW_TYPES)}")
    keys = [v.key for v in out]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"plan views: repeated keys {repeated}")
    return out


def facts(key: str, title: str, caption: str, entries: Iterable[Fact | None]) -> FactsView:
    """A FactsView of the given facts, leaving out the ``None`` ones (facts that do not
    apply to this plan)."""
    return FactsView(key=key, title=title, caption=caption,
                     facts=tuple(f for f in entries if f is not None))


def fact_if(key: str, label: str, value: Any, units: str = "", detail: bool = False
            ) -> Fact | None:
    """A Fact, or None when ``value`` is None (the quantity does not apply)."""
    return None if value is None else Fact(key, label, value, units, detail)


def factor_matrices(names: Sequence[str], factors: Sequence[Matrix],
                    max_entries: int = MAX_VIEW_ENTRIES) -> tuple[View, ...]:
    """The parts of a per-attribute (Kronecker) strategy: one MatrixView per attribute whose
    factor has at most ``max_entries`` entries, and the size of every factor as facts."""
    views: list[View] = [facts(
        "factor_sizes", "Per-attribute parts",
        "The strategy is built attribute by attribute; these are the sizes of the parts.",
        [Fact(f"factor_rows[{name}]", f"measurements of the part for {name}", f.shape[0],
              "rows") for name, f in zip(names, factors, strict=True)])]
    for name, f in zip(names, factors, strict=True):
        if f.shape[0] * f.shape[1] <= max_entries:
            views.append(MatrixView(
                key=f"factor[{name}]", title=f"Part for {name}", matrix=f,
                caption=("The strategy is built attribute by attribute: this is the part for "
                         f"{name} (rows: measurements, columns: its values). The full strategy "
                         "measures every combination of these parts."),
                units="weight", row_label="measurement", column_label=f"{name} value"))
    return tuple(views)


__all__ = ["MAX_VIEW_ENTRIES", "VIEW_TYPES", "Fact", "FactsView", "MatrixView", "Scalar",
           "SeriesView", "TableView", "View", "WeightsView", "check_views", "fact_if",
           "facts", "factor_matrices"]
