"""QuerySmasher paper tables (He et al. 2026, querysmasher.md 5.5 and 5.8) asserted cell by
cell at privacy cost 1 (zCDP rho = 1/2), every check two-sided.

* QS: equal to the spec's certified optimum (5.8; dual gap below 1e-9 per residual) and never
  above the printed value (the paper's solver was stopped early, spec 5.8).
* WFF: equal to the printed value to its precision (closed form, spec 2.4).
* RP+ (``kron_basis``): the certified optimal basis of each attribute's *centred* design
  problem (spec 2.3, 6.2 (1)). With one block per attribute that Kronecker basis is QS's own
  optimum, so RP+ equals the certified QS value; every printed RP+ cell is strictly above it,
  i.e. the paper's RP+ basis (HDMM's L-BFGS on the un-centred workload, then centred) is not
  the optimum of the problem it stands for. The lower side of every RP+ check is the
  certified QS optimum, which no residual-respecting splittable mechanism beats (spec 4).
  Only the marginal rows, where every basis is optimal, reproduce the printed RP+ value.

The remaining cells (Table 4 affine/abs for n >= 20, random workloads, Tables 6-8) are rows
of ``benchmarks/querysmasher_tables.py``; ``benchmarks/README.md`` lists which is where.
"""

from __future__ import annotations

import itertools

import pytest

from engine.domain import Domain
from engine.mechanisms import Plan, get
from engine.privacy import Privacy
from engine.workloads import Workload
from engine.workloads.blocks import AllRangeBlock, MatrixBlock, PrefixBlock
from engine.workloads.groups import Marginals, PairQueries, PrefixMarginals, Product

BETA1 = Privacy(noise="zcdp", rho=0.5)
#: Half a unit in the last printed digit (three decimals; two for Table 4/5).
HALF_MILLI, HALF_CENTI = 5e-4, 5e-3
SCHEMAS = {
    "CPS": ([7, 4, 2], [50, 100]),
    "Adult": ([42, 16, 15, 9, 7, 6, 5, 2, 2], [100, 100, 100, 99, 85]),
    "Loans": ([51, 36, 15, 8, 6, 5, 4, 3], [101, 101, 101, 101]),
}


def qs_plan(workload: Workload, sub_solver: str) -> Plan:
    return get("querysmasher", sub_solver=sub_solver, workers=0).plan(workload, BETA1)


def rmse(workload: Workload, sub_solver: str) -> float:
    return qs_plan(workload, sub_solver).rmse()


def worst_gap(plan: Plan) -> float:
    """The largest dual gap over the residuals of an ``optimal`` plan."""
    return max(plan.view("residual_table").column("gap"))


# ----- workloads (spec 5.2) ----------------------------------------------------------------
def hybrid(name: str, ways: tuple[int, ...], all_numeric: bool = False) -> Workload:
    """Categorical attributes identity, numeric ones prefix (Tables 2, 3)."""
    cat, num = SCHEMAS[name]
    kinds = (
        ["numeric"] * (len(cat) + len(num))
        if all_numeric
        else (["categorical"] * len(cat) + ["numeric"] * len(num))
    )
    dom = Domain.from_sizes(cat + num, kinds=kinds)
    return Workload(dom, tuple(PrefixMarginals(k=k) for k in ways))


def pairs(dom: Domain, kind: str) -> list[PairQueries]:
    return [
        PairQueries(attrs=p, pair_kind="affine" if kind == "affine" else "abs_diff")
        for p in itertools.combinations(dom.names, 2)
    ]


def table3(kind: str) -> Workload:
    """CPS, every attribute numeric: all 1-way prefix + all 2-way affine (or abs_diff)."""
    dom = hybrid("CPS", (1,), all_numeric=True).domain
    return Workload(dom, tuple([PrefixMarginals(k=1)] + pairs(dom, kind)))


def circular(n: int) -> MatrixBlock:
    """Every start and every length 1..n (n^2 rows, n of them the full range)."""
    return MatrixBlock(
        [
            [1.0 if (x - s) % n < length else 0.0 for x in range(n)]
            for s in range(n)
            for length in range(1, n + 1)
        ]
    )


def table4(kind: str, n: int, d: int = 40) -> Workload:
    """All 1-way + 2-way queries of one class on [n]^d."""
    dom = Domain.from_sizes([n] * d, kinds=["numeric"] * d)
    if kind == "marginal":
        return Workload(dom, (Marginals(k=1), Marginals(k=2)))
    if kind == "prefix":
        return Workload(dom, (PrefixMarginals(k=1), PrefixMarginals(k=2)))
    if kind in ("affine", "abs"):
        return Workload(dom, tuple([PrefixMarginals(k=1)] + pairs(dom, kind)))
    block = AllRangeBlock(n) if kind == "range" else circular(n)
    groups = [Product(((a, block),)) for a in dom.names]
    groups += [Product(((a, block), (b, block))) for a, b in itertools.combinations(dom.names, 2)]
    return Workload(dom, tuple(groups))


