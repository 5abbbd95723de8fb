"""Readable query labels: "age 30-34, sex female" instead of ``marginal(age, sex) [48]``.

A query of a product term is one row of each attribute's 1-D block; each row is described by
the values it counts, in the domain's value labels (``labels``, else the bin ``[lo, hi)``,
else the value index):

* one value: ``sex female``;
* every value: nothing (the attribute is summed over); a query summing over every attribute
  reads ``total``;
* a run of values starting at the first: ``age <= 34`` (a prefix; ``income < 20`` for bins);
* another run: ``age 30 to 34`` (``income [10, 50)`` for bins);
* a few scattered values: their names (``race white, black or asian``); anything else (weights,
  many gaps): its place (``row 3 of age's random``).

Queries of non-product terms (explicit rows over a marginal) keep ``term [i]``. Labels that
would repeat within a workload get the term's label appended, so every label names one query.
"""

from __future__ import annotations

import collections
import itertools
import threading
import weakref

import numpy as np

from engine.domain import Attribute
from engine.errors import SpecError, suggest
from engine.linalg.matrix import Matrix
from engine.workloads.workload import Workload

#: Largest block (entries) described row by row; larger blocks keep ``term [i]`` labels.
DESCRIBED_BLOCK_ENTRIES = 4_000_000


def value_label(attribute: Attribute, value: int) -> str:
    """The display label of one value of ``attribute``."""
    if attribute.labels is not None:
        return attribute.labels[value]
    if attribute.bin_edges is not None:
        lo, hi = attribute.bin_edges[value], attribute.bin_edges[value + 1]
        return f"[{lo:g}, {hi:g})"
    return str(value)


#: A row that counts at most this many scattered values names them ("white, black or asian").
LISTED_VALUES = 4


def scattered_values(attribute: Attribute, row: np.ndarray, index: int, block: str) -> str:
    """Words for a row that is not one run of values: the values it counts when it counts a
    few with weight 1 (``white, black or asian``), else its place (``row 69 of race's
    matrix``)."""
    support = np.flatnonzero(row)
    if 0 < support.size <= LISTED_VALUES and np.allclose(row[support], 1.0):
        names = [value_label(attribute, int(v)) for v in support]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"row {index} of {attribute.name}'s {block}"


def describe_row(attribute: Attribute, row: np.ndarray, index: int, block: str) -> str:
    """Words for one row of a 1-D block over ``attribute`` ('' when it sums every value)."""
    support = np.flatnonzero(row)
    ones = support.size > 0 and np.allclose(row[support], 1.0)
    contiguous = support.size > 0 and support[-1] - support[0] + 1 == support.size
    if not (ones and contiguous):
        words = scattered_values(attribute, row, index, block)
        return words if words.startswith("row ") else f"{attribute.name} {words}"
    lo, hi = int(support[0]), int(support[-1])
    if lo == 0 and hi == attribute.size - 1:
        return ""
    if lo == hi:
        return f"{attribute.name} {value_label(attribute, lo)}"
    if attribute.labels is None and attribute.bin_edges is not None:
        edges = attribute.bin_edges
        if lo == 0:
            return f"{attribute.name} < {edges[hi + 1]:g}"
        return f"{attribute.name} [{edges[lo]:g}, {edges[hi + 1]:g})"
    if lo == 0 and attribute.kind == "numeric":
        return f"{attribute.name} <= {value_label(attribute, hi)}"
    return f"{attribute.name} {value_label(attribute, lo)} to {value_label(attribute, hi)}"


def run_value(attribute: Attribute, lo: int, hi: int) -> str:
    """The values ``lo..hi`` (inclusive) of ``attribute`` as a table cell: ``female``,
    ``30-39`` (labels or whole-number bin edges joined by a dash), ``[0.5, 2.5)`` (other bins),
    ``3-7`` (value indices)."""
    edges = attribute.bin_edges
    if attribute.labels is None and edges is not None:
        low, high = edges[lo], edges[hi + 1]
        if float(low).is_integer() and float(high).is_integer():
            last = int(high) - 1
            return f"{int(low)}" if last <= int(low) else f"{int(low)}-{last}"
        return f"[{low:g}, {high:g})"
    if lo == hi:
        return value_label(attribute, lo)
    return f"{value_label(attribute, lo)}-{value_label(attribute, hi)}"


