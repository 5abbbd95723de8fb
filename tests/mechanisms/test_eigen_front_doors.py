"""One truth: Eigen-Design plans the same strategy and RMSE through every front door.

An auditor's scenario (age x sex x race: age prefixes and every 2-way marginal, Gaussian
eps = 1, delta = 1e-6) gave RMSE 7.8970 in ``python -m engine compare`` and 7.9040 in the
explorer. Its Gram has repeated eigenvalues (eigenspaces of dimension 594 and 99), inside which
LAPACK's eigenvectors depend on the BLAS thread count: the CLI plans with the threaded BLAS,
the explorer's planner processes with one BLAS thread, and Program 1's optimum depends on the
basis. ``eigen_queries`` now rotates every repeated eigenvalue's eigenspace to a canonical
basis (``design.canonical_eigenbasis``), which is also the better one: RMSE 7.7282 both ways.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group
from threadpoolctl import threadpool_limits

from engine.mechanisms.eigen_design.design import (
    DEGENERATE_RTOL,
    canonical_eigenbasis,
    dense_gram,
    eigen_design,
    eigen_queries,
)
from engine.scenario import Scenario
from engine.workflows.compare import compare
from engine.workloads import AllRangeBlock, PrefixBlock, catalog
from explorer.planning.workers import PlannerPool

#: The auditor's scenario, as both front doors loaded it.
AUDITOR = {**catalog.spec("age_sex_race"),
           "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6}}
#: Its Eigen-Design RMSE as the CLI prints it (4 decimals; 7.728196101 measured on both paths,
#: 2026-11-25; the SVD bound's RMSE is 7.6789).
AUDITOR_RMSE = 7.7282


def small_auditor_gram() -> np.ndarray:
    """The auditor's workload on 12 ages and 3 races: eigenspaces of dimension 22 and 11."""
    spec = {"domain": {"age": {"size": 12, "kind": "numeric"}, "sex": 2, "race": 3},
            "workload": AUDITOR["workload"]}
    return dense_gram(Scenario.from_spec(spec).workload)


def repeated(values: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges of the eigenvalues repeated in ``values`` (descending)."""
    runs, i = [], 0
    while i < values.size:
        j = i + 1
        while j < values.size and values[i] - values[j] <= DEGENERATE_RTOL * values[i]:
            j += 1
        if j - i > 1:
            runs.append((i, j))
        i = j
    return runs


def test_canonical_basis_ignores_the_eigensolvers_choice() -> None:
    """Any orthonormal basis of each eigenspace, with any signs, gives the same eigen-queries
    (as a threaded and a one-thread LAPACK would) and so the same design and error."""
    eig = eigen_queries(small_auditor_gram())
    runs = repeated(eig.values)
    assert sorted(j - i for i, j in runs) == [2, 2, 11, 22]
    rng = np.random.default_rng(5)
    other = eig.vectors.copy()
    for i, j in runs:
        other[i:j] = ortho_group.rvs(j - i, random_state=rng) @ other[i:j]
    other *= rng.choice([-1.0, 1.0], size=(other.shape[0], 1))
    again = canonical_eigenbasis(eig.values, other)
    np.testing.assert_allclose(again, eig.vectors, atol=1e-12)
    np.testing.assert_allclose(again @ again.T, np.eye(eig.rank), atol=1e-12)
    assert eigen_design(eig).unit_error() == pytest.approx(
        eigen_design(type(eig)(eig.values, again, eig.n, eig.trace)).unit_error(), rel=1e-9)
    # without the canonical basis the rotated eigen-queries plan a different error
    rotated = eigen_design(type(eig)(eig.values, other, eig.n, eig.trace)).unit_error()
    assert abs(rotated / eigen_design(eig).unit_error() - 1.0) > 1e-4


def test_distinct_eigenvalues_keep_their_eigenvectors() -> None:
    """Only repeated eigenvalues are rotated: all ranges and prefixes, whose small distinct
    eigenvalues differ by less than 1e-8 of the largest one, keep eigh's eigenvectors (up to
    sign)."""
    for G in (AllRangeBlock(512).gram_array(), PrefixBlock(512).gram_array()):
        eig = eigen_queries(G)
        assert repeated(eig.values) == []
        _, V = np.linalg.eigh(G)
        raw = V[:, ::-1].T
        np.testing.assert_allclose(np.abs((eig.vectors * raw).sum(axis=1)), 1.0, atol=1e-9)


def test_one_eigenspace_of_unit_vectors_gives_the_identity() -> None:
    """The identity workload's single eigenspace comes back as the unit vectors, in order."""
    np.testing.assert_array_equal(eigen_queries(2.0 * np.eye(300)).vectors, np.eye(300))


@pytest.mark.slow
def test_cli_and_explorer_plan_the_auditor_scenario_alike() -> None:
    """The CLI's path (``compare`` in process, threaded BLAS) and the explorer's (a planner
    process with one BLAS thread) plan the same strategy and RMSE."""
    s = Scenario.from_spec(AUDITOR)
    with threadpool_limits(limits=2, user_api="blas"):
        cli = compare(s.workload, s.privacy, ["eigen-design"]).rows[0]
    pool = PlannerPool(1)
    try:
        served = pool.plan("eigen-design", s.workload, s.privacy)
    finally:
        pool.close()
    assert cli.rmse is not None and served.rmse is not None
    assert served.rmse == pytest.approx(cli.rmse, rel=1e-6)
    assert cli.rmse == pytest.approx(AUDITOR_RMSE, abs=5e-5)
    np.testing.assert_allclose(served.plan.strategy.queries, cli.plan.strategy.queries,
                               atol=1e-8)
