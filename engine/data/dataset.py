"""A data set: integer-coded records over a public :class:`Domain`.

Each record is one row of codes, one column per domain attribute in domain order. Marginals are
counted straight from the records (``np.bincount`` on the ravelled multi-index) so that domains
far too large for a full data vector still work; the full vector is only built below a size
guard. Counts are in records (int64).

Example:
    >>> from engine.domain import Domain
    >>> import pandas as pd
    >>> d = Domain.from_sizes([2, 3], names=["sex", "race"])
    >>> ds = Dataset.from_dataframe(pd.DataFrame({"sex": [0, 1, 1], "race": [2, 0, 2]}), d)
    >>> ds.marginal(["race"]).tolist()
    [1, 0, 2]
    >>> ds.datavector().tolist()
    [0, 0, 1, 1, 0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from engine.data.discretise import integer_codes
from engine.domain import Domain
from engine.errors import SpecError

DEFAULT_MAX_CELLS = 50_000_000  # 5e7 int64 cells = 400 MB, the most we allocate in one go


def check_columns(
    columns: Iterable[object], domain: Domain, *, source: str, ignore_extra: bool = False
) -> None:
    """Check that a table has a column for every domain attribute (and, unless told, no more).

    Args:
        columns: the table's column names.
        domain: the public domain the table must cover.
        source: error-message prefix (a file name).
        ignore_extra: accept columns that are not attributes of the domain.

    Raises:
        SpecError: naming the missing or the unexpected columns.
    """
    present = [str(c) for c in columns]
    dupes = sorted({c for c in present if present.count(c) > 1})
    if dupes:
        raise SpecError(f"{source}: duplicate columns {', '.join(map(repr, dupes))}")
    missing = [n for n in domain.names if n not in present]
    if missing:
        noun = "column" if len(missing) == 1 else "columns"
        raise SpecError(
            f"{source}: missing {noun} {', '.join(map(repr, missing))}; "
            f"the domain needs {', '.join(domain.names)}"
        )
    extra = [c for c in present if c not in domain]
    if extra and not ignore_extra:
        these = "column" if len(extra) == 1 else "columns"
        are = "is" if len(extra) == 1 else "are"
        raise SpecError(
            f"{source}: {these} {', '.join(map(repr, extra))} {are} not in the domain "
            f"(pass ignore_extra=True to drop them); domain: {', '.join(domain.names)}"
        )


class Dataset:
    """Integer-coded records over a public domain; immutable once built.

    Build one with :meth:`from_dataframe` (codes), :func:`engine.data.load_csv` (raw values),
    :meth:`synthetic` or :func:`engine.data.load_adult`. The constructor trusts its input: it
    checks the columns and dtype, not the code ranges.

    Args:
        frame: int64 columns named and ordered exactly as ``domain.names``, codes in range.
        domain: the public domain of the records.
    """

    __slots__ = ("_columns", "_domain", "_frame")

    def __init__(self, frame: pd.DataFrame, domain: Domain) -> None:
        if tuple(str(c) for c in frame.columns) != domain.names:
            raise SpecError(
                f"dataset: columns {list(frame.columns)} must be the domain's attributes "
                f"in order {list(domain.names)}"
            )
        bad = [str(c) for c, t in frame.dtypes.items() if t != np.int64]
        if bad:
            raise SpecError(f"dataset: columns {bad} must hold int64 codes")
        # A private copy with a plain 0..n-1 index: callers' later edits cannot reach it.
        own = frame.reset_index(drop=True).copy(deep=True)
        columns = []
        for name in domain.names:
            column = own[name].to_numpy()
            column.flags.writeable = False
            columns.append(column)
        object.__setattr__(self, "_frame", own)
        object.__setattr__(self, "_domain", domain)
        object.__setattr__(self, "_columns", tuple(columns))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Dataset is immutable; cannot set {name!r}")

    # ----------------------------------------------------------------------------- builders

    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        domain: Domain,
        validate: bool = True,
        *,
        ignore_extra: bool = False,
        source: str = "dataframe",
    ) -> Dataset:
        """A data set from a frame of integer codes (columns matched by name).

        For raw values (labels, numbers to bin) use :func:`engine.data.encode_frame`.

        Args:
            df: one column per domain attribute holding codes ``0..size-1`` (any order).
            domain: the public domain.
            validate: check every code (missing, non-integer, out of range); ``False`` trusts
                the caller and only casts to int64.
            ignore_extra: drop columns that are not domain attributes instead of failing.
            source: error-message prefix.

        Returns:
            The data set, columns in domain order.

        Raises:
            SpecError: missing/extra columns or bad codes, naming the column, rows and values.
        """
        check_columns(df.columns, domain, source=source, ignore_extra=ignore_extra)
        by_name = {str(c): c for c in df.columns}
        data = {}
        for attribute in domain:
            column = df[by_name[attribute.name]]
            if validate:
                data[attribute.name] = integer_codes(
                    column, attribute.size, name=attribute.name, source=source
                )
            else:
                data[attribute.name] = column.to_numpy(dtype=np.int64)
        return cls(pd.DataFrame(data, columns=list(domain.names)), domain)

    @classmethod
    def synthetic(
        cls,
        domain: Domain,
        records: int,
        rng: np.random.Generator | int | None = None,
        correlation: float = 0.0,
    ) -> Dataset:
        """Seeded random records for tests and demos (never for anything private).

        Each attribute gets a random skewed marginal (a flat Dirichlet draw). With probability
        ``correlation`` a record's value is instead read off one latent uniform shared by all
        attributes of the record, which ties the attributes together monotonically.

        Args:
            domain: the domain to draw codes from.
            records: number of records.
            rng: a numpy Generator or a seed.
            correlation: in ``[0, 1]``; 0 gives independent attributes, 1 gives attributes that
                are all functions of one latent value.

        Returns:
            The data set.
        """
        if isinstance(records, bool) or not isinstance(records, int | np.integer) or records < 0:
            raise SpecError(f"synthetic.records: must be a non-negative integer, got {records!r}")
        if not 0.0 <= float(correlation) <= 1.0:
            raise SpecError(f"synthetic.correlation: must be in [0, 1], got {correlation!r}")
        rng = np.random.default_rng(rng)
        records = int(records)
        latent = rng.random(records)
        data = {}
        for attribute in domain:
            weights = rng.dirichlet(np.ones(attribute.size))
            independent = rng.choice(attribute.size, size=records, p=weights)
            tied = np.minimum((latent * attribute.size).astype(np.int64), attribute.size - 1)
            use_tied = rng.random(records) < correlation
            data[attribute.name] = np.where(use_tied, tied, independent).astype(np.int64)
        return cls(pd.DataFrame(data, columns=list(domain.names)), domain)

    def sample(
        self, n: int, rng: np.random.Generator | int | None = None, *, replace: bool = False
    ) -> Dataset:
        """``n`` records drawn uniformly at random (without replacement unless asked).

        Args:
            n: number of records to draw.
            rng: a numpy Generator or a seed.
            replace: draw with replacement (a bootstrap sample; ``n`` may exceed ``records``).

        Returns:
            A data set over the same domain, in the order drawn.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise SpecError(f"sample.n: must be a non-negative integer, got {n!r}")
        if not replace and n > self.records:
            raise SpecError(f"sample.n: {n} exceeds the {self.records} records; pass replace=True")
        rows = np.random.default_rng(rng).choice(self.records, size=int(n), replace=replace)
        return Dataset(self._frame.iloc[rows], self._domain)

    # ------------------------------------------------------------------------------ queries

    @property
    def domain(self) -> Domain:
        """The public domain of the records."""
        return self._domain

    @property
    def df(self) -> pd.DataFrame:
        """The codes as a DataFrame; a copy-on-write copy, so edits never reach the data set."""
        return self._frame.copy(deep=False)

    @property
    def records(self) -> int:
        """Number of records."""
        return len(self._frame)

    def __len__(self) -> int:
        return self.records

    def column(self, name: str) -> np.ndarray:
        """The read-only int64 codes of one attribute, one per record."""
        return self._columns[self._domain.index(name, where="column")]

    def project(self, names: Iterable[str]) -> Dataset:
        """The records restricted to ``names`` (kept in domain order).

        Args:
            names: attribute names (at least one).

        Returns:
            A data set over ``domain.project(names)`` with the same number of records.
        """
        names = (names,) if isinstance(names, str) else tuple(names)
        domain = self._domain.project(names)
        return Dataset(self._frame[list(domain.names)], domain)

    def marginal(
        self, names: Iterable[str] = (), *, max_cells: int | float = DEFAULT_MAX_CELLS
    ) -> np.ndarray:
        """The count tensor over ``names``, axes in DOMAIN order whatever order was asked.

        Counted from the records, never through the full data vector. ``marginal(())`` is a
        0-d array holding the number of records.

        Args:
            names: attribute names (duplicates ignored).
            max_cells: refuse marginals with more cells than this.

        Returns:
            An int64 array of shape ``domain.project(names).shape``; entries are record counts.

        Raises:
            SpecError: an unknown attribute, or more cells than ``max_cells``.
        """
        names = (names,) if isinstance(names, str) else tuple(names)
        axes = sorted(set(self._domain.indices(names, where="marginal")))
        if not axes:
            return np.array(self.records, dtype=np.int64)
        shape = tuple(self._domain.shape[i] for i in axes)
        cells = math.prod(shape)
        if cells > max_cells:
            chosen = ", ".join(self._domain.names[i] for i in axes)
            raise SpecError(
                f"marginal({chosen}): {cells:,} cells, more than max_cells={max_cells:,.0f}"
            )
        flat = np.ravel_multi_index(tuple(self._columns[i] for i in axes), shape)
        return np.bincount(flat, minlength=cells).astype(np.int64).reshape(shape)

    def datavector(self, max_cells: int | float = DEFAULT_MAX_CELLS) -> np.ndarray:
        """The full histogram over the domain, flattened in C order (attribute 1 slowest).

        Args:
            max_cells: refuse domains with more cells than this.

        Returns:
            An int64 vector of length ``domain.size``; entries are record counts.

        Raises:
            SpecError: the domain has more cells than ``max_cells``.
        """
        size = self._domain.size
        if size > max_cells:
            raise SpecError(
                f"datavector: the domain has {size:,} cells, more than "
                f"max_cells={max_cells:,.0f}; it is too large for a full data vector, "
                "use Dataset.marginal(names) instead"
            )
        return self.marginal(self._domain.names, max_cells=max_cells).ravel()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dataset):
            return NotImplemented
        return self._domain == other._domain and self._frame.equals(other._frame)

    __hash__ = None  # type: ignore[assignment]  -- equal by content, and big

    def __repr__(self) -> str:
        return (
            f"Dataset(records={self.records}, attributes={list(self._domain.names)}, "
            f"shape={self._domain.shape})"
        )
