"""QuerySmasher Tables 2-5 (RMSE at privacy cost 1 = zCDP rho 1/2): ours beside the paper's.

Every cell is planned by the registered mechanisms (``querysmasher`` with its sub-solvers
``kron_basis`` = RP+, ``fourier`` = WFF, ``optimal`` = QS, ``residual`` = RP) and read off
``plan.rmse()``. What to expect (spec 5.8):

* WFF equals the printed value (to its precision) wherever the workload is defined exactly;
* QS equals the printed value on marginal / circular / range / 1-way rows and is *lower*
  elsewhere: the paper's solver was not run to optimality. Our QS losses are certified (dual
  gap below 1e-9 per residual); the spec's own certified optima are printed beside them;
* RP+ (``kron_basis``) uses, per attribute, the certified optimum of the *centred* design
  problem (spec 2.3, 6.2 (1)). The printed RP+ cells are not reproducible: each is above the
  column 'lb', a certified lower bound on the error of *every* RP+ basis (the dual bound of
  QS's optimum, which dominates every residual-respecting splittable mechanism, spec 4), and
  on rows with one block per attribute our RP+ attains that bound. So the paper's RP+ basis
  (HDMM's unit-diagonal L-BFGS on the un-centred workload, then centred; RP+ code) is not the
  optimum of the problem it stands for. Centring our exact un-centred optimum instead (the
  previous implementation) gives 49.31 on Table 4 n = 10 prefix and 3.725 on CPS 1-way, above
  the printed 36.23 / 3.18; HDMM's L-BFGS on the centred workload gives 35.39 / 3.205, and the
  RP+ code's L-BFGS on the un-centred one 48.16: none of the bases we could name prints
  36.23. The verdict column says which side of the print ours is and whether it is optimal;
* HDMM is not part of this family (NI columns omitted);
* Table 3 is approximate for CPS and not derivable for Adult / Loans (query counts differ),
  so only CPS is run; random workloads (Table 4) depend on unpublished seeds and are run at
  n = 10 with our own seed only with ``--random``.

Usage: ``python benchmarks/querysmasher_tables.py [--tables 2,3,4,5] [--max-n 50] [--random]``
"""

from __future__ import annotations

import os

# One BLAS thread: on a shared 2-core machine OpenBLAS threads spin and slow small eighs ~10x.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from querysmasher_workloads import (  # noqa: E402
    CERTIFIED_QS,
    TABLE2,
    TABLE3,
    TABLE4,
    TABLE5,
    mixed_workload,
    table2_workload,
    table3_workload,
    table4_workload,
)

from engine.mechanisms import get  # noqa: E402
from engine.privacy import Privacy  # noqa: E402
from engine.workloads import Workload  # noqa: E402

BETA1 = Privacy(noise="zcdp", rho=0.5)
METHODS = (("RP+", "kron_basis"), ("WFF", "fourier"), ("QS", "optimal"), ("RP", "residual"))


def rmse_all(workload: Workload) -> tuple[dict[str, float], float, float]:
    """RMSE per method, the worst certified gap of QS's sub-problems, and seconds."""
    out: dict[str, float] = {}
    gap = 0.0
    start = time.perf_counter()
    for label, sub_solver in METHODS:
        plan = get("querysmasher", sub_solver=sub_solver).plan(workload, BETA1)
        out[label] = plan.rmse()
        if sub_solver == "optimal":
            gap = max(plan.view("residual_table").column("gap"))
    return out, gap, time.perf_counter() - start


def rp_plus_verdict(ours: float, lower: float, paper: float | None) -> str:
    """Where the printed RP+ cell stands against the certified bound and our RP+."""
    if paper is None:
        return "NI"
    optimal = "ours optimal" if ours <= lower * (1 + 1e-6) else "ours feasible"
    if abs(ours - paper) <= 0.005 + 1e-9:
        return f"reproduced ({optimal})"
    side = "paper above ours" if paper > ours else "paper BELOW ours"
    return f"{side} by {abs(paper - ours):.3f}, lb {lower:.3f} ({optimal})"


def fmt(value: float | None, width: int = 8) -> str:
    return f"{'NI':>{width}}" if value is None else f"{value:>{width}.3f}"


