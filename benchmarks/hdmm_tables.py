"""HDMM Tables 6 and 7: every column we compute, beside the paper's, and OPT_HDMM's run time.

For each multi-dimensional workload (CPS, Adult, Loans, Census SF1/SF1+) and each noise type,
one ``hdmm`` plan runs every operator; its per-operator errors fill the OPT_kron, OPT_+ and
OPT_M columns, its choice the HDMM column. Identity, the plain mechanism (sum of per-product
sensitivities) and the SVD bound complete the row. Each cell prints ``ours (paper, ratio)``;
ratios below 1 are lower error than the paper's.

Known differences (spec section 7.6), reported rather than hidden:

* OPT_+: the paper's OPT_+ column is not Def. 19 with one group per product, and the one
  HDMM cell it feeds (Adult 2-D prefix-marginals, Laplace, 484.07) is not reproduced (ours
  is 1.046x). :func:`opt_plus_certificate` prints why, with numbers: the printed Loans
  small-marginals cell lies below a certified floor of that OPT_+ which ours attains, and the
  Adult cell would need every prefix factor about 6 % below the best OPT_0 strategy any
  search here or in the authors' released code finds.
* SF1 rows evaluate the persons tables without the relationship attribute, as the paper did.
* The paper does not specify the OPT_M Gaussian optimiser; ours attains Thm. 13's closed form
  where it is non-negative, which is why several Gaussian cells are lower than printed.

Run: ``python benchmarks/hdmm_tables.py`` (a few minutes). BLAS runs single-threaded (see
``benchmarks/hdmm_opt0.py``). The issue's goal: OPT_HDMM on Adult <=3-way marginals < 60 s.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import math  # noqa: E402  (after the BLAS thread setting)
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from engine.analysis.svd_bound import svd_bound  # noqa: E402
from engine.linalg.marginals import is_marginal_like  # noqa: E402
from engine.mechanisms import get  # noqa: E402
from engine.mechanisms.hdmm.opt0 import opt0  # noqa: E402
from engine.mechanisms.hdmm.structure import ProductUnion  # noqa: E402
from engine.mechanisms.hdmm.union import (  # noqa: E402
    gram_svd_bound,
    groups_of,
    opt_union,
    union_floor,
    union_weights,
)
from engine.privacy import Privacy  # noqa: E402

# the paper's workloads and plain baseline are test fixtures (tests/hdmm_paper.py)
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from hdmm_paper import WORKLOADS, plain_rmse  # noqa: E402

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)

#: Paper: Identity, plain, OPT_kron, OPT_+, OPT_M, HDMM, SVDB (None: not printed).
TABLE6 = {
    ("census", "sf1"): (23.20, 70.71, 7.30, 30.55, 9.56, 7.30, None),
    ("census", "sf1+"): (32.50, 141.42, 10.23, 42.31, 12.88, 10.23, None),
    ("cps", "marginals"): (5.38, 45.25, 4.85, 4.85, 4.84, 4.84, 2.63),
    ("cps", "prefix"): (98.06, 56568.54, 40.59, 40.59, 69.38, 40.59, 9.32),
    ("adult", "marginals"): (5352117.26, 664.68, 872.58, 306.33, 225.35, 225.35, 15.08),
    ("adult", "prefix"): (475602516.60, 138602.83, 1119.16, 484.07, 553.56, 484.07, None),
    ("loans", "marginals"): (3330650.46, 265.87, 654.35, 204.17, 100.92, 100.92, 11.61),
    ("loans", "prefix"): (15340082.96, 11013.90, 1707.67, 485.67, 288.29, 288.29, None),
}
TABLE7 = {
    ("census", "sf1"): (69.33, 29.87, 9.80, 75.66, 14.31, 9.80, None),
    ("census", "sf1+"): (97.08, 42.25, 10.90, 84.16, 15.88, 10.90, None),
    ("cps", "marginals"): (16.08, 23.90, 7.85, 7.85, 7.86, 7.85, 7.85),
    ("cps", "prefix"): (292.93, 844.94, 29.48, 29.49, 104.09, 29.48, 27.85),
    ("adult", "marginals"): (15988375.02, 91.59, 82.42, 899.04, 46.44, 46.44, 45.06),
    ("adult", "prefix"): (1420766966.19, 1322.58, 126.17, 639.43, 296.12, 126.17, None),
    ("loans", "marginals"): (9949649.11, 57.92, 81.51, 631.40, 34.91, 34.91, 34.67),
    ("loans", "prefix"): (45825415.90, 372.83, 132.43, 994.04, 99.72, 99.72, None),
}
COLUMNS = ("Identity", "plain", "OPT_kron", "OPT_+", "OPT_M", "HDMM", "SVDB")


def cell(ours: float | None, paper: float | None) -> str:
    """``ours (paper, ratio)`` with the precision the value needs."""
    if ours is None:
        return "-"
    digits = 2 if ours < 1e5 else 0
    text = f"{ours:.{digits}f}"
    if paper is None:
        return text + " (-)"
    return f"{text} ({paper:.{digits}f}, {ours / paper:.3f})"


#: The issue's oracle: these columns for these data sets within 2 % of the paper (or lower).
CHECKED_COLUMNS = ("OPT_kron", "OPT_M", "HDMM")
CHECKED_DATA = ("cps", "adult", "loans")
TOLERANCE = 1.02
#: Why a checked cell may miss the paper: printed beside it.
EXPLAINED = {
    ("adult", "prefix", "HDMM"): (
        "the paper's HDMM here is its OPT_+ cell 484.07, not reproducible: see the OPT_+ "
        "certificate printed below Table 6"),
}

#: The paper's OPT_+ cells the certificate uses (Table 6, Laplace).
PAPER_OPT_PLUS = {("loans", "marginals"): 204.17, ("adult", "prefix"): 484.07}
#: The authors' released code (dpcomp-org/hdmm at 5aa9df9, ``DefaultUnionKron`` as its
#: ``experiments/journal/compute_strategies.py`` calls it) on the Adult 2-D prefix row,
#: Laplace RMSE over 40 seeded runs, measured 2026-11-24 (min, median, max). Its run log
#: ``experiments/journal/hderror-old.csv`` has ten runs of this row, 342.29-358.80 before
#: the sqrt(2) of eps = 1 (484.07-507.42 after): the paper prints the least of them.
PEER_ADULT_PREFIX_OPT_PLUS = (507.99, 509.35, 513.91)
#: Extended OPT_0 search on each prefix factor: starts, and p as a divisor of n.
EXTENDED_RESTARTS = 32
EXTENDED_P_DIVISORS = (16, 8)


def _rmse(unit_tse: float, m: int, privacy: Privacy) -> float:
    return privacy.sigma() * math.sqrt(unit_tse / m)


def _def19_error(union: ProductUnion, errors: list[np.ndarray]) -> float:
    """Def. 19's unit-noise error with one group per product, every product's block the
    Kronecker product of factors with these per-Gram errors (``errors[i][u]``)."""
    per = union.weights2.copy()
    for i in range(union.d):
        per = per * errors[i][union.index[:, i]]
    return union_weights(per, np.ones(union.k), 1)[1]


def opt_plus_certificate() -> None:
    """Print why the paper's Adult 2-D prefix OPT_+ cell (Laplace) is not reproduced."""
    print("\nOPT_+ certificate (Def. 19, one group per product, Laplace, eps = 1):")
    loans = WORKLOADS[("loans", "marginals")]()
    union = ProductUnion.of(loans)
    groups = groups_of(loans, "product")
    floor = _rmse(union_floor(union, 1, groups), loans.num_queries, LAPLACE)
    ours = get("hdmm-union").plan(loans, LAPLACE).rmse()
    paper = PAPER_OPT_PLUS[("loans", "marginals")]
    print(f"  1. Loans small marginals: certified floor {floor:.2f} (every product's SVD bound, "
          f"Thm. 5, under the closed-form weights); ours {ours:.2f} attains it (all factors I "
          f"or T); the paper prints {paper:.2f} = {paper / floor:.3f} x the floor. The "
          "authors' code builds this workload from the same 188 products, so the printed "
          "OPT_+ column comes from another procedure than Def. 19 with one group per product.")
    adult = WORKLOADS[("adult", "prefix")]()
    union = ProductUnion.of(adult)
    groups = groups_of(adult, "product")
    result = opt_union(union, 1, groups)
    m = adult.num_queries
    ours = _rmse(result.loss, m, LAPLACE)
    paper = PAPER_OPT_PLUS[("adult", "prefix")]
    floor = _rmse(union_floor(union, 1, groups), m, LAPLACE)
    # per-Gram errors: I and T attain their SVD bound (certified optimal); prefixes via OPT_0
    found = [np.array([gram_svd_bound(V) for V in grams]) for grams in union.grams]
    free = [np.array([not is_marginal_like(V) for V in grams]) for grams in union.grams]
    prefix = {}
    for i, grams in enumerate(union.grams):
        for u in np.flatnonzero(free[i]):
            n = grams[u].shape[0]
            found[i][u] = min(opt0(grams[u], 1, p=max(n // k, 1), restarts=EXTENDED_RESTARTS,
                                   seed=k).loss for k in EXTENDED_P_DIVISORS)
            prefix[n] = found[i][u]
    best = _rmse(_def19_error(union, found), m, LAPLACE)
    lo, hi = 0.5, 1.0  # the common factor on every prefix error that reaches the paper
    for _ in range(60):
        f = 0.5 * (lo + hi)
        trial = [np.where(free[i], f * e, e) for i, e in enumerate(found)]
        lo, hi = (f, hi) if _rmse(_def19_error(union, trial), m, LAPLACE) < paper else (lo, f)
    sizes = ", ".join(f"P_{n} {e:.1f}" for n, e in sorted(prefix.items(), reverse=True))
    print(f"  2. Adult 2-D prefix: the 91 blocks separate, OPT_+ = (sum_j E_j^(1/3))^3 with "
          f"E_j the product of its factors' errors; I_n (n) and T (1) are at their SVD bound, "
          f"certified optimal. Ours {ours:.2f} ({ours / paper:.3f} x the paper's "
          f"{paper:.2f}); with the best prefix factors of an extended OPT_0 search "
          f"({EXTENDED_RESTARTS} starts, p = n/16 and n/8; {sizes}) {best:.2f} "
          f"({best / paper:.3f} x). The paper's cell needs every prefix factor at "
          f"{lo:.3f} x those errors (P_100 {lo * max(prefix.values()):.1f}). Certified "
          f"floor of this OPT_+: {floor:.2f}.")
    low, median, high = PEER_ADULT_PREFIX_OPT_PLUS
    print(f"  3. The authors' released code on this row: {low:.2f}-{high:.2f} (median "
          f"{median:.2f}) over 40 runs (measured 2026-11-24); the printed {paper:.2f} is the "
          "least of ten runs in its log hderror-old.csv (484.07-507.42), whose Loans "
          "small-marginals OPT_+ runs (204.17-209.59) all lie below item 1's floor: an "
          "earlier procedure than the released Def. 19 code.")


def row(key: tuple[str, str], privacy: Privacy, paper: tuple,
        misses: list[str]) -> float:
    """Print one table row, add checked cells above the tolerance to ``misses``; return the
    OPT_HDMM planning time (seconds)."""
    W = WORKLOADS[key]()
    start = time.perf_counter()
    plan = get("hdmm").plan(W, privacy)
    seconds = time.perf_counter() - start
    table = plan.view("candidates")
    cands = dict(zip(table.column("operator"), table.column("rmse"), strict=True))
    ident = get("identity").plan(W, privacy).rmse()
    bound = svd_bound(W).rmse(W, privacy)
    ours = (ident, plain_rmse(W, privacy), cands.get("kron"), cands.get("union"),
            cands.get("marginals"), plan.rmse(), bound)
    cells = [cell(o, p) for o, p in zip(ours, paper, strict=True)]
    if key[0] in CHECKED_DATA:
        for column, o, p in zip(COLUMNS, ours, paper, strict=True):
            if column in CHECKED_COLUMNS and p is not None and o > TOLERANCE * p:
                why = EXPLAINED.get((*key, column), "not explained")
                misses.append(f"{key[0]} {key[1]} {column}: {o:.2f} vs {p:.2f} "
                              f"({o / p:.3f}): {why}")
    print(f"{key[0]:6} {key[1]:9} | " + " | ".join(cells)
          + f" | chose {plan.fact('chosen_operator')}, {seconds:.1f} s", flush=True)
    return seconds


def main() -> None:
    for name, table, privacy in (("Table 6 (Laplace, eps = 1)", TABLE6, LAPLACE),
                                 ("Table 7 (Gaussian, eps = 1, delta = 1e-6)", TABLE7,
                                  GAUSSIAN)):
        print(f"\n{name}: ours (paper, ours/paper)")
        print(f"{'data':6} {'workload':9} | " + " | ".join(COLUMNS))
        times, misses = {}, []
        for key, paper in table.items():
            times[key] = row(key, privacy, paper, misses)
        checked = ", ".join(CHECKED_COLUMNS)
        print(f"Cells of {checked} for CPS, Adult and Loans above {TOLERANCE:.2f}x the paper: "
              + ("none" if not misses else "\n  " + "\n  ".join(misses)))
        adult = times[("adult", "marginals")]
        print(f"OPT_HDMM on Adult <=3-way marginals: {adult:.1f} s "
              f"(goal < 60 s: {adult / 60:.2f} of it)")
        if privacy is LAPLACE:
            opt_plus_certificate()
    print(f"\n(sigma(1, 1e-6) = {GAUSSIAN.sigma():.9f}; {math.sqrt(2):.6f} for Laplace)")


if __name__ == "__main__":
    main()
