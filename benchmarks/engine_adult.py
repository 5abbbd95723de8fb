"""Expected error on the Adult schema (14 attributes, 6.4e17 cells) without materialising
anything: identity on all 3-way marginals (20.9M queries) and on all <= 3-way marginals (Table
6/7 row), with the SVD bound, timed and printed beside the paper's numbers.

Run: ``python benchmarks/engine_adult.py``. Goal (issue 2): under one second.
"""

from __future__ import annotations

from timing import timed

from engine.analysis.svd_bound import svd_bound
from engine.domain import Domain
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads import Workload

ADULT = [100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2]
LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
GOAL_SECONDS = 1.0


def main() -> None:
    domain = Domain.from_sizes(ADULT)
    print(f"Adult schema: {len(ADULT)} attributes, {domain.size:.3e} cells")
    rows = [("all 3-way marginals", {"k": 3}, None, None),
            ("all <= 3-way marginals", {"upto": 3}, (5352117.26, 15988375.02), (15.08, 45.06))]
    for title, kwargs, paper_identity, paper_bound in rows:
        W = Workload.marginals(domain, **kwargs)
        plan, seconds = timed(lambda W=W: get("identity").plan(W, LAPLACE))
        bound, bound_seconds = timed(lambda W=W: svd_bound(W))
        print(f"\n{title}: {W.num_queries:,} queries in {len(W.terms)} terms")
        print(f"  identity plan + expected error: {seconds:.3f} s "
              f"({seconds / GOAL_SECONDS:.3f} x the 1 s goal)")
        print(f"  SVD bound:                      {bound_seconds:.3f} s "
              f"({bound_seconds / GOAL_SECONDS:.3f} x the 1 s goal)")
        lap, gau = plan.rmse(), plan.rmse(GAUSS)
        blap, bgau = bound.rmse(W, LAPLACE), bound.rmse(W, GAUSS)
        if paper_identity is None:
            print(f"  identity RMSE  Laplace {lap:.2f}   Gaussian {gau:.2f}")
            print(f"  SVD bound RMSE Laplace {blap:.2f}   Gaussian {bgau:.2f}")
        else:
            print(f"  identity RMSE  Laplace {lap:.2f} (paper {paper_identity[0]:.2f})   "
                  f"Gaussian {gau:.2f} (paper {paper_identity[1]:.2f})")
            print(f"  SVD bound RMSE Laplace {blap:.2f} (paper {paper_bound[0]:.2f})   "
                  f"Gaussian {bgau:.2f} (paper {paper_bound[1]:.2f})")


if __name__ == "__main__":
    main()