def table5(n: int, d: int) -> Workload:
    """All 1-way range + all 2-way affine + all 3-way prefix products on [n]^d."""
    dom = Domain.from_sizes([n] * d, kinds=["numeric"] * d)
    groups = [Product(((a, AllRangeBlock(n)),)) for a in dom.names]
    groups += pairs(dom, "affine")
    groups += [
        Product(tuple((a, PrefixBlock(n)) for a in triple))
        for triple in itertools.combinations(dom.names, 3)
    ]
    return Workload(dom, tuple(groups))


# ----- RP+ (issue 20, item 1) ---------------------------------------------------------------
#: (workload, printed RP+, certified optimum) where each attribute has one block.
RP_PLUS_KRONECKER = {
    "T4 n=10 prefix": (lambda: table4("prefix", 10), 36.23, 33.693),
    "T4 n=10 range": (lambda: table4("range", 10), 48.95, 41.076),
    "T2 CPS 1-way": (lambda: hybrid("CPS", (1,)), 3.18, 3.135),
    "T2 Adult 1-way": (lambda: hybrid("Adult", (1,)), 5.11, 5.047),
    "T2 Loans 1-way": (lambda: hybrid("Loans", (1,)), 4.73, 4.670),
}


@pytest.mark.parametrize("cell", list(RP_PLUS_KRONECKER))
def test_rp_plus_is_the_certified_optimum_below_the_printed_cell(cell: str) -> None:
    make, printed, certified = RP_PLUS_KRONECKER[cell]
    W = make()
    ours = rmse(W, "kron_basis")
    assert ours == pytest.approx(certified, abs=HALF_MILLI)
    optimal = qs_plan(W, "optimal")
    assert ours == pytest.approx(optimal.rmse(), rel=1e-9)
    assert worst_gap(optimal) < 1e-9
    assert ours < printed - 0.005  # the printed basis is not optimal


def test_rp_plus_prefix_residuals_are_the_1d_centred_optimum() -> None:
    """Spec R6: OPT(C P_10' P_10 C) = 9.9659437267 per attribute, so the {a1} residual costs
    (1 + 39 s) OPT with s = 3.85 (the row means of P_10) and {a1, a2} costs OPT**2."""
    plan = get("querysmasher", sub_solver="kron_basis", workers=0).plan(table4("prefix", 10), BETA1)
    table = plan.view("residual_table")
    losses = dict(zip(table.column("residual"), table.column("loss"), strict=True))
    opt = 9.9659437267
    assert losses["a1"] == pytest.approx((1 + 39 * 3.85) * opt, rel=1e-8)
    assert losses["a1 x a2"] == pytest.approx(opt**2, rel=1e-8)


def test_rp_plus_marginals_reproduce_the_printed_cell() -> None:
    assert rmse(table4("marginal", 10), "kron_basis") == pytest.approx(23.48, abs=HALF_CENTI)


@pytest.mark.parametrize(
    ("kind", "printed", "qs", "rp"),
    [("affine", 62.48, 28.010, 62.178), ("abs", 85.99, 30.103, 87.398)],
)
def test_rp_plus_non_kronecker_rows(kind: str, printed: float, qs: float, rp: float) -> None:
    """Affine / abs 2-way queries are not products: RP+ measures their residuals in the
    prefix bases of the 1-way part. Two-sided: above the certified QS optimum (spec R10),
    below both plain RP (spec 5.8) and the printed RP+ cell."""
    ours = rmse(table4(kind, 10), "kron_basis")
    assert qs < ours < min(rp, printed) - 0.005


# ----- Table 2, two-way, three-way and <=3-way rows -----------------------------------------
#: (dataset, ways) -> (printed RP+, printed WFF, printed QS, certified QS)
TABLE2 = {
    ("CPS", "2"): (6.36, 7.841, 6.194, 6.192),
    ("CPS", "3"): (8.12, 10.267, 7.903, 7.886),
    ("CPS", "<=3"): (8.39, 10.594, 8.140, 8.140),
    ("Adult", "2"): (17.63, 22.493, 17.632, 17.190),
    ("Adult", "3"): (47.19, 66.934, 47.055, 45.552),
    ("Adult", "<=3"): (48.90, 66.794, 47.853, 45.465),
    ("Loans", "2"): (14.91, 18.736, 14.822, 14.575),
    ("Loans", "3"): (36.11, 49.823, 36.095, 34.991),
    ("Loans", "<=3"): (36.65, 49.721, 36.410, 34.927),
}


