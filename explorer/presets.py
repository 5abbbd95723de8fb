"""Ready-made scenarios for the workload builder: generic shapes and the papers' benchmarks.

Every preset builds a plain scenario spec (see the README). Generic presets (k-way marginals,
prefix-marginals, range queries) apply to the attributes the user has already defined, or to a
small demo domain when there are none. The benchmark presets reproduce the multi-dimensional
schemas of the HDMM paper (section 11.2; exact definitions in the reference code): the census
SF1 / SF1+ tables, CPS, Adult and Loans. The paper gives the attribute sizes; where it does not
name an attribute, the names here are ours.

Example:
    >>> spec = build_preset("cps_marginals")
    >>> from engine.scenario import Scenario
    >>> Scenario.from_spec(spec).workload.num_queries
    618120
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Spec = dict[str, Any]

#: Used by the generic presets when the user has not defined any attribute yet.
DEMO_DOMAIN: Spec = {
    "age": {"size": 32, "kind": "numeric"},
    "income": {"size": 16, "kind": "numeric"},
    "sex": {"size": 2, "labels": ["F", "M"]},
}

GAUSSIAN = {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6}


@dataclass(frozen=True)
class Preset:
    """A named way to fill the builder.

    Attributes:
        key: identifier used in code and tests.
        title: menu label.
        description: one or two plain sentences for the builder.
        build: ``(current domain spec or None, k) -> scenario spec``.
        uses_domain: True when the preset applies to the user's attributes.
    """

    key: str
    title: str
    description: str
    build: Callable[[Spec | None, int], Spec]
    uses_domain: bool = False


# ----- helpers -------------------------------------------------------------------------------
def _is_numeric(spec: Any) -> bool:
    return isinstance(spec, Mapping) and (spec.get("kind") == "numeric"
                                          or ("bin_edges" in spec and "kind" not in spec))


def _domain_or_demo(domain: Spec | None) -> Spec:
    return dict(domain) if isinstance(domain, Mapping) and domain else dict(DEMO_DOMAIN)


def _scenario(domain: Spec, workload: list[Spec]) -> Spec:
    return {"domain": domain, "workload": workload, "privacy": dict(GAUSSIAN)}


def _numeric(size: int) -> Spec:
    return {"size": size, "kind": "numeric"}


def _matrix(rows: list[list[int]]) -> Spec:
    return {"block": "matrix", "rows": rows}


def _indicator_rows(n: int, predicates: list[Callable[[int], bool]]) -> list[list[int]]:
    return [[1 if pred(c) else 0 for c in range(n)] for pred in predicates]


# ----- generic presets ------------------------------------------------------------------------
def kway_marginals(domain: Spec | None, k: int) -> Spec:
    """All k-way marginals of the attributes (k clipped to the number of attributes)."""
    dom = _domain_or_demo(domain)
    return _scenario(dom, [{"marginals": {"k": max(0, min(k, len(dom)))}}])


def prefix_marginals(domain: Spec | None, k: int) -> Spec:
    """All k-way prefix-marginals: cumulative counts on numeric attributes, counts on others."""
    dom = _domain_or_demo(domain)
    return _scenario(dom, [{"prefix_marginals": {"k": max(0, min(k, len(dom)))}}])


def range_queries(domain: Spec | None, k: int) -> Spec:
    """Every interval on each numeric attribute, per value of each categorical attribute."""
    dom = _domain_or_demo(domain)
    blocks = {name: ("all_range" if _is_numeric(spec) else "identity")
              for name, spec in dom.items()}
    if not any(b == "all_range" for b in blocks.values()):
        first = next(iter(dom))
        spec = dom[first]
        size = spec if isinstance(spec, int) else spec.get("size", 2)
        dom[first] = _numeric(int(size))
        blocks[first] = "all_range"
    return _scenario(dom, [{"product": blocks}])


def classic_prefix(domain: Spec | None = None, k: int = 0) -> Spec:
    """The tour's classic example: every prefix (CDF) query on one attribute of 256 values."""
    return _scenario({"x": _numeric(256)}, [{"product": {"x": "prefix"}}])


def classic_all_range(domain: Spec | None = None, k: int = 0) -> Spec:
    """Every range query on 256 values (the workload of the HDMM paper's Figure 1)."""
    return _scenario({"x": _numeric(256)}, [{"product": {"x": "all_range"}}])


# ----- HDMM census SF1 -------------------------------------------------------------------------
RACES = 6
RACE_CODES = 2**RACES  # a code is a bit mask of the six race flags
AGES = 115  # 0..114
AGE1_EDGES = (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75,
              80, 85, 115)


def _popcount(code: int) -> int:
    return bin(code).count("1")


