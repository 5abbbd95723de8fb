"""Parse and validate the ``workload:`` block of a scenario spec.

Errors are :class:`~engine.errors.SpecError` with one line that names the field path, e.g.
``workload[1].product.age: unknown block 'prefx' (did you mean 'prefix'?)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.domain import Attribute, Domain
from engine.errors import SpecError, suggest
from engine.workloads.blocks import (
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    SuffixBlock,
    TotalBlock,
    WidthRangeBlock,
    random_block,
)
from engine.workloads.groups import (
    Group,
    Marginals,
    PairQueries,
    PrefixMarginals,
    Product,
    SubsetMatrix,
)
from engine.workloads.workload import Workload

BLOCK_NAMES = ("identity", "total", "prefix", "suffix", "all_range", "range", "circular_range",
               "permuted", "random", "matrix")
BLOCK_OPTIONS = {"range": ("width",), "circular_range": ("width",), "permuted": ("of", "seed"),
                 "random": ("count", "p", "seed"), "matrix": ("rows",)}
GROUP_KINDS = ("product", "marginals", "prefix_marginals", "affine", "abs_diff", "random",
               "matrix")

#: Largest number of explicit cells a random/matrix group may span.
MAX_EXPLICIT_CELLS = 1_000_000
#: Most entries (rows x cells) of the explicit rows a random block or group draws (400 MB).
MAX_EXPLICIT_ENTRIES = 50_000_000


def _explicit_entries(count: int, cells: int, where: str) -> int:
    if count * cells > MAX_EXPLICIT_ENTRIES:
        raise SpecError(f"{where}: {count:,} random rows over {cells:,} cells make "
                        f"{count * cells:,} entries; the limit is {MAX_EXPLICIT_ENTRIES:,}")
    return count


def _int(value: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise SpecError(f"{where}: expected an integer, got {value!r}")
    v = int(value)
    if lo is not None and v < lo or hi is not None and v > hi:
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise SpecError(f"{where}: must be {rng}, got {v}")
    return v


def _number(value: Any, where: str, lo: float | None = None, hi: float | None = None,
            open_lo: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise SpecError(f"{where}: expected a number, got {value!r}")
    v = float(value)
    if not np.isfinite(v) or (lo is not None and (v < lo or (open_lo and v == lo))) or (
            hi is not None and v > hi):
        bound = f"> {lo}" if open_lo else f">= {lo}" if lo is not None else ""
        bound += f" and <= {hi}" if hi is not None else ""
        raise SpecError(f"{where}: must be a finite number {bound}".rstrip() + f", got {v}")
    return v


def _check_keys(spec: Mapping, allowed: tuple[str, ...], where: str) -> None:
    for key in spec:
        if key not in allowed:
            raise SpecError(f"{where}.{key}: unknown key{suggest(str(key), allowed)}; "
                            f"allowed: {', '.join(allowed)}")


def _rows(value: Any, where: str, width: int) -> np.ndarray:
    try:
        rows = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: expected a list of rows of numbers") from None
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise SpecError(f"{where}: expected a non-empty list of rows (a 2-D array)")
    if rows.shape[1] != width:
        raise SpecError(f"{where}: each row needs {width} entries (one per cell), "
                        f"got {rows.shape[1]}")
    if not np.all(np.isfinite(rows)):
        raise SpecError(f"{where}: entries must be finite numbers")
    return rows


def parse_block(spec: Any, attr: Attribute, where: str) -> Block:
    """Build a 1-D block from its spec (a bare name or a mapping with ``block:``)."""
    n = attr.size
    if isinstance(spec, str):
        name, opts = spec, {}
    elif isinstance(spec, Mapping):
        if "block" not in spec:
            for key in spec:  # a misspelt 'block' key is the likely mistake: name it
                hint = suggest(str(key), ("block",))
                if hint:
                    raise SpecError(f"{where}.{key}: unknown key{hint}")
            raise SpecError(f"{where}.block: missing (one of {', '.join(BLOCK_NAMES)})")
        name, opts = spec["block"], {k: v for k, v in spec.items() if k != "block"}
    else:
        raise SpecError(f"{where}: expected a block name or a mapping with 'block', "
                        f"got {spec!r}")
    if name not in BLOCK_NAMES:
        raise SpecError(f"{where}: unknown block {name!r}{suggest(str(name), BLOCK_NAMES)}; "
                        f"allowed: {', '.join(BLOCK_NAMES)}")
    _check_keys(opts, BLOCK_OPTIONS.get(name, ()), where)
    if name == "identity":
        return IdentityBlock(n)
    if name == "total":
        return TotalBlock(n)
    if name == "prefix":
        return PrefixBlock(n)
    if name == "suffix":
        return SuffixBlock(n)
    if name == "all_range":
        return AllRangeBlock(n)
    if name == "range":
        if "width" not in opts:
            raise SpecError(f"{where}.width: missing (block 'range' needs a width)")
        return WidthRangeBlock(n, _int(opts["width"], f"{where}.width", 1, n))
    if name == "circular_range":
        width = opts.get("width")
        return CircularRangeBlock(n, None if width is None else _int(width, f"{where}.width",
                                                                     1, n))
    if name == "permuted":
        if "of" not in opts:
            raise SpecError(f"{where}.of: missing (the block to permute)")
        base = parse_block(opts["of"], attr, f"{where}.of")
        return PermutedBlock(base, _int(opts.get("seed", 0), f"{where}.seed", 0))
    if name == "random":
        count = _explicit_entries(_int(opts.get("count", n), f"{where}.count", 1, 1_000_000),
                                  n, f"{where}.count")
        p = _number(opts.get("p", 0.5), f"{where}.p", 0.0, 1.0, open_lo=True)
        return random_block(n, count, p, _int(opts.get("seed", 0), f"{where}.seed", 0))
    if "rows" not in opts:
        raise SpecError(f"{where}.rows: missing (block 'matrix' needs rows)")
    return MatrixBlock(_rows(opts["rows"], f"{where}.rows", n))


def _subset_list(value: Any, domain: Domain, where: str) -> tuple[tuple[str, ...], ...]:
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


def _marginals(body: Any, domain: Domain, where: str, cls: type[Marginals],
               weight: float) -> Group:
    if not isinstance(body, Mapping):
        raise SpecError(f"{where}: expected a mapping with one of k, upto, sets")
    _check_keys(body, ("k", "upto", "sets"), where)
    given = [k for k in ("k", "upto", "sets") if k in body]
    if len(given) != 1:
        raise SpecError(f"{where}: give exactly one of k, upto, sets (got "
                        f"{', '.join(given) or 'none'})")
    d = len(domain)
    if "k" in body:
        return cls(k=_int(body["k"], f"{where}.k", 0, d), weight=weight)
    if "upto" in body:
        return cls(upto=_int(body["upto"], f"{where}.upto", 0, d), weight=weight)
    return cls(sets=_subset_list(body["sets"], domain, f"{where}.sets"), weight=weight)


def _attr_pair(body: Any, domain: Domain, where: str) -> tuple[str, str]:
    if not isinstance(body, list | tuple) or len(body) != 2:
        raise SpecError(f"{where}: expected a list of two attribute names")
    a, b = (str(v) for v in body)
    domain.index(a, f"{where}[0]")
    domain.index(b, f"{where}[1]")
    if a == b:
        raise SpecError(f"{where}: the two attributes must differ")
    return a, b


def _on(value: Any, domain: Domain, where: str) -> tuple[str, ...]:
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


def parse_group(spec: Any, domain: Domain, index: int) -> Group:
    """Parse one item of the ``workload:`` list."""
    where = f"workload[{index}]"
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: expected a mapping such as {{product: {{...}}}}")
    kinds = [k for k in spec if k != "weight"]
    if len(kinds) != 1:
        if not kinds:
            raise SpecError(f"{where}: missing the group kind (one of {', '.join(GROUP_KINDS)})")
        extra = [k for k in kinds if k not in GROUP_KINDS]
        if extra:
            k = str(extra[0])
            raise SpecError(f"{where}.{k}: unknown key{suggest(k, GROUP_KINDS + ('weight',))}")
        raise SpecError(f"{where}: one group kind per item, got {', '.join(map(str, kinds))}")
    kind = str(kinds[0])
    if kind not in GROUP_KINDS:
        raise SpecError(f"{where}.{kind}: unknown group kind{suggest(kind, GROUP_KINDS)}; "
                        f"allowed: {', '.join(GROUP_KINDS)}")
    weight = _number(spec.get("weight", 1.0), f"{where}.weight", 0.0, open_lo=True)
    body = spec[kind]
    w = f"{where}.{kind}"
    if kind == "product":
        if not isinstance(body, Mapping):
            raise SpecError(f"{w}: expected a mapping attribute -> block")
        blocks = []
        for name, bspec in body.items():
            attr = domain.attributes[domain.index(str(name), f"{w}.{name}")]
            blocks.append((str(name), parse_block(bspec, attr, f"{w}.{name}")))
        return Product(tuple(blocks), weight=weight)
    if kind == "marginals":
        return _marginals(body, domain, w, Marginals, weight)
    if kind == "prefix_marginals":
        return _marginals(body, domain, w, PrefixMarginals, weight)
    if kind in ("affine", "abs_diff"):
        return PairQueries(attrs=_attr_pair(body, domain, w), pair_kind=kind, weight=weight)
    if not isinstance(body, Mapping):
        raise SpecError(f"{w}: expected a mapping with 'on'")
    if kind == "random":
        _check_keys(body, ("on", "count", "p", "seed"), w)
        on = _on(body.get("on"), domain, f"{w}.on")
        count = _explicit_entries(_int(body.get("count", 16), f"{w}.count", 1, 100_000),
                                  int(np.prod([domain[a].size for a in on])), f"{w}.count")
        return SubsetMatrix(on=on, count=count,
                            p=_number(body.get("p", 0.5), f"{w}.p", 0.0, 1.0, open_lo=True),
                            seed=_int(body.get("seed", 0), f"{w}.seed", 0), weight=weight)
    _check_keys(body, ("on", "rows"), w)
    on = _on(body.get("on"), domain, f"{w}.on")
    cells = int(np.prod([domain[n].size for n in on]))
    if "rows" not in body:
        raise SpecError(f"{w}.rows: missing")
    rows = _rows(body["rows"], f"{w}.rows", cells)
    return SubsetMatrix(on=on, rows=tuple(tuple(r) for r in rows.tolist()), weight=weight)


def parse_workload(spec: Any, domain: Domain) -> Workload:
    """Parse the ``workload:`` list into a :class:`Workload`."""
    if isinstance(spec, Mapping):
        spec = [spec]
    if not isinstance(spec, list | tuple) or not spec:
        raise SpecError("workload: expected a non-empty list of query groups")
    return Workload(domain, tuple(parse_group(g, domain, i) for i, g in enumerate(spec)))
