"""The matrix mechanisms planned on the census hierarchy's queries (spec R15's comparison)."""

from __future__ import annotations

import math

import pytest

from engine.errors import SpecError
from engine.mechanisms.hierarchical.synthetic import running_example
from engine.workflows.census_comparison import matrix_mechanism_rmse


def test_matrix_mechanisms_plan_the_pgsr_queries_under_either_unit() -> None:
    h = running_example()
    ind = matrix_mechanism_rmse(h.tree, h.sizes, "workload", 1.0, "individual")
    grp = matrix_mechanism_rmse(h.tree, h.sizes, "workload", 1.0, "group")
    # A = W_y has individual sensitivity 2L = 4: Laplace variance 2 (4/1)^2 = 32 per
    # measurement, and the least-squares projector keeps 6 of 9 dimensions -- R15's linear
    # reference with Laplace instead of geometric noise (4.619 vs 4.607)
    assert ind["rmse"] == pytest.approx(math.sqrt(32 * 6 / 9))
    # the group unit (one whole group added or removed) only needs sensitivity L = 2
    assert grp["rmse"] == pytest.approx(math.sqrt(8 * 6 / 9))
    assert ind["coordinates"] == "cumulative" and grp["coordinates"] == "counts"
    with pytest.raises(SpecError, match="unit"):
        matrix_mechanism_rmse(h.tree, h.sizes, "workload", 1.0, "household")
