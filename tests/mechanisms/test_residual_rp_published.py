"""ResidualPlanner's RMSE on all k-way marginals of the CPS, Adult and Loans schemas at
privacy cost 1 (rho = 1/2).

Provenance of ``PUBLISHED``: the values were entered as ResidualPlanner's published RMSEs
(Xiao et al., NeurIPS 2023), but that paper is neither among the seeds nor restated in a spec,
and none of the seeds prints them (the QuerySmasher paper's Table 2 uses hybrid
identity/prefix workloads on these schemas, not marginals). They are therefore *derived*
numbers, and this file derives them: ``closed_form_rmse`` evaluates the sum-of-variances
allocation of querysmasher.md 2.2 (``(sum sqrt(v p))**2``, the RP code's
``find_var_sum_cauchy``) on the schemas of querysmasher.md 5.4 for the workload of ALL k-way
marginals (exactly k attributes, no lower-order marginals); rounded to 3 decimals it gives
every constant below ("all marginals up to k-way" gives different values, CPS
1.772/2.133/2.276). The planners must reproduce the same numbers.
"""

from __future__ import annotations

import itertools
import math

import pytest

from engine.domain import Domain
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads import Workload

SCHEMAS = {
    "CPS": [7, 4, 2, 50, 100],
    "Adult": [42, 16, 15, 9, 7, 6, 5, 2, 2, 100, 100, 100, 99, 85],
    "Loans": [51, 36, 15, 8, 6, 5, 4, 3, 101, 101, 101, 101],
}
PUBLISHED = {
    ("CPS", 1): 1.744,
    ("CPS", 2): 2.035,
    ("CPS", 3): 2.048,
    ("Adult", 1): 3.047,
    ("Adult", 2): 6.359,
    ("Adult", 3): 10.515,
    ("Loans", 1): 2.875,
    ("Loans", 2): 5.634,
    ("Loans", 3): 8.702,
}


def closed_form_rmse(sizes: list[int], k: int) -> float:
    """RMSE of RP's optimal sum-of-variances plan for all k-way marginals (spec 2.2):
    ``v_A' = sum_{A >= A'} prod_{A'} (d - 1) prod_{A \\ A'} 1/d``, ``p_A' = prod_{A'} (d-1)/d``,
    total variance ``(sum sqrt(v p))**2`` at beta = 1, divided by the number of cells."""
    v: dict[tuple[int, ...], float] = {}
    cells = 0
    for target in itertools.combinations(range(len(sizes)), k):
        cells += math.prod(sizes[i] for i in target)
        for r in range(k + 1):
            for sub in itertools.combinations(target, r):
                rest = [i for i in target if i not in sub]
                v[sub] = v.get(sub, 0.0) + (
                    math.prod(sizes[i] - 1 for i in sub) / math.prod(sizes[i] for i in rest)
                )
    root = sum(
        math.sqrt(val * math.prod((sizes[i] - 1) / sizes[i] for i in sub)) for sub, val in v.items()
    )
    return math.sqrt(root**2 / cells)


@pytest.mark.parametrize(("schema", "k"), sorted(PUBLISHED))
def test_constants_follow_from_the_spec_closed_form(schema: str, k: int) -> None:
    assert round(closed_form_rmse(SCHEMAS[schema], k), 3) == PUBLISHED[(schema, k)]


@pytest.mark.parametrize(("schema", "k"), sorted(PUBLISHED))
def test_published_rmse(schema: str, k: int) -> None:
    W = Workload.marginals(Domain.from_sizes(SCHEMAS[schema]), k=k)
    plan = get("residual-planner").plan(W, Privacy(noise="zcdp", rho=0.5))
    assert round(plan.rmse(), 3) == PUBLISHED[(schema, k)]
    assert plan.rmse() == pytest.approx(closed_form_rmse(SCHEMAS[schema], k), rel=1e-9)
    # QuerySmasher is optimal too on marginals: same number through the generic path
    qs = get("querysmasher", workers=0).plan(W, Privacy(noise="zcdp", rho=0.5))
    assert qs.rmse() == pytest.approx(plan.rmse(), rel=1e-9)
