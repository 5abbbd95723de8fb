"""The catalogue of the papers' workloads: each defined once, as a scenario spec.

Every entry is a plain spec (``domain:`` and ``workload:``, see the README) that
:func:`build_workload` turns into a :class:`~engine.workloads.Workload`. HDMM's Tables 4-7
(the tests' ``hdmm_paper`` helper, the benchmarks), the explorer's presets menu and the
bundled Adult data's domain all read their definitions here.

* 1-D families (HDMM Tables 4/5): all ranges, prefixes, width-32 ranges and permuted ranges
  on n values (:func:`one_dim`), and the tour's classic examples on 256 values.
* Shapes over any domain: all k-way marginals, k-way prefix-marginals, k-way range
  marginals, range queries.
* A small census-style set with value labels: age x sex x race, cumulative counts of age and
  every 2-way table (:func:`age_sex_race`).
* HDMM section 11.2 (restated in the paper notes, section 7.4, from the authors' experiment
  code; the definitions reproduce the paper's query counts and its Identity, plain-mechanism
  and SVD-bound columns): census SF1 / SF1+, CPS, Adult and Loans, each as all (or small)
  marginals and as prefix-marginals. The paper gives attribute sizes; where it does not name
  an attribute, the names here are ours (Adult's are the bundled data's).

Example:
    >>> workload("cps_marginals").num_queries
    618120
    >>> spec("classic_prefix")["workload"]
    [{'product': {'x': 'prefix'}}]
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.domain import Domain
from engine.workloads.spec import parse_workload
from engine.workloads.workload import Workload

Spec = dict[str, Any]


def build_workload(spec: Mapping[str, Any]) -> Workload:
    """The workload of a spec with ``domain:`` and ``workload:`` (other keys are ignored).

    Raises:
        SpecError: one line naming the offending field.
    """
    return parse_workload(copy.deepcopy(spec["workload"]), Domain.from_spec(spec["domain"]))


def _numeric(size: int) -> Spec:
    return {"size": size, "kind": "numeric"}


def _size(value: Any) -> int:
    return int(value) if isinstance(value, int) else int(value["size"])


def _is_numeric(value: Any) -> bool:
    return isinstance(value, Mapping) and (
        value.get("kind") == "numeric" or ("bin_edges" in value and "kind" not in value)
    )


# ----- 1-D families ----------------------------------------------------------------------------
#: The 1-D workloads of HDMM Tables 4 and 5, by the row names used there, as block specs.
HDMM_ONE_DIM: dict[str, Any] = {
    "all-range": "all_range",
    "prefix": "prefix",
    "width32": {"block": "range", "width": 32},
    "permuted": {"block": "permuted", "of": "all_range", "seed": 0},
}

#: The size of the classic 1-D examples (the tour's prefix queries, HDMM's Figure 1).
CLASSIC_SIZE = 256


def one_dim(block: Any, n: int, name: str = "x") -> Spec:
    """One block over a single numeric attribute of n values.

    Args:
        block: a block spec (a name such as ``"prefix"``, or a mapping with ``block:``), or a
            row name of :data:`HDMM_ONE_DIM` (``"width32"``).
        n: number of values.
        name: the attribute's name.
    """
    value = HDMM_ONE_DIM.get(block, block) if isinstance(block, str) else block
    return {"domain": {name: _numeric(n)}, "workload": [{"product": {name: value}}]}


def classic_prefix() -> Spec:
    """Every prefix (CDF) query on one attribute of 256 values: the tour's example."""
    return one_dim("prefix", CLASSIC_SIZE)


def classic_all_range() -> Spec:
    """Every range query on 256 values (the workload of the HDMM paper's Figure 1)."""
    return one_dim("all_range", CLASSIC_SIZE)