def row_value(attribute: Attribute, row: np.ndarray, index: int, block: str) -> str:
    """One row of a 1-D block over ``attribute`` as a table cell: ``total`` when it sums every
    value, the value or run of values it counts (:func:`run_value`), else
    the few values it counts, or ``row <index> of <attribute>'s <block>`` (weights or many
    gaps)."""
    support = np.flatnonzero(row)
    ones = support.size > 0 and np.allclose(row[support], 1.0)
    contiguous = support.size > 0 and support[-1] - support[0] + 1 == support.size
    if not (ones and contiguous):
        return scattered_values(attribute, row, index, block)
    lo, hi = int(support[0]), int(support[-1])
    if lo == 0 and hi == attribute.size - 1 and attribute.size > 1:
        return "total"
    return run_value(attribute, lo, hi)


def _block_rows(block: Matrix) -> np.ndarray | None:
    rows, cols = block.shape
    if rows * cols > DESCRIBED_BLOCK_ENTRIES:
        return None
    return np.asarray(block.dense(), dtype=float)


def readable_labels(workload: Workload, limit: int = 1_000_000) -> list[str]:
    """One readable, distinct label per workload query, in query order.

    Raises:
        ValueError: when the workload has more than ``limit`` queries.
    """
    if workload.num_queries > limit:
        raise ValueError(f"workload has {workload.num_queries:,} queries; labels are listed "
                         f"up to {limit:,}")
    with _LOCK:
        known = _LABELS.get(workload)
        building = _BUILDING.setdefault(workload, threading.Lock()) if known is None else None
    if building is not None:
        # One build per workload: a page asks from several threads at once when a plan
        # arrives, and a second build of 600,000 labels would only hold the interpreter lock
        # (and the web thread) twice as long.
        with building:
            with _LOCK:
                known = _LABELS.get(workload)
            if known is None:
                known = _labels(workload)
                with _LOCK:
                    _LABELS[workload] = known
    return list(known)


_LOCK = threading.Lock()
#: labels already built, per workload object (a page asks for them on every redraw)
_LABELS: weakref.WeakKeyDictionary[Workload, tuple[str, ...]] = weakref.WeakKeyDictionary()
#: per workload object, held while its labels are built
_BUILDING: weakref.WeakKeyDictionary[Workload, threading.Lock] = weakref.WeakKeyDictionary()


def _labels(workload: Workload) -> tuple[str, ...]:
    domain = workload.domain
    labels: list[str] = []
    owners: list[str] = []
    for term in workload.terms:
        dense = None if term.factors is None else [_block_rows(f) for f in term.factors]
        if dense is None or any(d is None for d in dense):
            labels += [f"{term.label} [{i}]" for i in range(term.num_queries)]
            owners += [term.label] * term.num_queries
            continue
        attrs = [domain.attributes[a] for a in term.attrs]
        blocks = [getattr(f, "name", "block") for f in term.factors]
        described = [[describe_row(attr, rows[i], i, str(name)) for i in range(rows.shape[0])]
                     for attr, rows, name in zip(attrs, dense, blocks, strict=True)]
        # Row-major like the term's queries (the last attribute's row varies fastest);
        # empty descriptions (summed-over attributes) leave no separator behind.
        combined = [""]
        for rows in described:
            combined = [f"{head}, {row}" if head and row else head or row
                        for head, row in itertools.product(combined, rows)]
        labels += [label or "total" for label in combined]
        owners += [term.label] * term.num_queries
    return tuple(_distinct(labels, owners))


def _distinct(labels: list[str], owners: list[str]) -> list[str]:
    counts = collections.Counter(labels)
    out = [f"{label} ({owner})" if counts[label] > 1 else label
           for label, owner in zip(labels, owners, strict=True)]
    if len(set(out)) == len(out):
        return out
    seen: dict[str, int] = {}
    for i, label in enumerate(out):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            out[i] = f"{label} #{seen[label]}"
    return out


def find_query(workload: Workload, label: str) -> int:
    """The index of the query with this readable label (case and spaces ignored).

    Raises:
        SpecError: naming the label and the closest one when none matches.
    """
    labels = readable_labels(workload)
    with _LOCK:
        index = _INDEX.get(workload)
    if index is None:
        index = {}
        for i, known in enumerate(labels):
            index.setdefault(_normal(known), i)
        with _LOCK:
            _INDEX[workload] = index
    found = index.get(_normal(label))
    if found is not None:
        return found
    first = label.split()[0] if label.split() else ""
    near = [known for known in labels if known.startswith(first)][:5000]
    raise SpecError(f"query: no query labelled {label!r}{suggest(label, near)}")


#: normalised label -> query index, per workload object
_INDEX: weakref.WeakKeyDictionary[Workload, dict[str, int]] = weakref.WeakKeyDictionary()


def _normal(text: str) -> str:
    return " ".join(text.lower().replace(",", " , ").split())
