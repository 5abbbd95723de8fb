"""Reading raw tables (CSV files or frames) into a :class:`Dataset` over a PUBLIC domain.

The domain must be given: sizes, labels and bin edges read off private records would leak them
(see :func:`infer_domain`, which does it anyway but warns). Columns are matched by name; each
column is coded by :func:`engine.data.discretise.encode` (by label, by bin, or as integer codes).

Example:
    >>> import io
    >>> from engine.domain import Domain
    >>> d = Domain.from_spec({"sex": {"labels": ["f", "m"]}, "age": {"bin_edges": [0, 50, 100]}})
    >>> load_csv(io.StringIO("age,sex\\n31,m\\n70,f\\n"), d).df.to_dict("list")
    {'sex': [1, 0], 'age': [0, 1]}
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from engine.data.dataset import Dataset, check_columns
from engine.data.discretise import encode, label_text
from engine.domain import Attribute, Domain
from engine.errors import PrivacyLeakWarning, SpecError


def load_csv(
    path_or_buffer: str | os.PathLike[str] | IO[str],
    domain: Domain,
    *,
    ignore_extra: bool = False,
    source: str | None = None,
) -> Dataset:
    """Read a CSV with a header row and code it over a public domain.

    Values are read as text (surrounding blanks stripped, header names too) and coded per
    attribute: by label if the attribute has labels, by binning if it has bin edges, otherwise
    as integer codes ``0..size-1``. Nothing is dropped or clipped.

    Args:
        path_or_buffer: a file path or an open text buffer.
        domain: the public domain; every attribute needs a column of the same name.
        ignore_extra: drop columns that are not domain attributes instead of failing.
        source: the name used in error messages; defaults to the file name.

    Returns:
        The data set, columns in domain order.

    Raises:
        SpecError: an unreadable file, missing or extra columns, or a bad value (one line
            naming the column, the first offending 1-based data rows and their values).
    """
    source = _source_name(path_or_buffer, source)
    raw = _read_text_csv(path_or_buffer, source)
    return encode_frame(raw, domain, ignore_extra=ignore_extra, source=source)


def csv_header(path_or_buffer: str | os.PathLike[str], source: str | None = None) -> list[str]:
    """The column names of a CSV file's header row (blanks stripped), reading nothing else.

    Raises:
        SpecError: the file cannot be read as CSV (one line naming it).
    """
    source = _source_name(path_or_buffer, source)
    return [str(c) for c in _read_text_csv(path_or_buffer, source, nrows=0).columns]


def _source_name(path_or_buffer: object, source: str | None) -> str:
    if source is not None:
        return source
    if isinstance(path_or_buffer, str | os.PathLike):
        return Path(path_or_buffer).name
    return Path(str(getattr(path_or_buffer, "name", "csv"))).name


def _read_text_csv(path_or_buffer: str | os.PathLike[str] | IO[str], source: str,
                   nrows: int | None = None) -> pd.DataFrame:
    """Every cell as text; one-line SpecErrors for a missing file, a directory, bad bytes or
    a malformed table."""
    try:
        raw = pd.read_csv(path_or_buffer, dtype=str, keep_default_na=False, na_filter=False,
                          nrows=nrows)
    except FileNotFoundError:
        raise SpecError(f"{source}: file not found ({path_or_buffer})") from None
    except IsADirectoryError:
        raise SpecError(f"{source}: is a directory, not a CSV file") from None
    except OSError as exc:
        raise SpecError(f"{source}: cannot read the file ({exc.strerror or exc})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(f"{source}: cannot read as CSV: {reason}") from None
    raw.columns = [str(c).strip() for c in raw.columns]
    return raw


def encode_frame(
    df: pd.DataFrame, domain: Domain, *, ignore_extra: bool = False, source: str = "dataframe"
) -> Dataset:
    """Code a frame of raw values (labels, numbers, codes) over a public domain.

    Args:
        df: one column per domain attribute, matched by name, in any order.
        domain: the public domain.
        ignore_extra: drop columns that are not domain attributes instead of failing.
        source: error-message prefix.

    Returns:
        The data set, columns in domain order.

    Raises:
        SpecError: missing or extra columns, or a bad value.
    """
    check_columns(df.columns, domain, source=source, ignore_extra=ignore_extra)
    by_name = {str(c): c for c in df.columns}
    codes = {a.name: encode(df[by_name[a.name]], a, source=source) for a in domain}
    return Dataset(pd.DataFrame(codes, columns=list(domain.names)), domain)


def infer_domain(
    df: pd.DataFrame,
    warn: bool = True,
    *,
    numeric: Iterable[str] = (),
    bins: int = 10,
    max_codes: int = 1000,
) -> Domain:
    """Guess a domain from the data itself. This LEAKS the private data; prefer a public one.

    Rules per column: non-negative integers up to ``max_codes - 1`` become codes ``0..max``;
    other integers become unit-width bins ``[min, max + 1)`` (or ``bins`` equal-width bins when
    that would exceed ``max_codes``); non-integral numbers become ``bins`` equal-width bins over
    ``[min, max]``; anything else (text, booleans) becomes sorted labels. A domain inferred here
    loads the same table back through :func:`load_csv`.

    Args:
        df: the (private) table.
        warn: emit a :class:`PrivacyLeakWarning` (leave on unless the data are public).
        numeric: columns to mark ``numeric`` (ordered); binned columns always are.
        bins: number of equal-width bins for non-integral or wide-ranged numeric columns.
        max_codes: the most integer codes a column may get before it is binned instead.

    Returns:
        A domain with one attribute per column, in column order.

    Raises:
        SpecError: a missing value, or an unknown name in ``numeric``.
    """
    if warn:
        warnings.warn(
            "infer_domain: the domain (sizes, labels, value ranges) is read off the private "
            "records, which leaks information about them and voids differential privacy; "
            "pass a public domain instead",
            PrivacyLeakWarning,
            stacklevel=2,
        )
    columns = [str(c) for c in df.columns]
    ordered = set(numeric)
    unknown = sorted(ordered - set(columns))
    if unknown:
        raise SpecError(f"infer_domain.numeric: unknown columns {unknown}; columns: {columns}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise SpecError(f"infer_domain.bins: must be a positive integer, got {bins!r}")
    attributes = []
    for label, name in zip(df.columns, columns, strict=True):
        kind = "numeric" if name in ordered else "categorical"
        attributes.append(_infer_attribute(df[label], name, kind, bins, max_codes))
    return Domain(tuple(attributes))


def _infer_attribute(
    values: pd.Series, name: str, kind: str, bins: int, max_codes: int
) -> Attribute:
    missing = int(values.isna().sum())
    if missing:
        raise SpecError(f"infer_domain: column {name!r}: {missing} missing values")
    if len(values) == 0:
        raise SpecError(f"infer_domain: column {name!r}: no values to infer from")
    is_number = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if not is_number:
        labels = sorted({label_text(v) for v in values.tolist()})
        return Attribute(name, len(labels), kind, labels=tuple(labels))
    numbers = values.to_numpy(dtype=np.float64)
    low, high = float(numbers.min()), float(numbers.max())
    if np.all(numbers == np.floor(numbers)):
        if low >= 0 and high < max_codes:
            return Attribute(name, int(high) + 1, kind)
        if high - low + 1 <= max_codes:
            edges = np.arange(low, high + 2)
            return Attribute(name, len(edges) - 1, "numeric", bin_edges=tuple(edges))
        high += 1.0  # integers: the bin [.., high + 1) holds the maximum
    else:
        high = float(np.nextafter(high, np.inf))  # bins are half-open; keep the maximum in
    count = bins if np.all(np.diff(np.linspace(low, high, bins + 1)) > 0) else 1
    edges = np.linspace(low, high, count + 1)
    edges[-1] = high
    return Attribute(name, count, "numeric", bin_edges=tuple(edges))