# ----- shapes over any domain ------------------------------------------------------------------
def age_sex_race() -> Spec:
    """A small census-style table set with value labels: every cumulative count of age (100
    values) and every 2-way table of age, sex and race (7 groups): 1,014 counts over 1,400
    cells (the analyst's workload of issue 17)."""
    return {
        "domain": {
            "age": _numeric(100),
            "sex": {"size": 2, "labels": ["male", "female"]},
            "race": {"size": 7, "labels": ["white", "black", "aian", "asian", "nhpi", "other",
                                           "multi"]},
        },
        "workload": [{"product": {"age": "prefix"}}, {"marginals": {"k": 2}}],
    }


def kway_marginals(domain: Spec, k: int) -> Spec:
    """All k-way marginals of the domain's attributes (k clipped to 0..their number)."""
    return {"domain": dict(domain), "workload": [{"marginals": {"k": max(0, min(k, len(domain)))}}]}


def prefix_marginals(domain: Spec, k: int) -> Spec:
    """All k-way prefix-marginals: cumulative counts on numeric attributes, counts on the
    others (k clipped to 0..the number of attributes)."""
    return {
        "domain": dict(domain),
        "workload": [{"prefix_marginals": {"k": max(0, min(k, len(domain)))}}],
    }


def range_marginals(domain: Spec, k: int) -> Spec:
    """All k-way *range* marginals: every range on the attributes of each k-subset (one
    product of ``all_range`` blocks per subset, in domain order), the others summed out.
    Li & Miklau's Table 2 "1Way/2Way Range Marginal" over 8 x 16 x 16."""
    groups = [{"product": {name: "all_range" for name in subset}}
              for subset in itertools.combinations(domain, k)]
    return {"domain": dict(domain), "workload": groups}


def range_queries(domain: Spec) -> Spec:
    """Every interval of each numeric attribute, for each value of the categorical ones.

    A domain without a numeric attribute gets its first attribute made numeric, so that there
    are ranges to ask.
    """
    dom = dict(domain)
    blocks = {
        name: ("all_range" if _is_numeric(value) else "identity") for name, value in dom.items()
    }
    if "all_range" not in blocks.values():
        first = next(iter(dom))
        dom[first] = _numeric(_size(dom[first]))
        blocks[first] = "all_range"
    return {"domain": dom, "workload": [{"product": blocks}]}


# ----- HDMM: census SF1 persons ------------------------------------------------------------------
RACES = 6
#: Race codes: a bit mask of the six race flags (HDMM merges them into one attribute).
RACE_CODES = 2**RACES
#: Ages 0..114.
AGES = 115
#: Half-open bins of the P12 tables.
AGE1_EDGES = (
    0,
    5,
    10,
    15,
    18,
    20,
    21,
    22,
    25,
    30,
    35,
    40,
    45,
    50,
    55,
    60,
    62,
    65,
    67,
    70,
    75,
    80,
    85,
    115,
)
STATES = 51  # 50 states and DC
SF1_ATTRIBUTES = ("sex", "hispanic", "race", "age")


def _matrix(rows: list[list[int]]) -> Spec:
    return {"block": "matrix", "rows": rows}


def _indicators(n: int, predicates: list[Callable[[int], bool]]) -> list[list[int]]:
    return [[1 if predicate(c) else 0 for c in range(n)] for predicate in predicates]


def _races(code: int) -> int:
    return bin(code).count("1")