@pytest.mark.parametrize("key", list(TABLE2), ids=lambda k: f"{k[0]}-{k[1]}")
def test_table2(key: tuple[str, str]) -> None:
    name, way = key
    rp_plus, wff, qs, certified = TABLE2[key]
    W = hybrid(name, (1, 2, 3) if way == "<=3" else (int(way),))
    ours_qs = rmse(W, "optimal")
    assert ours_qs == pytest.approx(certified, abs=HALF_MILLI)
    assert ours_qs <= qs + HALF_MILLI
    assert rmse(W, "fourier") == pytest.approx(wff, abs=HALF_MILLI)
    ours_rp_plus = rmse(W, "kron_basis")
    assert ours_rp_plus == pytest.approx(ours_qs, rel=1e-9)  # one block per attribute
    assert ours_rp_plus < rp_plus - 0.005


# ----- Table 3, CPS (approximate definition, spec 5.8) --------------------------------------
@pytest.mark.parametrize(
    ("kind", "wff", "printed_wff", "printed_rp_plus"),
    [("affine", 7.144, 7.147, 10.012), ("abs", 7.382, 7.387, 10.476)],
)
def test_table3_cps_wff_and_rp_plus(
    kind: str, wff: float, printed_wff: float, printed_rp_plus: float
) -> None:
    """WFF equals the spec's derived value and is within 0.006 of the printed one (the
    paper's Table 3 workload differs in a detail the text does not give)."""
    W = table3(kind)
    ours = rmse(W, "fourier")
    assert ours == pytest.approx(wff, abs=HALF_MILLI)
    assert ours == pytest.approx(printed_wff, abs=0.006)
    assert ours < rmse(W, "kron_basis") < printed_rp_plus


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "printed", "certified"), [("affine", 5.935, 4.825), ("abs", 5.900, None)]
)
def test_table3_cps_qs(kind: str, printed: float, certified: float | None) -> None:
    """QS below the printed value (spec 5.8's certified 4.825 for affine); abs has no spec
    value, so ours is checked by its own certificate and against WFF."""
    W = table3(kind)
    optimal = qs_plan(W, "optimal")
    ours = optimal.rmse()
    assert worst_gap(optimal) < 1e-9
    assert ours < printed
    if certified is not None:
        assert ours == pytest.approx(certified, abs=HALF_MILLI)
    assert ours < rmse(W, "fourier")


# ----- Table 4, n = 20-50: marginal, prefix, range, circular --------------------------------
#: (n, kind) -> (printed WFF, printed QS, certified QS); spec 5.8.
TABLE4 = {
    (20, "marginal"): (25.70, 25.70, 25.699),
    (30, "marginal"): (26.46, 26.46, 26.460),
    (40, "marginal"): (26.84, 26.84, 26.844),
    (50, "marginal"): (27.07, 27.07, 27.074),
    (20, "prefix"): (62.95, 49.51, 49.382),
    (30, "prefix"): (79.09, 60.81, 59.662),
    (40, "prefix"): (91.67, 68.78, 67.460),
    (50, "prefix"): (102.09, 75.26, 73.801),
    (20, "range"): (63.58, 63.32, 63.307),
    (30, "range"): (79.02, 78.79, 78.784),
    (40, "range"): (91.11, 90.91, 90.903),
    (50, "range"): (101.15, 100.97, 100.962),
    (20, "circular"): (63.01, 63.01, 63.010),
    (30, "circular"): (79.14, 79.14, 79.141),
    (40, "circular"): (91.72, 91.72, 91.723),
    (50, "circular"): (102.13, 102.13, 102.131),
}
#: Cells over 10 s on the shared 2-core machine.
SLOW4 = {(40, "circular"), (50, "circular")}
#: Rows where the paper's QS is the optimum (spec 5.8), and how close the print is: to its
#: rounding on marginal / circular; range rows within 0.015 (spec 5.8 says 0.01, but n = 20
#: prints 63.32 for the optimum 63.3074).
EXACT4 = {"marginal": HALF_CENTI, "circular": HALF_CENTI, "range": 0.015}