def sf1_blocks() -> dict[str, Spec | str]:
    """The single-attribute predicate sets of SF1 (HDMM reference code), as spec blocks."""
    singles = [lambda c, i=i: c == 2**i for i in range(RACES)]
    race1 = _indicator_rows(RACE_CODES, singles + [lambda c: _popcount(c) != 1])
    race2 = _indicator_rows(
        RACE_CODES,
        [lambda c, v=v: c == v for v in range(1, RACE_CODES)]
        + [lambda c, k=k: _popcount(c) == k for k in range(1, RACES + 1)]
        + [lambda c: _popcount(c) >= 2])
    age1 = _indicator_rows(AGES, [lambda a, lo=lo, hi=hi: lo <= a < hi
                                  for lo, hi in itertools.pairwise(AGE1_EDGES)])
    age3 = _indicator_rows(AGES, [lambda a, y=y: a == y for y in range(100)]
                           + [lambda a, lo=lo: lo <= a < lo + 5 for lo in (100, 105, 110)])
    return {
        "race1": _matrix(race1), "race2": _matrix(race2),
        "white": _matrix(_indicator_rows(RACE_CODES, [lambda c: c == 1])),
        "isH": _matrix([[1, 0]]), "notH": _matrix([[0, 1]]),
        "adult": _matrix(_indicator_rows(AGES, [lambda a: a >= 18])),
        "age1": _matrix(age1), "age3": _matrix(age3),
        "I2": "identity", "IT2": _matrix([[1, 0], [0, 1], [1, 1]]),
    }


#: SF1 as 33 Kronecker products over (sex, hispanic, race, age); "T" means total.
SF1_PRODUCTS: tuple[tuple[str, str, str, str], ...] = (
    *[("T", "T", "T", "T")] * 5,
    ("T", "T", "race1", "T"),
    *[("T", "I2", "T", "T")] * 2,
    ("T", "I2", "race1", "T"), ("T", "IT2", "T", "T"),
    ("T", "T", "race2", "T"),
    ("T", "notH", "race2", "T"),
    ("T", "T", "race2", "adult"), *[("T", "T", "T", "adult")] * 2,
    ("T", "I2", "T", "adult"), ("T", "notH", "race2", "adult"),
    ("I2", "T", "T", "age1"), *[("IT2", "T", "T", "T")] * 2,
    ("I2", "T", "race1", "age1"), ("IT2", "T", "race1", "T"), ("I2", "isH", "T", "age1"),
    ("IT2", "isH", "T", "T"), ("I2", "notH", "white", "age1"), ("IT2", "notH", "white", "T"),
    ("I2", "T", "T", "age3"),
    ("I2", "T", "race1", "age3"), ("IT2", "T", "race1", "T"), ("I2", "isH", "T", "age3"),
    ("IT2", "isH", "T", "T"), ("I2", "notH", "race1", "age3"), ("IT2", "notH", "race1", "T"),
)
SF1_ATTRS = ("sex", "hispanic", "race", "age")


def census_sf1(domain: Spec | None = None, k: int = 0, states: bool = False) -> Spec:
    """The census SF1 person tables (relationship dropped, as in the paper's experiments).

    With ``states``, SF1+: every table is also asked per state and nationally (51 states).
    """
    blocks = sf1_blocks()
    dom: Spec = {"sex": {"size": 2, "labels": ["male", "female"]},
                 "hispanic": {"size": 2, "labels": ["hispanic", "not hispanic"]},
                 "race": {"size": RACE_CODES}, "age": _numeric(AGES)}
    if states:
        dom["state"] = 51
    workload = []
    for product in SF1_PRODUCTS:
        body = {a: blocks[b] for a, b in zip(SF1_ATTRS, product, strict=True) if b != "T"}
        if states:
            # [I_51; T_51] (x) rest is the union of the per-state and the national table.
            workload.append({"product": dict(body, state="identity")})
        workload.append({"product": body})
    return _scenario(dom, workload)


def census_sf1_plus(domain: Spec | None = None, k: int = 0) -> Spec:
    """SF1+: the SF1 tables per state and nationally."""
    return census_sf1(states=True)


# ----- CPS, Adult, Loans -----------------------------------------------------------------------
CPS_DOMAIN: Spec = {"age": _numeric(50), "income": _numeric(100), "race": 7, "marital": 4,
                    "sex": 2}

ADULT_DOMAIN: Spec = {
    "capital-gain": _numeric(100), "capital-loss": _numeric(100), "fnlwgt": _numeric(100),
    "hours-per-week": _numeric(99), "age": _numeric(85), "native-country": 42,
    "education-num": 16, "occupation": 15, "workclass": 9, "marital-status": 7,
    "relationship": 6, "race": 5, "sex": 2, "income>50K": 2,
}

LOANS_DOMAIN: Spec = {
    "loan_amount": _numeric(101), "interest_rate": _numeric(101), "annual_income": _numeric(101),
    "installment": _numeric(101), "term": 3, "grade": 8, "sub_grade": 36, "home_ownership": 6,
    "state": 51, "settlement_status": 4, "loan_status": 5, "purpose": 15,
}

#: Loans "small marginals": every attribute subset whose table has at most this many cells.
LOANS_SMALL_CELLS = 5000


def _size(spec: Any) -> int:
    return int(spec) if isinstance(spec, int) else int(spec["size"])


