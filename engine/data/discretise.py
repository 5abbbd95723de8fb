"""Turning raw column values into the integer codes of an :class:`Attribute`.

Three mappings, chosen by what the (public) attribute carries:

* ``labels``: a value is coded by the position of its label (compared as stripped text);
* ``bin_edges``: a number ``v`` goes to bin ``i`` when ``edges[i] <= v < edges[i + 1]`` (every
  bin is half-open, as the attribute's ``[a, b)`` display labels say, so a value equal to the last
  edge is outside the domain);
* neither: the values already are integer codes ``0..size-1``.

Bad values are never dropped or clipped: the first offending rows (1-based data rows) and values
are reported in one line, e.g.
``adult.csv: column 'age': 3 values outside 0..99 (rows 5, 17, 20: 120, -1, 300)``.

Example:
    >>> import pandas as pd
    >>> codes, attr = bin_numeric(pd.Series([0.5, 9.9, 3.0], name="x"), n=2, value_range=(0, 10))
    >>> codes.tolist(), attr.bin_edges
    ([0, 1, 0], (0.0, 5.0, 10.0))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from engine.domain import Attribute
from engine.errors import SpecError, suggest

SHOWN = 5  # offending rows quoted in an error message; more are elided with "..."


def encode(values: pd.Series, attribute: Attribute, *, source: str = "data") -> np.ndarray:
    """Codes of ``values`` under ``attribute``: by label, by bin, or as integer codes.

    Args:
        values: one column of raw values (any dtype; text is stripped of surrounding blanks).
        attribute: the public attribute the column belongs to.
        source: what the values came from (a file name), used as the error-message prefix.

    Returns:
        An int64 array of codes in ``0..attribute.size-1``, one per row.

    Raises:
        SpecError: a missing, unparsable or out-of-domain value, naming rows and values.
    """
    if attribute.labels is not None:
        return _label_codes(values, attribute.labels, attribute.name, source)
    if attribute.bin_edges is not None:
        return _bin_codes(values, attribute.bin_edges, attribute.name, source)
    return integer_codes(values, attribute.size, name=attribute.name, source=source)


def integer_codes(
    values: pd.Series, size: int, *, name: str | None = None, source: str = "data"
) -> np.ndarray:
    """Check that ``values`` are integer codes in ``0..size-1`` and return them as int64.

    Integral floats and numeric text (``"3"``, ``"3.0"``) are accepted as codes.

    Args:
        values: the column (any dtype).
        size: number of codes of the attribute (codes run ``0..size-1``).
        name: column name for messages; defaults to ``values.name``.
        source: error-message prefix (a file name).

    Returns:
        An int64 array of codes, one per row.

    Raises:
        SpecError: missing, non-integer or out-of-range codes, naming rows and values.
    """
    column = _column_name(values, name)
    numbers, missing, unparsable = _parse_numbers(values)
    _raise_if(missing, values, source, column, "missing", show_values=False)
    fractional = ~missing & ~unparsable & (numbers != np.floor(numbers))
    _raise_if(unparsable | fractional, values, source, column, "non-integer")
    outside = ~(missing | unparsable | fractional) & ((numbers < 0) | (numbers >= size))
    _raise_if(outside, values, source, column, f"outside 0..{size - 1}", adjective_after=True)
    return numbers.astype(np.int64)


def bin_numeric(
    values: pd.Series,
    edges: Sequence[float] | None = None,
    *,
    n: int | None = None,
    value_range: tuple[float, float] | None = None,
    name: str | None = None,
    source: str = "data",
) -> tuple[np.ndarray, Attribute]:
    """Bin a numeric column, by given edges or by ``n`` equal-width bins over a public range.

    Bin ``i`` holds ``edges[i] <= v < edges[i + 1]``; values outside ``[edges[0], edges[-1])``
    are an error, never clipped. Give either ``edges`` or both ``n`` and ``value_range``: the
    range must be public knowledge (a questionnaire's limits), never the data's min and max.

    Args:
        values: the column (numbers or numeric text), in the attribute's own units.
        edges: ``size + 1`` strictly increasing bin edges, in the values' units.
        n: number of equal-width bins (with ``value_range``).
        value_range: ``(low, high)`` public range, in the values' units; ``high`` is exclusive.
        name: attribute name; defaults to ``values.name``.
        source: error-message prefix (a file name).

    Returns:
        ``(codes, attribute)``: int64 bin numbers and a numeric Attribute carrying the edges.

    Raises:
        SpecError: inconsistent arguments, or missing, non-numeric or out-of-range values.
    """
    column = _column_name(values, name)
    if (edges is None) == (n is None and value_range is None):
        raise SpecError(f"{column}: give either edges or n and value_range for binning")
    if edges is None:
        if n is None or value_range is None:
            raise SpecError(f"{column}: equal-width binning needs both n and value_range")
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise SpecError(f"{column}.n: must be a positive integer, got {n!r}")
        low, high = (float(v) for v in value_range)
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise SpecError(f"{column}.value_range: need finite low < high, got {value_range!r}")
        edges = np.linspace(low, high, int(n) + 1).tolist()
    attribute = Attribute(column, len(edges) - 1, "numeric", bin_edges=tuple(edges))
    return _bin_codes(values, attribute.bin_edges, column, source), attribute


def code_categorical(
    values: pd.Series,
    labels: Sequence[str],
    *,
    name: str | None = None,
    kind: str = "categorical",
    source: str = "data",
) -> tuple[np.ndarray, Attribute]:
    """Code a column by the position of each value's label in ``labels``.

    Values are compared as stripped text (an integral float ``3.0`` reads as ``"3"``).

    Args:
        values: the column (any dtype).
        labels: the public, distinct labels; code ``i`` is ``labels[i]``.
        name: attribute name; defaults to ``values.name``.
        kind: ``categorical``, or ``numeric`` for ordered labels (``low``, ``mid``, ``high``).
        source: error-message prefix (a file name).

    Returns:
        ``(codes, attribute)``: int64 label positions and the Attribute carrying the labels.

    Raises:
        SpecError: a missing value or a value that is not one of the labels.
    """
    column = _column_name(values, name)
    attribute = Attribute(column, len(labels), kind, labels=tuple(labels))
    return _label_codes(values, attribute.labels, column, source), attribute


def _label_codes(values: pd.Series, labels: Sequence[str], column: str, source: str) -> np.ndarray:
    missing = _missing(values)
    _raise_if(missing, values, source, column, "missing", show_values=False)
    text = [label_text(v) for v in values.tolist()]
    codes = pd.Index(list(labels)).get_indexer(text)
    unknown = codes < 0
    if unknown.any():
        first = text[int(np.flatnonzero(unknown)[0])]
        shown = ", ".join(labels[:10]) + (", ..." if len(labels) > 10 else "")
        _raise_if(
            unknown,
            values,
            source,
            column,
            "not among the labels",
            adjective_after=True,
            tail=f"{suggest(first, labels)}; labels: {shown}",
        )
    return codes.astype(np.int64)


def _bin_codes(values: pd.Series, edges: Sequence[float], column: str, source: str) -> np.ndarray:
    numbers, missing, unparsable = _parse_numbers(values)
    _raise_if(missing, values, source, column, "missing", show_values=False)
    _raise_if(unparsable, values, source, column, "non-numeric")
    edge_array = np.asarray(edges, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        outside = ~(missing | unparsable) & (
            (numbers < edge_array[0]) | (numbers >= edge_array[-1])
        )
    span = f"outside [{edge_array[0]:g}, {edge_array[-1]:g})"
    _raise_if(outside, values, source, column, span, adjective_after=True)
    return np.searchsorted(edge_array, numbers, side="right").astype(np.int64) - 1


def _column_name(values: pd.Series, name: str | None) -> str:
    column = name if name is not None else values.name
    if column is None or str(column) == "":
        raise SpecError("column: no name given (pass name=... or a named Series)")
    return str(column)


def _missing(values: pd.Series) -> np.ndarray:
    """NA values and empty (or blank) text."""
    missing = values.isna().to_numpy(dtype=bool)
    if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
        blank = np.array(
            [isinstance(v, str) and not v.strip() for v in values.tolist()], dtype=bool
        )
        missing = missing | blank
    return missing


def _parse_numbers(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 values (NaN where unusable), the missing mask and the unparsable mask."""
    missing = _missing(values)
    if pd.api.types.is_bool_dtype(values) and not missing.any():
        return values.to_numpy(dtype=np.float64), missing, np.zeros_like(missing)
    if pd.api.types.is_numeric_dtype(values):
        numbers = values.to_numpy(dtype=np.float64, na_value=np.nan)
        return numbers, missing, np.zeros_like(missing)
    text = pd.Series(
        [v.strip() if isinstance(v, str) else v for v in values.tolist()], dtype=object
    )
    text[missing] = np.nan
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    unparsable = ~missing & np.isnan(numbers)
    return numbers, missing, unparsable


def label_text(value: object) -> str:
    """The text a value is matched against labels by (stripped; ``3.0`` reads as ``"3"``)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _show(value: object) -> str:
    """A value as a message shows it: numbers bare, other text quoted."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return repr(value)
        return value.strip()
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return repr(value)


def _raise_if(
    mask: np.ndarray,
    values: pd.Series,
    source: str,
    column: str,
    problem: str,
    *,
    show_values: bool = True,
    adjective_after: bool = False,
    tail: str = "",
) -> None:
    """Raise one SpecError line quoting the first offending rows (1-based) and values."""
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return
    count = int(rows.size)
    noun = "value" if count == 1 else "values"
    what = f"{count} {noun} {problem}" if adjective_after else f"{count} {problem} {noun}"
    shown = rows[:SHOWN]
    more = ", ..." if count > SHOWN else ""
    where = ("row " if count == 1 else "rows ") + ", ".join(str(r + 1) for r in shown) + more
    if show_values:
        quoted = ", ".join(_show(v) for v in values.iloc[shown].tolist()) + more
        where = f"{where}: {quoted}"
    raise SpecError(f"{source}: column {column!r}: {what} ({where}){tail}")