@pytest.mark.parametrize(
    "key",
    [pytest.param(k, marks=pytest.mark.slow) if k in SLOW4 else k for k in TABLE4],
    ids=lambda k: f"n{k[0]}-{k[1]}",
)
def test_table4(key: tuple[int, str]) -> None:
    n, kind = key
    wff, qs, certified = TABLE4[key]
    W = table4(kind, n)
    ours = rmse(W, "optimal")
    assert ours == pytest.approx(certified, abs=HALF_MILLI)
    assert ours <= qs + HALF_CENTI
    if kind in EXACT4:
        assert ours == pytest.approx(qs, abs=EXACT4[kind])
    assert rmse(W, "fourier") == pytest.approx(wff, abs=HALF_CENTI)
    if kind in ("prefix", "range"):  # one block per attribute: RP+ is the same optimum
        assert rmse(W, "kron_basis") == pytest.approx(ours, rel=1e-9)


# ----- Table 4, n = 20-50: affine and abs_diff (one n x n residual each, issue 19.3) --------
#: (n, kind) -> (printed QS, certified QS); spec 5.8 (every print lies above the optimum).
TABLE4_PAIRS = {
    (20, "affine"): (35.71, 35.164),
    (30, "affine"): (44.36, 39.169),
    (40, "affine"): (69.62, 41.946),
    (50, "affine"): (79.33, 44.071),
    (20, "abs"): (39.49, 37.170),
    (30, "abs"): (48.14, 41.110),
    (40, "abs"): (49.83, 43.843),
    (50, "abs"): (52.80, 45.940),
}


@pytest.mark.parametrize(
    "key",
    [pytest.param(k, marks=pytest.mark.slow) if k[0] == 50 else k for k in TABLE4_PAIRS],
    ids=lambda k: f"n{k[0]}-{k[1]}",
)
def test_table4_affine_abs(key: tuple[int, str]) -> None:
    """The n^2-cell affine / abs_diff residual (solved in class form, Newton on the orbits of
    its grid symmetries) reaches the spec's certified optimum, below the print, and its own
    certificate closes."""
    printed, certified = TABLE4_PAIRS[key]
    optimal = qs_plan(table4(key[1], key[0]), "optimal")
    ours = optimal.rmse()
    assert ours == pytest.approx(certified, abs=HALF_MILLI)
    assert ours < printed
    assert worst_gap(optimal) < 1e-9


# ----- Table 5: 1-way range + 2-way affine + 3-way prefix -----------------------------------
#: (n, d) -> (printed RP+, printed WFF, printed QS, certified QS); spec 5.5 / 5.8.
TABLE5 = {
    (10, 10): (22.49, 25.37, 20.41, 20.41),
    (10, 20): (57.17, 65.13, 51.63, 51.545),
    (10, 30): (99.66, 113.98, 93.50, 89.583),
    (10, 40): (148.46, 170.18, 138.38, 133.212),
    (10, 50): (202.72, 232.72, 187.24, 181.670),
    (20, 10): (36.82, 47.04, 34.60, 33.751),
    (20, 20): (97.22, 125.94, 95.63, 88.686),
    (20, 30): (172.22, 224.36, 167.16, 156.777),
    (20, 40): (259.00, 338.53, 249.29, 235.482),
    (20, 50): (355.93, 466.26, 340.55, 323.338),
    (30, 10): (47.08, 64.37, 44.46, 43.580),
    (30, 20): (126.20, 175.18, 126.19, 116.357),
    (30, 30): (224.99, 314.28, 221.80, 207.088),
    (30, 40): (339.60, 476.12, 331.86, 312.285),
    (30, 50): (467.86, 657.56, 454.37, 429.946),
}
#: Cells over 10 s (three plans each) on the shared 2-core machine.
SLOW5 = {
    (10, 50),
    (20, 20),
    (20, 30),
    (20, 40),
    (20, 50),
    (30, 10),
    (30, 20),
    (30, 30),
    (30, 40),
    (30, 50),
}


@pytest.mark.parametrize(
    "key",
    [pytest.param(k, marks=pytest.mark.slow) if k in SLOW5 else k for k in TABLE5],
    ids=lambda k: f"n{k[0]}-d{k[1]}",
)
def test_table5(key: tuple[int, int]) -> None:
    rp_plus, wff, qs, certified = TABLE5[key]
    W = table5(*key)
    ours = rmse(W, "optimal")
    # (10, 10): the spec gives the printed 20.41 as the optimum, to two decimals
    assert ours == pytest.approx(certified, abs=HALF_CENTI if key == (10, 10) else HALF_MILLI)
    assert ours <= qs + HALF_CENTI
    assert rmse(W, "fourier") == pytest.approx(wff, abs=HALF_CENTI)
    # several blocks per attribute: RP+ shares one basis, so it is strictly worse than QS
    assert ours < rmse(W, "kron_basis") < rp_plus
