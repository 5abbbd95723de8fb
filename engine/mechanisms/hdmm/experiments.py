"""The multi-dimensional schemas and workloads of the HDMM paper (section 11.2; spec 7.4).

Definitions follow the authors' experiment code as restated in the spec; they reproduce the
paper's query counts m and its Identity, plain-mechanism and SVD-bound columns, which
confirms them. Each function returns a :class:`~engine.workloads.Workload`; the dashboard can
offer them as presets and the tests and benchmarks reproduce Tables 6 and 7 from them.

* CPS: (50, 100, 7, 4, 2), two numeric attributes; all 32 marginals, or the 8 prefix-marginals
  ``P_50 x P_100 x {I|T}^3``.
* Adult: 14 attributes, 5 numeric; all 0- to 3-way marginals, or all 91 2-way
  prefix-marginals (P on numeric, I on categorical attributes).
* Loans: 12 attributes, 4 numeric; every marginal with at most 5000 cells (188 of them), or
  the same subsets as prefix-marginals.
* Census SF1 persons (sex, hispanic, race, age) as 33 products (the relationship attribute,
  total in every SF1-persons query, is dropped as in the paper's evaluation); SF1+ adds a
  51-valued state attribute with ``[I; T]`` on it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from engine.domain import Domain
from engine.workloads.blocks import Block, IdentityBlock, MatrixBlock, TotalBlock
from engine.workloads.groups import Group, Marginals, PrefixMarginals, Product
from engine.workloads.workload import Workload


# --------------------------------------------------------------------------------------
# CPS, Adult, Loans
# --------------------------------------------------------------------------------------
def cps_domain() -> Domain:
    """CPS: age 50, income 100 (numeric), then three categorical attributes (280,000 cells)."""
    return Domain.from_sizes([50, 100, 7, 4, 2], ["age", "income", "race", "status", "sex"],
                             ["numeric", "numeric", "categorical", "categorical",
                              "categorical"])


def cps_marginals() -> Workload:
    """All 2**5 = 32 marginals of CPS (m = 618,120)."""
    return Workload.marginals(cps_domain(), upto=5)


def cps_prefix_marginals() -> Workload:
    """``P_50 x P_100 x {I|T}^3``: the 8 prefix-marginals over age and income (m = 600,000)."""
    dom = cps_domain()
    cats = ["race", "status", "sex"]
    sets = [("age", "income", *s) for k in range(4) for s in itertools.combinations(cats, k)]
    return Workload(dom, (PrefixMarginals(sets=tuple(sets)),))


ADULT_NAMES = ("age", "fnlwgt", "capital_gain", "capital_loss", "hours_per_week",
               "native_country", "education", "occupation", "workclass", "marital_status",
               "relationship", "race", "sex", "income")
ADULT_SIZES = (100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2)


def adult_domain() -> Domain:
    """Adult as binned in the paper: 14 attributes, the first 5 numeric (6.4e17 cells)."""
    return Domain.from_sizes(list(ADULT_SIZES), list(ADULT_NAMES),
                             ["numeric"] * 5 + ["categorical"] * 9)


def adult_marginals() -> Workload:
    """All 0-, 1-, 2- and 3-way marginals of Adult: 470 products, m = 21,043,262."""
    return Workload.marginals(adult_domain(), upto=3)


def adult_prefix_marginals() -> Workload:
    """All 91 2-way prefix-marginals of Adult (P on numeric, I on categorical): m = 148,137."""
    dom = adult_domain()
    return Workload(dom, (PrefixMarginals(k=2),))


LOANS_NAMES = ("loan_amount", "interest_rate", "annual_income", "installment", "term",
               "grade", "sub_grade", "home_ownership", "state", "settlement_status",
               "loan_status", "purpose")
LOANS_SIZES = (101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15)


def loans_domain() -> Domain:
    """Loans: 12 attributes, the first 4 numeric (8.3e15 cells)."""
    return Domain.from_sizes(list(LOANS_SIZES), list(LOANS_NAMES),
                             ["numeric"] * 4 + ["categorical"] * 8)


def small_subsets(domain: Domain, max_cells: int = 5000) -> tuple[tuple[str, ...], ...]:
    """Every attribute subset (the empty one too) whose marginal has at most max_cells."""
    out = []
    for k in range(len(domain) + 1):
        for s in itertools.combinations(domain.names, k):
            if math.prod(domain[n].size for n in s) <= max_cells:
                out.append(s)
    return tuple(out)


def loans_small_marginals() -> Workload:
    """Every Loans marginal with at most 5000 cells: 188 products, m = 279,751."""
    dom = loans_domain()
    return Workload(dom, (Marginals(sets=small_subsets(dom)),))


def loans_small_prefix_marginals() -> Workload:
    """The same 188 subsets as prefix-marginals (P on the 4 numeric attributes)."""
    dom = loans_domain()
    return Workload(dom, (PrefixMarginals(sets=small_subsets(dom)),))


# --------------------------------------------------------------------------------------
# Census SF1 persons
# --------------------------------------------------------------------------------------
def census_domain(states: bool = False) -> Domain:
    """(sex 2, hispanic 2, race 64, age 115) and, for SF1+, state 51."""
    names = ["sex", "hispanic", "race", "age"] + (["state"] if states else [])
    sizes = [2, 2, 64, 115] + ([51] if states else [])
    kinds = ["categorical", "categorical", "categorical", "numeric"] + (
        ["categorical"] if states else [])
    return Domain.from_sizes(sizes, names, kinds)


def _rows(name: str, rows: np.ndarray) -> MatrixBlock:
    return MatrixBlock(rows, source={"block": "matrix", "name": name,
                                     "rows": np.asarray(rows).tolist()})


def _bins(edges: list[int], n: int) -> np.ndarray:
    cells = np.arange(n)
    return np.array([(cells >= lo) & (cells < hi) for lo, hi in zip(edges, edges[1:],
                                                                     strict=False)], float)


def census_blocks() -> dict[str, Block]:
    """The single-attribute predicate sets of SF1 persons (spec section 7.4)."""
    code = np.arange(64)
    races = np.array([bin(c).count("1") for c in code])
    race1 = np.vstack([code == 2**i for i in range(6)] + [races != 1]).astype(float)
    race2 = np.vstack([code == c for c in range(1, 64)]
                      + [races == r for r in range(1, 7)] + [races >= 2]).astype(float)
    age1 = _bins([0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67,
                  70, 75, 80, 85, 115], 115)
    age3 = _bins(list(range(101)) + [105, 110, 115], 115)
    return {"race1": _rows("race1", race1), "race2": _rows("race2", race2),
            "white": _rows("white", (code == 1).astype(float)[None, :]),
            "isH": _rows("isH", np.array([[1.0, 0.0]])),
            "notH": _rows("notH", np.array([[0.0, 1.0]])),
            "adult": _rows("adult", (np.arange(115) >= 18).astype(float)[None, :]),
            "age1": _rows("age1", age1), "age3": _rows("age3", age3),
            "I2": IdentityBlock(2), "IT2": _rows("IT2", np.vstack([np.eye(2), np.ones(2)])),
            "IT51": _rows("IT51", np.vstack([np.eye(51), np.ones(51)]))}


#: SF1 persons as (sex, hispanic, race, age) factor names (None = total) and repeats.
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


def census_sf1(states: bool = False) -> Workload:
    """SF1 persons (33 products, m = 4,151); with ``states`` SF1+ (m = 215,852)."""
    dom = census_domain(states)
    blocks = census_blocks()
    names = ("sex", "hispanic", "race", "age")
    groups: list[Group] = []
    for factors, repeats in SF1_PRODUCTS:
        chosen = tuple((nm, blocks[f]) for nm, f in zip(names, factors, strict=True)
                       if f is not None)
        if states:
            chosen += (("state", blocks["IT51"]),)
        if not chosen:
            # the grand total: one query that sums every cell
            chosen = (("sex", TotalBlock(2)),)
        groups.extend(Product(chosen) for _ in range(repeats))
    return Workload(dom, tuple(groups))


#: The paper's multi-dimensional workloads by (dataset, workload) name.
WORKLOADS = {
    ("cps", "marginals"): cps_marginals,
    ("cps", "prefix"): cps_prefix_marginals,
    ("adult", "marginals"): adult_marginals,
    ("adult", "prefix"): adult_prefix_marginals,
    ("loans", "marginals"): loans_small_marginals,
    ("loans", "prefix"): loans_small_prefix_marginals,
    ("census", "sf1"): census_sf1,
    ("census", "sf1+"): lambda: census_sf1(states=True),
}
