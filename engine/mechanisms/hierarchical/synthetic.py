"""Seeded synthetic censuses (nation -> states -> counties), from toy size to millions of groups.

The shape follows the paper's Census data set: a few levels of regions with skewed sizes,
household sizes with the US 2010 profile (about 27% one-person, 34% two-person, ...), the
"7 or more" mass spread over sizes 7, 8, ... in the spirit of Kuo et al.'s augmentation (each
size a fixed fraction of the one before, the fraction chosen so the 7+ mass is kept), a share of
empty units (the 0 bucket) and rare large group quarters (dormitories, prisons) spread
uniformly up to the top bucket. Everything is drawn from one seed, so a spec string names
one hierarchy exactly.

Spec strings (``key=value`` pairs separated by ``;``)::

    levels=1,51,3100;groups=20000;max_size=50;seed=0

keys: ``levels`` (regions per level, the first must be 1), ``groups`` (n), ``max_size``
(k, the open top bucket), ``seed``, ``vacant`` (share of size-0 units, default 0.1),
``quarters`` (share of group quarters, default 0.001), ``zero`` (1/0: keep the 0 bucket,
default 1), ``open_top`` (1/0, default 1). ``preset=toy`` is the paper's running example and
``preset=census`` the paper's shape (1 nation, 52 states, 3,144 counties, sizes to 1,000).

Example:
    >>> h = synthetic_census("levels=1,3,9;groups=500;max_size=8;seed=1")
    >>> h.tree.level_sizes, h.total, h.sizes.k
    ((1, 3, 9), 500, 9)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.analysis.cost_model import estimate_census, require
from engine.errors import SpecError, suggest
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet

#: US 2010 household-size shares for sizes 1..6 and "7 or more" (SF1's top code).
HOUSEHOLD_SHARES = np.array([0.267, 0.336, 0.157, 0.133, 0.062, 0.025, 0.020])
#: level names for the usual depths
LEVEL_NAMES = {1: ("nation",), 2: ("nation", "state"), 3: ("nation", "state", "county"),
               4: ("nation", "state", "county", "tract")}
DEFAULTS: dict[str, Any] = {"levels": (1, 6, 30), "groups": 20_000, "max_size": 50,
                            "seed": 0, "vacant": 0.1, "quarters": 0.001, "zero": True,
                            "open_top": True}
PRESETS: dict[str, dict[str, Any]] = {
    "census": {"levels": (1, 52, 3144), "groups": 117_630_445, "max_size": 1000},
}
KEYS = tuple(DEFAULTS) + ("preset",)

#: Largest groups, max_size and seed (numpy's 64-bit integers).
MAX_INTEGER = 2**63 - 1

def running_example() -> Hierarchy:
    """The paper's running example: US -> {GA, NY}, sizes {1, 2, 3}, n = 6 (spec §1.5)."""
    tree = RegionTree.from_paths([("US", "GA"), ("US", "NY")], ("nation", "state"))
    return Hierarchy(tree, SizeSet(3, zero=False, open_top=False), [[2, 0, 1], [1, 1, 1]],
                     name="running example")