def sf1_blocks() -> dict[str, Any]:
    """The single-attribute predicate sets of SF1 persons (paper notes section 7.4), as block
    specs: race1 (7 x 64), race2 (70 x 64), white, isH, notH, adult (age >= 18), age1 (23
    bins), age3 (103 bins), I2 and IT2 = [I_2; T_2]."""
    one_race = [lambda c, i=i: c == 2**i for i in range(RACES)]
    race1 = _indicators(RACE_CODES, [*one_race, lambda c: _races(c) != 1])
    race2 = _indicators(
        RACE_CODES,
        [lambda c, v=v: c == v for v in range(1, RACE_CODES)]
        + [lambda c, k=k: _races(c) == k for k in range(1, RACES + 1)]
        + [lambda c: _races(c) >= 2],
    )
    age1 = _indicators(
        AGES, [lambda a, lo=lo, hi=hi: lo <= a < hi for lo, hi in itertools.pairwise(AGE1_EDGES)]
    )
    age3 = _indicators(
        AGES,
        [lambda a, y=y: a == y for y in range(100)]
        + [lambda a, lo=lo: lo <= a < lo + 5 for lo in (100, 105, 110)],
    )
    return {
        "race1": _matrix(race1),
        "race2": _matrix(race2),
        "white": _matrix(_indicators(RACE_CODES, [lambda c: c == 1])),
        "isH": _matrix([[1, 0]]),
        "notH": _matrix([[0, 1]]),
        "adult": _matrix(_indicators(AGES, [lambda a: a >= 18])),
        "age1": _matrix(age1),
        "age3": _matrix(age3),
        "I2": "identity",
        "IT2": "identity_total",
    }


#: SF1 persons as (sex, hispanic, race, age) factor names (None = total) and repeats: 33
#: products (the paper says 32; the authors' code lists P1 five times).
SF1_PRODUCTS: tuple[tuple[tuple[str | None, ...], int], ...] = (
    ((None, None, None, None), 5),  # P1
    ((None, None, "race1", None), 1),  # P3a
    ((None, "I2", None, None), 2),  # P4a
    ((None, "I2", "race1", None), 1),  # P5a
    ((None, "IT2", None, None), 1),  # P5b
    ((None, None, "race2", None), 1),  # P8a
    ((None, "notH", "race2", None), 1),  # P9b
    ((None, None, "race2", "adult"), 1),  # P10a
    ((None, None, None, "adult"), 2),  # P10b
    ((None, "I2", None, "adult"), 1),  # P11a
    ((None, "notH", "race2", "adult"), 1),  # P11b
    (("I2", None, None, "age1"), 1),  # P12a
    (("IT2", None, None, None), 2),  # P12b
    (("I2", None, "race1", "age1"), 1),  # P12A-I
    (("IT2", None, "race1", None), 1),
    (("I2", "isH", None, "age1"), 1),
    (("IT2", "isH", None, None), 1),
    (("I2", "notH", "white", "age1"), 1),
    (("IT2", "notH", "white", None), 1),
    (("I2", None, None, "age3"), 1),  # PCT12a
    (("I2", None, "race1", "age3"), 1),  # PCT12A-O
    (("IT2", None, "race1", None), 1),
    (("I2", "isH", None, "age3"), 1),
    (("IT2", "isH", None, None), 1),
    (("I2", "notH", "race1", "age3"), 1),
    (("IT2", "notH", "race1", None), 1),
)


def census_sf1(states: bool = False) -> Spec:
    """SF1 persons over (sex, hispanic, race, age): 33 products, m = 4,151.

    The relationship attribute (total in every SF1-persons query) is dropped, as in the paper's
    evaluation. With ``states``, SF1+: a 51-valued state attribute with ``[I; T]`` on it, so
    every table is asked per state and nationally (m = 215,852).
    """
    domain: Spec = {
        "sex": {"size": 2, "labels": ["male", "female"]},
        "hispanic": {"size": 2, "labels": ["hispanic", "not hispanic"]},
        "race": RACE_CODES,
        "age": _numeric(AGES),
    }
    if states:
        domain["state"] = STATES
    blocks = sf1_blocks()
    workload = []
    for factors, repeats in SF1_PRODUCTS:
        product = {a: blocks[f] for a, f in zip(SF1_ATTRIBUTES, factors, strict=True) if f}
        if states:
            product["state"] = "identity_total"
        # the grand total P1 is one query that sums every cell
        item = {"product": product or {"sex": "total"}}
        # distinct objects, so that a YAML dump writes each item out instead of aliasing it
        workload += [copy.deepcopy(item) for _ in range(repeats)]
    return {"domain": domain, "workload": workload}