HEADER = (f"{'':<22}{'RP+ ours':>9}{'paper':>8}{'lb':>9} {'WFF ours':>9}{'paper':>8} "
          f"{'QS ours':>9}{'paper':>8}{'cert.':>9}{'QS/pap':>8} {'RP ours':>9}{'gap':>9}"
          f"{'sec':>7}  RP+ verdict")


def row(label: str, ours: dict[str, float], paper: tuple, certified: float | None,
        gap: float, seconds: float) -> str:
    rp_plus, wff, qs = paper
    ratio = f"{ours['QS'] / qs:>8.4f}" if qs else f"{'':>8}"
    lower = ours["QS"] * math.sqrt(1.0 - gap)  # RMSE of QS's dual lower bound
    return (f"{label:<22}{fmt(ours['RP+'], 9)}{fmt(rp_plus)}{fmt(lower, 9)} "
            f"{fmt(ours['WFF'], 9)}{fmt(wff)} "
            f"{fmt(ours['QS'], 9)}{fmt(qs)}{fmt(certified, 9) if certified else ' ' * 9}"
            f"{ratio} {fmt(ours['RP'], 9)}{gap:>9.1e}{seconds:>7.1f}  "
            f"{rp_plus_verdict(ours['RP+'], lower, rp_plus)}")


def table2() -> None:
    print("\nTable 2: hybrid marginals (categorical = identity, numeric = prefix)")
    print(HEADER)
    for (name, way), (_, rp_plus, _, wff, qs) in TABLE2.items():
        ours, gap, sec = rmse_all(table2_workload(name, way))
        print(row(f"{name} {way}-way", ours, (rp_plus, wff, qs),
                  CERTIFIED_QS.get(("T2", name, way)), gap, sec), flush=True)


def table3() -> None:
    print("\nTable 3: all 1-way prefix + 2-way affine / abs_diff, every attribute numeric "
          "(CPS only; approximate per spec 5.8)")
    print(HEADER)
    for (name, kind), (_, rp_plus, wff, qs) in TABLE3.items():
        if name != "CPS":
            continue
        ours, gap, sec = rmse_all(table3_workload(name, kind))
        print(row(f"{name} {kind}", ours, (rp_plus, wff, qs),
                  CERTIFIED_QS.get(("T3", name, kind)), gap, sec), flush=True)


def table4(max_n: int, random: bool) -> None:
    print("\nTable 4: all 1-way + 2-way queries on [n]^40")
    print(HEADER)
    for (n, kind), (_, rp_plus, _, wff, qs) in TABLE4.items():
        if n > max_n or (kind == "random" and not (random and n == 10)):
            continue
        ours, gap, sec = rmse_all(table4_workload(kind, n))
        label = f"n={n} {kind}" + (" (own seed)" if kind == "random" else "")
        print(row(label, ours, (rp_plus, wff, qs), CERTIFIED_QS.get(("T4", n, kind)), gap,
                  sec), flush=True)


def table5(max_n: int) -> None:
    print("\nTable 5: 1-way range + 2-way affine + 3-way prefix on [n]^d")
    print(HEADER)
    for (n, d), paper in TABLE5.items():
        if n > max_n:
            continue
        ours, gap, sec = rmse_all(mixed_workload(n, d))
        print(row(f"n={n} d={d}", ours, paper, CERTIFIED_QS.get(("T5", n, d)), gap, sec),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="2,3,4,5", help="comma-separated table numbers")
    parser.add_argument("--max-n", type=int, default=50, help="largest n in Tables 4 and 5")
    parser.add_argument("--random", action="store_true", help="Table 4 random at n = 10")
    args = parser.parse_args()
    tables = {int(t) for t in args.tables.split(",")}
    print(__doc__.split("\n\n")[0])
    print("columns: RMSE ours / paper per method; 'lb' = certified lower bound on any RP+ "
          "(and any residual-respecting splittable mechanism): QS's dual bound; 'cert.' = the "
          "spec's certified QS optimum; 'gap' = our worst certified relative gap over QS's "
          "residual sub-problems")
    start = time.perf_counter()
    if 2 in tables:
        table2()
    if 3 in tables:
        table3()
    if 4 in tables:
        table4(args.max_n, args.random)
    if 5 in tables:
        table5(args.max_n)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
