"""Load a user's hierarchy from CSV, and write one.

Format (UTF-8, comma-separated, one header row). The header names the region levels from the
root down, then ``size`` and optionally ``count``, in either order (columns are read by their
header names, not their positions):

* **count rows** (with a ``count`` column): one row per (leaf region, size) with the number
  of groups of that size; sizes not listed count 0 and repeated rows add up::

      nation,state,county,size,count
      US,GA,Fulton,1,2
      US,GA,Fulton,3,1
      US,NY,Kings,2,1

* **group rows** (no ``count`` column): one row per group (household) with its size::

      nation,state,county,size
      US,GA,Fulton,1

Every row names a full path (leaves at one depth; an empty region cell is a ragged tree),
the first level has a single region, sizes are non-negative integers and counts are
non-negative integers. The size set defaults to a 0 bucket, ``1 .. max size seen`` and an
open top bucket; pass ``max_size`` to fix k (larger sizes then fall into the open top bucket,
or are an error when ``open_top=False``).
"""

from __future__ import annotations

import csv
import io as _io
from pathlib import Path

import numpy as np

from engine.analysis.cost_model import estimate_census, require
from engine.errors import SpecError
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet

#: Largest group size or count in a file, and of the counts' sum (64-bit integer tables).
MAX_COUNT = 2**62

def load_hierarchy_csv(source: str | Path | _io.TextIOBase, max_size: int | None = None,
                       zero: bool = True, open_top: bool = True) -> Hierarchy:
    """Read a hierarchy in the format of the module docstring.

    Args:
        source: a path or an open text stream.
        max_size: k, the top size bucket (default: the largest size in the file).
        zero: keep a bucket for size 0.
        open_top: make the top bucket "k or more".

    Raises:
        SpecError: one line naming the row and column of the first problem.
    """
    name = str(source) if isinstance(source, str | Path) else "csv"
    rows = _read_rows(source, name)
    if not rows:
        raise SpecError(f"{name}: empty file (expected a header row)")
    header = [h.strip() for h in rows[0]]
    if "size" not in header:
        raise SpecError(f"{name}: header needs a 'size' column, got {header}")
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise SpecError(f"{name}: repeated header columns {repeated}")
    s_col = header.index("size")
    c_col = header.index("count") if "count" in header else None
    first_role = min(i for i in (s_col, c_col) if i is not None)
    level_cols = list(range(first_role))
    extra = [h for i, h in enumerate(header[first_role:], first_role) if i not in (s_col, c_col)]
    if not level_cols:
        raise SpecError(f"{name}: header needs region level columns before 'size' and "
                        "'count'")
    if extra:
        raise SpecError(f"{name}: unexpected columns {extra} (allowed after the levels: "
                        "size, count)")
    if max_size is not None and (isinstance(max_size, bool) or int(max_size) < 1):
        raise SpecError(f"max_size: must be an integer >= 1, got {max_size!r}")
    paths, sizes, counts = [], [], []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise SpecError(f"{name}: row {line} has {len(row)} fields, the header has "
                            f"{len(header)}")
        path = tuple(row[i].strip() for i in level_cols)
        if any(p == "" for p in path):
            lev = header[level_cols[path.index("")]]
            raise SpecError(f"{name}: row {line} has an empty {lev!r} (ragged tree: every "
                            "leaf must be at the same depth)")
        sizes.append(_integer(row[s_col], name, line, "size"))
        counts.append(1 if c_col is None else _integer(row[c_col], name, line, "count"))
        paths.append(path)
    if not paths:
        raise SpecError(f"{name}: no data rows")
    if sum(counts) > MAX_COUNT:
        raise SpecError(f"{name}: count: the counts add up to {sum(counts):,}, past the "
                        f"limit {MAX_COUNT:,}")
    size_arr = np.array(sizes, dtype=np.int64)
    count_arr = np.array(counts, dtype=np.int64)
    top = int(size_arr.max()) if max_size is None else int(max_size)
    leaves = list(dict.fromkeys(paths))
    regions = len(leaves) + sum(len({p[:d] for p in leaves}) for d in range(1, len(level_cols)))
    who = f"{name}: size" if max_size is None else "--max-size"
    require(estimate_census(float(regions), float(max(top, 1) + 2)), who)
    size_set = SizeSet(max(top, 1), zero=zero, open_top=open_top)
    bad = np.flatnonzero((size_arr < (0 if zero else 1)) |
                         ((size_arr > size_set.max_size) & (not open_top)))
    if bad.size:
        line = int(bad[0]) + 2
        size_set.bucket(size_arr[bad[:1]], where=f"{name}: row {line}: size")
    tree = RegionTree.from_paths(leaves, [header[i] for i in level_cols])
    depth = tree.depth - 1
    leaf_index = {tree.path(depth, j): j for j in range(tree.num_leaves)}
    rows_idx = np.array([leaf_index[p] for p in paths], dtype=np.int64)
    matrix = np.zeros((tree.num_leaves, size_set.k), dtype=np.int64)
    np.add.at(matrix, (rows_idx, size_set.bucket(size_arr)), count_arr)
    return Hierarchy(tree, size_set, matrix, name=Path(name).name)


def _integer(cell: str, name: str, line: int, column: str) -> int:
    text = cell.strip()
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            f = float("nan")
        if not f.is_integer():
            raise SpecError(f"{name}: row {line}: {column} {text!r} is not an integer") from None
        value = int(f)
    if value < 0:
        raise SpecError(f"{name}: row {line}: {column} {value} is negative")
    if value > MAX_COUNT:
        raise SpecError(f"{name}: row {line}: {column} {value} is past the limit {MAX_COUNT:,}")
    return value


def _read_rows(source: str | Path | _io.TextIOBase, name: str) -> list[list[str]]:
    """Every CSV row of a UTF-8 file or text stream; one-line SpecErrors for what cannot be
    read (a directory, bad bytes, a field longer than the csv module's limit)."""
    try:
        if isinstance(source, str | Path):
            with open(source, newline="", encoding="utf-8") as fh:
                return list(csv.reader(fh))
        return list(csv.reader(source))
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start:exc.start + 1]
        raise SpecError(f"{name}: not UTF-8 text (byte {exc.start} is {bad!r}); save the file "
                        "as UTF-8") from None
    except csv.Error as exc:
        raise SpecError(f"{name}: cannot read as CSV: {exc}") from None
    except OSError as exc:
        raise SpecError(f"{name}: cannot read the file: {exc.strerror or exc}") from None


def write_hierarchy_csv(hierarchy: Hierarchy, target: str | Path | _io.TextIOBase) -> None:
    """Write the leaf histograms as count rows (zero counts omitted)."""
    if isinstance(target, str | Path):
        with open(target, "w", newline="", encoding="utf-8") as fh:
            _write_rows(hierarchy, fh)
    else:
        _write_rows(hierarchy, target)


def _write_rows(hierarchy: Hierarchy, fh: _io.TextIOBase) -> None:
    tree, sizes = hierarchy.tree, hierarchy.sizes
    writer = csv.writer(fh)
    writer.writerow([*tree.level_names, "size", "count"])
    depth = tree.depth - 1
    values = sizes.values
    for leaf, bucket in np.argwhere(hierarchy.leaf_counts > 0):
        writer.writerow([*tree.path(depth, int(leaf)), int(values[bucket]),
                         int(hierarchy.leaf_counts[leaf, bucket])])