def census_sf1_plus() -> Spec:
    """SF1+: the SF1 tables per state and nationally."""
    return census_sf1(states=True)


# ----- HDMM: CPS, Adult, Loans ------------------------------------------------------------------
CPS_DOMAIN: Spec = {"age": _numeric(50), "income": _numeric(100), "race": 7, "marital": 4, "sex": 2}

#: UCI Adult as binned by private-pgm (the bundled data): values per attribute, in HDMM's
#: order (by size, ordered attributes first).
ADULT_SIZES: dict[str, int] = {
    "capital-gain": 100,
    "capital-loss": 100,
    "fnlwgt": 100,
    "hours-per-week": 99,
    "age": 85,
    "native-country": 42,
    "education-num": 16,
    "occupation": 15,
    "workclass": 9,
    "marital-status": 7,
    "relationship": 6,
    "race": 5,
    "sex": 2,
    "income>50K": 2,
}
#: Adult attributes whose values are ordered (bins of a number).
ADULT_ORDERED = frozenset(
    {"capital-gain", "capital-loss", "fnlwgt", "hours-per-week", "age", "education-num"}
)
#: HDMM's Adult has five numeric attributes: its 16-level education is categorical there.
HDMM_ADULT_NUMERIC = ADULT_ORDERED - {"education-num"}


def adult_domain(numeric: frozenset[str] = ADULT_ORDERED) -> Spec:
    """The Adult ``domain:`` spec, with the attributes in ``numeric`` numeric."""
    return {name: _numeric(size) if name in numeric else size for name, size in ADULT_SIZES.items()}


LOANS_DOMAIN: Spec = {
    "loan_amount": _numeric(101),
    "interest_rate": _numeric(101),
    "annual_income": _numeric(101),
    "installment": _numeric(101),
    "term": 3,
    "grade": 8,
    "sub_grade": 36,
    "home_ownership": 6,
    "state": 51,
    "settlement_status": 4,
    "loan_status": 5,
    "purpose": 15,
}

#: Loans "small marginals": every attribute subset whose table has at most this many cells.
LOANS_SMALL_CELLS = 5000


def small_subsets(domain: Spec, max_cells: int) -> list[list[str]]:
    """Every attribute subset (the empty one too) whose marginal has at most ``max_cells``
    cells, smallest subsets first, attributes in domain order."""
    names = list(domain)
    return [
        list(subset)
        for r in range(len(names) + 1)
        for subset in itertools.combinations(names, r)
        if math.prod(_size(domain[a]) for a in subset) <= max_cells
    ]


def cps_marginals() -> Spec:
    """CPS: all 2**5 = 32 marginals (0- to 5-way), m = 618,120."""
    return {
        "domain": copy.deepcopy(CPS_DOMAIN),
        "workload": [{"marginals": {"upto": len(CPS_DOMAIN)}}],
    }


def cps_prefix_marginals() -> Spec:
    """CPS: ``P_50 x P_100 x {I|T}^3``, cumulative age x income counts by every combination
    of race, marital status and sex (8 products, m = 600,000)."""
    others = ("race", "marital", "sex")
    sets = [
        ["age", "income", *s]
        for r in range(len(others) + 1)
        for s in itertools.combinations(others, r)
    ]
    return {"domain": copy.deepcopy(CPS_DOMAIN), "workload": [{"prefix_marginals": {"sets": sets}}]}


def adult_marginals() -> Spec:
    """Adult (14 attributes): all 0-, 1-, 2- and 3-way marginals, 470 tables, m = 21,043,262."""
    return {"domain": adult_domain(HDMM_ADULT_NUMERIC), "workload": [{"marginals": {"upto": 3}}]}


def adult_prefix_marginals() -> Spec:
    """Adult: all 91 pairs of attributes, cumulative on the five numeric ones, m = 148,137."""
    return {
        "domain": adult_domain(HDMM_ADULT_NUMERIC),
        "workload": [{"prefix_marginals": {"k": 2}}],
    }