def parse_spec(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """Parse a synthetic spec string (or mapping) into generator keyword arguments.

    Raises:
        SpecError: naming the key, for unknown keys or bad values.
    """
    if isinstance(spec, Mapping):
        items = dict(spec)
    else:
        items = {}
        for part in str(spec).split(";"):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise SpecError(f"synthetic: expected key=value, got {part!r} (keys: "
                                f"{', '.join(KEYS)})")
            key, value = (x.strip() for x in part.split("=", 1))
            items[key] = value
    out = dict(DEFAULTS)
    if "preset" in items:
        preset = str(items.pop("preset"))
        if preset == "toy":
            if items:
                raise SpecError("synthetic.preset: 'toy' takes no other keys")
            return {"preset": "toy"}
        if preset not in PRESETS:
            raise SpecError(f"synthetic.preset: unknown {preset!r}"
                            f"{suggest(preset, list(PRESETS) + ['toy'])}; allowed: toy, "
                            f"{', '.join(PRESETS)}")
        out.update(PRESETS[preset])
    for key, value in items.items():
        if key not in DEFAULTS:
            raise SpecError(f"synthetic.{key}: unknown key{suggest(key, KEYS)}; allowed: "
                            f"{', '.join(KEYS)}")
        out[key] = _convert(key, value)
    return out


def _convert(key: str, value: Any) -> Any:
    try:
        if key == "levels":
            parts = value.split(",") if isinstance(value, str) else list(value)
            levels = tuple(int(x) for x in parts)
            if not levels or levels[0] != 1 or any(b < a for a, b in zip(levels, levels[1:],
                                                                          strict=False)):
                raise ValueError
            return levels
        if key in ("groups", "max_size", "seed"):
            v = int(value)
            # numpy's multinomial and generators take 64-bit integers
            if (v < (1 if key == "max_size" else 0) or v > MAX_INTEGER
                    or str(value).strip() != str(v)):
                raise ValueError
            return v
        if key in ("vacant", "quarters"):
            v = float(value)
            if not 0 <= v < 0.5:
                raise ValueError
            return v
        if key in ("zero", "open_top"):
            if str(value).lower() in ("1", "true", "yes"):
                return True
            if str(value).lower() in ("0", "false", "no"):
                return False
            raise ValueError
    except (TypeError, ValueError):
        pass
    allowed = {"levels": "comma-separated region counts starting with 1, non-decreasing",
               "groups": f"an integer 0..{MAX_INTEGER}",
               "max_size": f"an integer 1..{MAX_INTEGER}", "seed": f"an integer 0..{MAX_INTEGER}",
               "vacant": "a share in [0, 0.5)",
               "quarters": "a share in [0, 0.5)", "zero": "1 or 0", "open_top": "1 or 0"}
    raise SpecError(f"synthetic.{key}: bad value {value!r} (expected {allowed[key]})")


def synthetic_census(spec: str | Mapping[str, Any] = "") -> Hierarchy:
    """Generate the hierarchy a spec string names (see the module docstring)."""
    kw = parse_spec(spec)
    if kw.get("preset") == "toy":
        return running_example()
    return generate(**kw)


def generate(levels: tuple[int, ...] = (1, 6, 30), groups: int = 20_000, max_size: int = 50,
             seed: int = 0, vacant: float = 0.1, quarters: float = 0.001, zero: bool = True,
             open_top: bool = True) -> Hierarchy:
    """A synthetic census hierarchy.

    Args:
        levels: regions per level (``levels[0] == 1``); children are spread over parents
            with skewed counts, each parent getting at least one.
        groups: n, the number of groups (households and group quarters).
        max_size: the top size bucket k.
        seed: seed of every random draw.
        vacant: share of empty units (size 0); ignored without the 0 bucket.
        quarters: share of group quarters, sizes uniform on ``[10, max(10, k)]`` (they
            fold into the open top bucket when k < 10).
        zero: include the 0 bucket.
        open_top: make the top bucket "k or more"; without it, larger groups are dropped
            and n shrinks accordingly.

    Returns:
        A :class:`Hierarchy` named after its parameters.
    """
    buckets = max_size + 2
    require(estimate_census(float(sum(levels)), float(buckets)), "synthetic.levels/max_size")
    rng = np.random.default_rng(seed)
    fanouts = []
    for parents, children in zip(levels, levels[1:], strict=False):
        extra = rng.multinomial(children - parents, rng.dirichlet(np.full(parents, 2.0)))
        fanouts.append(extra + 1)
    names = LEVEL_NAMES.get(len(levels), tuple(f"level {i + 1}" for i in range(len(levels))))
    tree = RegionTree.from_fanouts(fanouts, names)
    sizes = SizeSet(max_size, zero=zero, open_top=open_top)
    leaves = tree.num_leaves
    population = rng.lognormal(0.0, 1.2, leaves)
    per_leaf = rng.multinomial(groups, population / population.sum())
    probs = _size_profiles(rng, leaves, sizes, vacant if zero else 0.0, quarters)
    counts = rng.multinomial(per_leaf, probs)
    if not open_top:
        counts = counts[:, : sizes.k]
    else:
        counts = np.concatenate([counts[:, : sizes.k - 1],
                                 counts[:, sizes.k - 1:].sum(axis=1, keepdims=True)], axis=1)
    label = f"levels={','.join(map(str, levels))};groups={groups};max_size={max_size};" \
            f"seed={seed}"
    return Hierarchy(tree, sizes, counts, name=label)


def _size_profiles(rng: np.random.Generator, leaves: int, sizes: SizeSet, vacant: float,
                   quarters: float) -> np.ndarray:
    """Per-leaf probabilities over sizes ``0 .. top`` where top >= k (beyond k: folded later)."""
    top = max(sizes.max_size, 10)
    s = np.arange(top + 1)
    # household shares for sizes 1..6 and "7 or more", perturbed per leaf; the 7+ mass is
    # spread geometrically, p_{j+1} = q p_j from p_7 = q p_6 on, with q fixed by that mass
    base = rng.dirichlet(400.0 * HOUSEHOLD_SHARES, size=leaves)
    ratio = (base[:, 6] / (base[:, 5] + base[:, 6]))[:, None]
    tail = base[:, 5:6] * ratio ** (s[None, 7:] - 6)
    house = np.zeros((leaves, top + 1))
    house[:, 1:7] = base[:, :6]
    house[:, 7:] = tail
    house /= house.sum(axis=1, keepdims=True)
    gq = np.zeros(top + 1)
    gq[10:] = 1.0 / (top - 9)
    probs = (1.0 - vacant - quarters) * house + quarters * gq
    probs[:, 0] += vacant
    if not sizes.zero:
        probs = probs[:, 1:]
    return probs / probs.sum(axis=1, keepdims=True)
