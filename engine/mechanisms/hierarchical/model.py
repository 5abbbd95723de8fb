"""The PGSR data model: a region tree, a group-size set and per-region group-size histograms.

A *group* is a household (or any unit); its *size* is the number of individuals in it. For
every region ``r`` of a geographic hierarchy (nation -> states -> counties, any depth, every
leaf at the same depth) the data is the histogram ``c^r[i]`` = number of groups of size
bucket ``i`` in ``r``. Internal regions hold the sums of their children. The total number of
groups ``n`` is public (it is the same at every level); everything else is private.

Layout conventions (used by every module of this package):

* regions are stored level by level; level 0 is the root (one region). Within a level the
  regions are ordered so that the children of one parent are contiguous and parents appear
  in their own level's order (a depth-first order, which the chain mechanism relies on);
* a per-level count array has shape ``(regions in the level, buckets)``.

Example (the paper's running example, US -> {GA, NY}, sizes 1..3):
    >>> tree = RegionTree.from_paths([("US", "GA"), ("US", "NY")])
    >>> h = Hierarchy(tree, SizeSet(3, zero=False, open_top=False), [[2, 0, 1], [1, 1, 1]])
    >>> h.levels[0].tolist(), h.total
    ([[3, 1, 2]], 6)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from engine.errors import SpecError

#: absolute tolerance when checking real-valued (relaxed / GLS) outputs for consistency
CONSISTENCY_ATOL = 1e-6


@dataclass(frozen=True)
class SizeSet:
    """The group-size buckets ``G``.

    Buckets are ``0`` (when ``zero``), then ``1 .. max_size``; with ``open_top`` the last
    bucket means "``max_size`` or more". Including the 0 bucket and an open top keeps every
    neighbouring dataset (one individual added or removed) inside the set, so the number of
    groups ``n`` is invariant and the sensitivities 2 (plain) and 1 (cumulative) hold at the
    edges too (spec pitfall P8). Without them the paper's assumption applies: moves that
    would leave the set are not part of the neighbour relation.

    Attributes:
        max_size: largest named size k (>= 1).
        zero: whether a bucket for empty groups (size 0) is present.
        open_top: whether the last bucket collects every size >= ``max_size``.
    """

    max_size: int
    zero: bool = True
    open_top: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int | np.integer):
            raise SpecError(f"sizes.max_size: expected an integer >= 1, got {self.max_size!r}")
        if self.max_size < 1:
            raise SpecError(f"sizes.max_size: must be >= 1, got {self.max_size}")
        object.__setattr__(self, "max_size", int(self.max_size))

    @property
    def k(self) -> int:
        """Number of buckets |G|."""
        return self.max_size + (1 if self.zero else 0)

    @property
    def values(self) -> np.ndarray:
        """The size each bucket stands for (its lower end for the open top bucket)."""
        return np.arange(0 if self.zero else 1, self.max_size + 1)

    @property
    def labels(self) -> list[str]:
        """Bucket labels, e.g. ``['0', '1', ..., '50+']``."""
        out = [str(v) for v in self.values]
        if self.open_top:
            out[-1] += "+"
        return out

    def bucket(self, sizes: Iterable[int] | np.ndarray, where: str = "size") -> np.ndarray:
        """Bucket index of each group size; a SpecError names the first size outside the set."""
        s = np.asarray(sizes)
        if s.size and not np.issubdtype(s.dtype, np.integer):
            if not np.all(np.isfinite(s)) or np.any(s != np.round(s)):
                bad = s.reshape(-1)[~(np.isfinite(s.reshape(-1)) &
                                      (s.reshape(-1) == np.round(s.reshape(-1))))][0]
                raise SpecError(f"{where}: group sizes must be integers, got {bad!r}")
            s = s.astype(np.int64)
        lo = 0 if self.zero else 1
        bad = (s < lo) | ((s > self.max_size) & (not self.open_top))
        if np.any(bad):
            first = int(s.reshape(-1)[np.argmax(bad.reshape(-1))])
            allowed = f"{lo}..{self.max_size}" + (" or more" if self.open_top else "")
            raise SpecError(f"{where}: group size {first} is outside the size set "
                            f"(allowed {allowed})")
        return np.minimum(s, self.max_size) - lo

    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"max_size": self.max_size, "zero": self.zero, "open_top": self.open_top}


@dataclass(frozen=True, eq=False)
class RegionTree:
    """A rooted region tree whose leaves all lie at the same depth.

    Attributes:
        names: per level, the region names (level 0 holds the single root).
        parents: per level >= 1, the index of each region's parent in the level above; the
            array is non-decreasing (children of one parent are contiguous).
        level_names: a name per level, e.g. ``("nation", "state", "county")``.
    """

    names: tuple[tuple[str, ...], ...]
    parents: tuple[np.ndarray, ...]
    level_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = tuple(tuple(str(n) for n in level) for level in self.names)
        parents = tuple(np.asarray(p, dtype=np.int64).reshape(-1) for p in self.parents)
        if not names or len(names[0]) != 1:
            raise SpecError("tree: level 0 must hold exactly one root region")
        if len(parents) != len(names) - 1:
            raise SpecError(f"tree: {len(names)} levels need {len(names) - 1} parent arrays, "
                            f"got {len(parents)}")
        for lev, p in enumerate(parents, start=1):
            if len(p) != len(names[lev]):
                raise SpecError(f"tree.level[{lev}]: {len(names[lev])} names but {len(p)} "
                                "parents")
            if len(p) == 0:
                raise SpecError(f"tree.level[{lev}]: has no regions")
            if p.min() < 0 or p.max() >= len(names[lev - 1]):
                raise SpecError(f"tree.level[{lev}]: parent index out of range")
            if np.any(np.diff(p) < 0):
                raise SpecError(f"tree.level[{lev}]: children of one parent must be "
                                "contiguous (parents non-decreasing)")
            childless = np.setdiff1d(np.arange(len(names[lev - 1])), p)
            if childless.size:
                r = names[lev - 1][int(childless[0])]
                raise SpecError(f"tree: region {r!r} at level {lev - 1} has no children but "
                                f"leaves are at level {len(names) - 1} (ragged tree; pad it "
                                "with single-child copies)")
        level_names = tuple(self.level_names) or tuple(f"level {i + 1}"
                                                       for i in range(len(names)))
        if len(level_names) != len(names):
            raise SpecError(f"tree.level_names: {len(level_names)} names for {len(names)} "
                            "levels")
        for p in parents:
            p.setflags(write=False)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "level_names", level_names)

    # ----- construction ---------------------------------------------------------------
    @classmethod
    def from_paths(cls, paths: Iterable[Sequence[str]], level_names: Sequence[str] = ()
                   ) -> RegionTree:
        """A tree from leaf paths ``(root, ..., leaf)``; regions are identified by path.

        Regions keep their order of first appearance within each parent.

        Raises:
            SpecError: when paths have different lengths (ragged), there is more than one
                root, or a leaf path repeats.
        """
        paths = [tuple(str(x) for x in p) for p in paths]
        if not paths:
            raise SpecError("tree: needs at least one leaf path")
        depth = len(paths[0])
        for p in paths:
            if len(p) != depth:
                raise SpecError(f"tree: leaf {'/'.join(p)!r} is at depth {len(p)} but "
                                f"{'/'.join(paths[0])!r} is at depth {depth} (ragged tree)")
            if any(x == "" for x in p):
                raise SpecError(f"tree: leaf path {'/'.join(p)!r} has an empty region name "
                                "(ragged tree)")
        if len({p[0] for p in paths}) != 1:
            roots = sorted({p[0] for p in paths})
            raise SpecError(f"tree: expected one root region, got {len(roots)}: "
                            f"{', '.join(roots[:5])}")
        if len(set(paths)) != len(paths):
            dup = next(p for p in paths if paths.count(p) > 1)
            raise SpecError(f"tree: leaf {'/'.join(dup)!r} appears twice")
        # index of every prefix path per level, parents ordered before children
        order: list[dict[tuple[str, ...], int]] = [{paths[0][:1]: 0}]
        parents: list[list[int]] = []
        for lev in range(1, depth):
            seen: dict[tuple[str, ...], None] = {}
            for p in paths:
                seen.setdefault(p[:lev + 1], None)
            prefixes = sorted(seen, key=lambda q: order[lev - 1][q[:-1]])  # stable sort
            order.append({q: i for i, q in enumerate(prefixes)})
            parents.append([order[lev - 1][q[:-1]] for q in prefixes])
        names = tuple(tuple(q[-1] for q in level) for level in order)
        return cls(names, tuple(np.array(p, dtype=np.int64) for p in parents),
                   tuple(level_names))

    @classmethod
    def from_fanouts(cls, fanouts: Sequence[Sequence[int]], level_names: Sequence[str] = ()
                     ) -> RegionTree:
        """A tree from per-level child counts: ``fanouts[l][j]`` = children of region j at
        level l. Regions are named ``<level name> <index>``."""
        level_names = tuple(level_names) or tuple(f"level {i + 1}"
                                                  for i in range(len(fanouts) + 1))
        names = [(level_names[0],)]
        parents = []
        for lev, f in enumerate(fanouts, start=1):
            f = np.asarray(f, dtype=np.int64)
            if len(f) != len(names[-1]) or np.any(f < 1):
                raise SpecError(f"tree.fanouts[{lev - 1}]: need one count >= 1 per region of "
                                f"level {lev - 1}")
            parents.append(np.repeat(np.arange(len(f)), f))
            names.append(tuple(f"{level_names[lev]} {j + 1}" for j in range(int(f.sum()))))
        return cls(tuple(names), tuple(parents), level_names)

    # ----- structure ------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Number of levels L (the root is level 1 in the paper's numbering)."""
        return len(self.names)

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """|R_l| for every level."""
        return tuple(len(level) for level in self.names)

    @property
    def num_regions(self) -> int:
        """|R|: regions over all levels."""
        return sum(self.level_sizes)

    @property
    def num_leaves(self) -> int:
        """Regions at the deepest level."""
        return self.level_sizes[-1]

    @cached_property
    def starts(self) -> tuple[np.ndarray, ...]:
        """Per level >= 1: index of each parent's first child (for ``np.add.reduceat``)."""
        out = []
        for lev, p in enumerate(self.parents, start=1):
            out.append(np.searchsorted(p, np.arange(self.level_sizes[lev - 1])))
        return tuple(out)

    def children(self, level: int, index: int) -> range:
        """Indices (in ``level + 1``) of the children of region ``index`` at ``level``."""
        if level >= self.depth - 1:
            return range(0)
        s = self.starts[level]
        end = s[index + 1] if index + 1 < len(s) else self.level_sizes[level + 1]
        return range(int(s[index]), int(end))

    def aggregate(self, child_values: np.ndarray, level: int) -> np.ndarray:
        """Sum the rows of a level-``level + 1`` array into its parents at ``level``."""
        return np.add.reduceat(child_values, self.starts[level], axis=0)

    def leaf_ancestors(self, level: int) -> np.ndarray:
        """For every leaf, the index of its ancestor at ``level``."""
        idx = np.arange(self.num_leaves)
        for lev in range(self.depth - 1, level, -1):
            idx = self.parents[lev - 1][idx]
        return idx

    @cached_property
    def postorder(self) -> tuple[np.ndarray, np.ndarray]:
        """``(levels, indices)`` of every region in post-order (children first, in order).

        With the level layout used here, the regions of each level appear in their stored
        order, which the chain mechanism's level-wide prefix sums rely on.
        """
        levs: list[int] = []
        idxs: list[int] = []
        stack: list[tuple[int, int, bool]] = [(0, 0, False)]
        while stack:
            lev, idx, expanded = stack.pop()
            if expanded or lev == self.depth - 1:
                levs.append(lev)
                idxs.append(idx)
                continue
            stack.append((lev, idx, True))
            stack.extend((lev + 1, c, False) for c in reversed(self.children(lev, idx)))
        return np.array(levs, dtype=np.int64), np.array(idxs, dtype=np.int64)

    def path(self, level: int, index: int) -> tuple[str, ...]:
        """Names from the root down to region ``index`` of ``level``."""
        out = [self.names[level][index]]
        for lev in range(level, 0, -1):
            index = int(self.parents[lev - 1][index])
            out.append(self.names[lev - 1][index])
        return tuple(reversed(out))

    def label(self, level: int, index: int) -> str:
        """``root/.../region`` label of a region."""
        return "/".join(self.path(level, index))

    def describe(self) -> str:
        """One line, e.g. ``3 levels: 1 nation, 51 state, 3,100 county``."""
        parts = ", ".join(f"{n:,} {name}" for n, name in zip(self.level_sizes, self.level_names,
                                                             strict=True))
        return f"{self.depth} levels: {parts}"


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """True group-size histograms of every leaf region; internal regions are their sums.

    Attributes:
        tree: the region tree.
        sizes: the group-size buckets.
        leaf_counts: ``(leaves, buckets)`` non-negative integer counts.
        name: a label for displays.
    """

    tree: RegionTree
    sizes: SizeSet
    leaf_counts: np.ndarray
    name: str = ""
    _levels: tuple[np.ndarray, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        raw = np.asarray(self.leaf_counts)
        shape = (self.tree.num_leaves, self.sizes.k)
        if raw.shape != shape:
            raise SpecError(f"counts: expected shape {shape} (leaves x size buckets), got "
                            f"{raw.shape}")
        if raw.dtype == object or not np.issubdtype(raw.dtype, np.number):
            raise SpecError("counts: must be numbers")
        if not np.issubdtype(raw.dtype, np.integer) and (
                not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw))):
            raise SpecError("counts: group counts must be integers")
        counts = raw.astype(np.int64)
        if np.any(counts < 0):
            leaf, size = np.argwhere(counts < 0)[0]
            raise SpecError(f"counts: negative count {counts[leaf, size]} for region "
                            f"{self.tree.label(self.tree.depth - 1, int(leaf))!r}, size "
                            f"{self.sizes.labels[size]}")
        counts.setflags(write=False)
        object.__setattr__(self, "leaf_counts", counts)
        levels = [counts]
        for lev in range(self.tree.depth - 2, -1, -1):
            levels.append(self.tree.aggregate(levels[-1], lev))
        for a in levels:
            a.setflags(write=False)
        object.__setattr__(self, "_levels", tuple(reversed(levels)))

    @property
    def levels(self) -> tuple[np.ndarray, ...]:
        """Per level, the ``(regions, buckets)`` histogram array."""
        return self._levels

    @property
    def total(self) -> int:
        """n: the public number of groups."""
        return int(self._levels[0].sum())

    @property
    def individuals(self) -> int:
        """N: individuals (open top bucket counted at its lower end)."""
        return int(self._levels[0][0] @ self.sizes.values)

    @property
    def num_queries(self) -> int:
        """k |R|: one query per (size bucket, region)."""
        return self.sizes.k * self.tree.num_regions

    def describe(self) -> str:
        """One line summary."""
        return (f"{self.name + ': ' if self.name else ''}{self.tree.describe()}; "
                f"{self.sizes.k} size buckets; n = {self.total:,} groups")