def loans_small_marginals() -> Spec:
    """Loans (12 attributes): every marginal with at most 5,000 cells (188), m = 279,751."""
    return {
        "domain": copy.deepcopy(LOANS_DOMAIN),
        "workload": [{"marginals": {"sets": small_subsets(LOANS_DOMAIN, LOANS_SMALL_CELLS)}}],
    }


def loans_small_prefix_marginals() -> Spec:
    """Loans: the same 188 tables, cumulative on the four numeric attributes."""
    return {
        "domain": copy.deepcopy(LOANS_DOMAIN),
        "workload": [
            {"prefix_marginals": {"sets": small_subsets(LOANS_DOMAIN, LOANS_SMALL_CELLS)}}
        ],
    }


# ----- the catalogue ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A named workload of the catalogue.

    Attributes:
        key: identifier used in code, tests and menus.
        title: a short label.
        description: one or two plain sentences.
        build: returns a fresh scenario spec (``domain:`` and ``workload:``).
    """

    key: str
    title: str
    description: str
    build: Callable[[], Spec]


CATALOG: dict[str, Entry] = {
    e.key: e
    for e in (
        Entry(
            "classic_prefix",
            "Classic: prefix queries on 256 values",
            "All 256 cumulative counts of one ordered attribute: the tour's example.",
            classic_prefix,
        ),
        Entry(
            "classic_all_range",
            "Classic: all range queries on 256 values",
            "All 32,896 intervals of one ordered attribute (HDMM paper, Figure 1).",
            classic_all_range,
        ),
        Entry(
            "age_sex_race",
            "Census-style: age x sex x race",
            "Cumulative counts of age and every 2-way table of age, sex and race (7 groups): "
            "1,014 counts over 1,400 cells.",
            age_sex_race,
        ),
        Entry(
            "sf1",
            "Census SF1 person tables (HDMM)",
            "33 tables of the 2010 census summary file 1 over sex, Hispanic origin, 63 race "
            "combinations and age: 4,151 counts over 29,440 cells.",
            census_sf1,
        ),
        Entry(
            "sf1_plus",
            "Census SF1+ (SF1 per state, HDMM)",
            "The SF1 tables for each of 51 states and nationally: 215,852 counts.",
            census_sf1_plus,
        ),
        Entry(
            "cps_marginals",
            "CPS: all marginals (HDMM)",
            "All 32 marginal tables of a 5-attribute Current Population Survey extract.",
            cps_marginals,
        ),
        Entry(
            "cps_prefix",
            "CPS: prefix-marginals (HDMM)",
            "Cumulative age x income counts for every combination of race, marital status and sex.",
            cps_prefix_marginals,
        ),
        Entry(
            "adult_marginals",
            "Adult: all marginals up to 3-way (HDMM)",
            "470 tables over the 14 Adult attributes (21 million counts, 6.4e17 cells).",
            adult_marginals,
        ),
        Entry(
            "adult_prefix",
            "Adult: 2-way prefix-marginals (HDMM)",
            "Every pair of Adult attributes, cumulative on the five numeric ones.",
            adult_prefix_marginals,
        ),
        Entry(
            "loans_marginals",
            "Loans: small marginals (HDMM)",
            "Every table of the 12 Loans attributes with at most 5,000 cells (188 tables).",
            loans_small_marginals,
        ),
        Entry(
            "loans_prefix",
            "Loans: small prefix-marginals (HDMM)",
            "The same 188 tables, cumulative on the four numeric attributes.",
            loans_small_prefix_marginals,
        ),
    )
}


def spec(key: str) -> Spec:
    """A fresh scenario spec of catalogue entry ``key``.

    Raises:
        KeyError: for an unknown key (the message lists the known ones).
    """
    if key not in CATALOG:
        raise KeyError(f"catalog: unknown {key!r}; known: {', '.join(CATALOG)}")
    return CATALOG[key].build()


def workload(key: str) -> Workload:
    """The workload of catalogue entry ``key``."""
    return build_workload(spec(key))