def cps_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """CPS: all 32 marginals (0- to 5-way) of (age 50, income 100, race 7, marital 4, sex 2)."""
    return _scenario(dict(CPS_DOMAIN), [{"marginals": {"upto": len(CPS_DOMAIN)}}])


def cps_prefix_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """CPS: cumulative age x income counts, by every combination of race, marital, sex."""
    others = ("race", "marital", "sex")
    sets = [["age", "income", *s] for r in range(len(others) + 1)
            for s in itertools.combinations(others, r)]
    return _scenario(dict(CPS_DOMAIN), [{"prefix_marginals": {"sets": sets}}])


def adult_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """Adult (14 attributes): all 0-, 1-, 2- and 3-way marginals (470 tables)."""
    return _scenario(dict(ADULT_DOMAIN), [{"marginals": {"upto": 3}}])


def adult_prefix_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """Adult: every pair of attributes, cumulative on numeric ones (91 tables)."""
    return _scenario(dict(ADULT_DOMAIN), [{"prefix_marginals": {"k": 2}}])


def loans_small_sets() -> list[list[str]]:
    """Every attribute subset of Loans whose table has at most 5000 cells (188 of them)."""
    names = list(LOANS_DOMAIN)
    sets = []
    for r in range(len(names) + 1):
        for subset in itertools.combinations(names, r):
            if math.prod(_size(LOANS_DOMAIN[a]) for a in subset) <= LOANS_SMALL_CELLS:
                sets.append(list(subset))
    return sets


def loans_small_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """Loans (12 attributes): every marginal table with at most 5000 cells."""
    return _scenario(dict(LOANS_DOMAIN), [{"marginals": {"sets": loans_small_sets()}}])


def loans_small_prefix_marginals(domain: Spec | None = None, k: int = 0) -> Spec:
    """Loans: the same small tables, cumulative on the four numeric attributes."""
    return _scenario(dict(LOANS_DOMAIN), [{"prefix_marginals": {"sets": loans_small_sets()}}])


PRESETS: dict[str, Preset] = {p.key: p for p in (
    Preset("kway", "All k-way marginals (your attributes)",
           "Counts for every combination of k attributes, e.g. all two-way tables.",
           kway_marginals, uses_domain=True),
    Preset("prefix_marginals", "Prefix-marginals (your attributes)",
           "Like k-way marginals, but cumulative ('at most v') on numeric attributes.",
           prefix_marginals, uses_domain=True),
    Preset("ranges", "Range queries (your attributes)",
           "Every interval [a, b] of each numeric attribute, for each value of the others.",
           range_queries, uses_domain=True),
    Preset("classic_prefix", "Classic: prefix queries on 256 values",
           "All 256 cumulative counts of one ordered attribute: the tour's example.",
           classic_prefix),
    Preset("classic_all_range", "Classic: all range queries on 256 values",
           "All 32,896 intervals of one ordered attribute (HDMM paper, Figure 1).",
           classic_all_range),
    Preset("sf1", "Census SF1 person tables (HDMM)",
           "33 tables of the 2010 census summary file 1 over sex, Hispanic origin, 63 race "
           "combinations and age: 4,151 counts over 29,440 cells.", census_sf1),
    Preset("sf1_plus", "Census SF1+ (SF1 per state, HDMM)",
           "The SF1 tables for each of 51 states and nationally: 215,852 counts.",
           census_sf1_plus),
    Preset("cps_marginals", "CPS: all marginals (HDMM)",
           "All 32 marginal tables of a 5-attribute Current Population Survey extract.",
           cps_marginals),
    Preset("cps_prefix", "CPS: prefix-marginals (HDMM)",
           "Cumulative age x income counts for every combination of race, marital status "
           "and sex.", cps_prefix_marginals),
    Preset("adult_marginals", "Adult: all marginals up to 3-way (HDMM)",
           "470 tables over the 14 Adult attributes (21 million counts, 6.4e17 cells).",
           adult_marginals),
    Preset("adult_prefix", "Adult: 2-way prefix-marginals (HDMM)",
           "Every pair of Adult attributes, cumulative on the five numeric ones.",
           adult_prefix_marginals),
    Preset("loans_marginals", "Loans: small marginals (HDMM)",
           "Every table of the 12 Loans attributes with at most 5,000 cells (188 tables).",
           loans_small_marginals),
    Preset("loans_prefix", "Loans: small prefix-marginals (HDMM)",
           "The same 188 tables, cumulative on the four numeric attributes.",
           loans_small_prefix_marginals),
)}


def build_preset(key: str, domain: Spec | None = None, k: int = 2) -> Spec:
    """The scenario spec of preset ``key``.

    Args:
        key: one of :data:`PRESETS`.
        domain: the user's current ``domain:`` spec (used by the generic presets).
        k: marginal order for the k-way presets.

    Raises:
        KeyError: for an unknown key (the message lists the known ones).
    """
    if key not in PRESETS:
        raise KeyError(f"preset: unknown {key!r}; known: {', '.join(PRESETS)}")
    return PRESETS[key].build(domain, k)