@dataclass(frozen=True, eq=False)
class Release:
    """A released hierarchy: per-level values and what the mechanism reports about them.

    Attributes:
        tree: the region tree.
        sizes: the size buckets.
        levels: per level, ``(regions, buckets)`` released values (integers for the
            consistent variants, reals for ``gls`` and before rounding).
        total: the public n.
        variant: the mechanism variant that produced it.
        report: timings, privacy accounting and solver facts (JSON-able).
    """

    tree: RegionTree
    sizes: SizeSet
    levels: tuple[np.ndarray, ...]
    total: int
    variant: str = ""
    report: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def checks(self) -> dict[str, int]:
        """Consistency, validity and faithfulness counts (see :func:`check_release`)."""
        return check_release(self.tree, self.levels, self.total)

    @property
    def violations(self) -> int:
        """#CV: T' parent nodes whose value differs from the sum of their children."""
        return self.checks["violations"]

    def is_consistent_integer(self) -> bool:
        """True when the release is a valid, consistent, faithful integer hierarchy."""
        c = self.checks
        return c["violations"] == 0 and c["negative"] == 0 and c["non_integer"] == 0


def check_release(tree: RegionTree, levels: Sequence[np.ndarray], total: int
                  ) -> dict[str, int]:
    """Count PGSR requirement failures of released per-level values.

    Returns:
        ``violations``: parent nodes ``(i, r)`` of T' (internal region r, every size i)
        whose value differs from the sum of its children, plus 1 when the root's sizes do
        not sum to n (the dummy root is a T' parent too); ``consistency`` and
        ``faithfulness`` split that count; ``negative`` and ``non_integer`` count cells.
        Real values are compared with an absolute tolerance of ``CONSISTENCY_ATOL``.
    """
    consistency = 0
    for lev in range(tree.depth - 1):
        sums = tree.aggregate(np.asarray(levels[lev + 1], dtype=float), lev)
        consistency += int(np.sum(~np.isclose(sums, levels[lev], rtol=0,
                                              atol=CONSISTENCY_ATOL)))
    faithful = bool(np.isclose(float(np.sum(levels[0])), total, rtol=0,
                               atol=CONSISTENCY_ATOL))
    negative = sum(int(np.sum(np.asarray(a) < -CONSISTENCY_ATOL)) for a in levels)
    non_integer = sum(int(np.sum(~np.isclose(a, np.round(a), rtol=0, atol=CONSISTENCY_ATOL)))
                      for a in levels)
    return {"violations": consistency + (0 if faithful else 1), "consistency": consistency,
            "faithfulness": 0 if faithful else 1, "negative": negative,
            "non_integer": non_integer}
