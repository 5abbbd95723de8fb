"""Consistent whole counts fitted in the space of 1- and 2-way marginal tables
(``fit_space="marginals"``): exact agreement, the public total, whole non-negative counts, the
truth back when there is no noise, and more accurate than the raw answers on sparse data."""

from __future__ import annotations

import numpy as np
import pytest

from engine.domain import Domain
from engine.errors import SpecError
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workflows.marginal_fit import fit_marginals, fits_marginals
from engine.workflows.table_rounding import (
    controlled_round,
    controlled_round_many,
    greedy_bumps,
    nearest_transport,
    proportional_fit,
)
from engine.workflows.tables import AUTO_MIN_CELLS, publishable_tables
from engine.workloads.spec import parse_workload
from engine.workloads.workload import Workload

DOMAIN = Domain.from_spec({
    "age": {"bin_edges": [0, 10, 20, 30, 40, 50, 60], "kind": "numeric"},
    "sex": {"labels": ["female", "male"]},
    "race": {"labels": ["a", "b", "c", "d"]},
    "smoker": {"labels": ["no", "yes"]},
})
WORKLOAD = Workload.marginals(DOMAIN, upto=2)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


def _sparse(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(3.0, size=DOMAIN.size).astype(float)
    x[rng.random(DOMAIN.size) < 0.6] = 0.0
    return x


def _release(x: np.ndarray, seed: int, mechanism: str = "identity",
             fit_space: str = "marginals"):
    plan = get(mechanism).plan(WORKLOAD, GAUSSIAN)
    measurement = plan.measure(x, np.random.default_rng(seed))
    raw = plan.reconstruct(measurement)
    tables = publishable_tables(
        WORKLOAD, strategy=plan.strategy, measurements=measurement.y,
        noise_variances=np.asarray(measurement.noise_std) ** 2, total=int(x.sum()),
        per_query_variance=plan.variances(), raw=raw, raw_column=True, fit_space=fit_space)
    return raw, tables


def test_which_workloads_fit_in_the_marginals_space() -> None:
    assert fits_marginals(WORKLOAD)
    assert not fits_marginals(Workload.marginals(DOMAIN, k=3))
    assert not fits_marginals(parse_workload([{"product": {"age": "prefix"}}], DOMAIN))


ROUTES = {
    "marginals": ("consistent: non-negative 1- and 2-way tables (",
                  "by variance-weighted least squares"),
    "three-way": ("consistent: 1- and 2-way tables fitted as the margins of non-negative 3-way "
                  "tables", "and to the 3-way interactions of the least-squares estimate's "
                  "own 3-way tables"),
}


@pytest.mark.parametrize("fit_space", list(ROUTES))
@pytest.mark.parametrize("mechanism", ["identity", "hdmm-kron"])
def test_tables_agree_keep_the_total_and_beat_the_raw_answers(mechanism, fit_space) -> None:
    x = _sparse(1)
    raw, tables = _release(x, seed=2, mechanism=mechanism, fit_space=fit_space)
    start, route = ROUTES[fit_space]
    assert tables.method.startswith(start) and route in tables.method
    for frame in tables.frames.values():
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        assert int(frame["estimate"].sum()) == int(x.sum())
    for a in DOMAIN.names:
        one_way = tables.frames[a]["estimate"].tolist()
        for name, frame in tables.frames.items():
            if a in name.split(" x ") and name != a:
                assert frame.groupby(a, sort=False)["estimate"].sum().tolist() == one_way
    truth = WORKLOAD.answer(x)
    counts = np.concatenate([f["estimate"].to_numpy() for f in tables.frames.values()])
    ratio = np.abs(counts - truth).mean() / np.abs(raw - truth).mean()
    # 60 % of the cells are empty: non-negativity and agreement pool the tables' noise
    assert 0.2 <= ratio <= 0.9, ratio


def test_without_noise_the_truth_comes_back_exactly() -> None:
    x = _sparse(3)
    answers = WORKLOAD.answer(x)
    fitted = fit_marginals(WORKLOAD, answers, np.ones(answers.size), total=int(x.sum()))
    start = 0
    for term in WORKLOAD.terms:
        stop = start + term.num_queries
        np.testing.assert_array_equal(fitted.tables[term.attrs].reshape(-1) if term.attrs
                                      else [fitted.total], answers[start:stop])
        start = stop
    assert fitted.unknowns == 6 * 2 + 6 * 4 + 6 * 2 + 2 * 4 + 2 * 2 + 4 * 2 + 6 + 2 + 4 + 2 + 1


def test_an_unknown_fit_space_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError, match=r"^fit_space: unknown 'data'; allowed: auto, cells, "
                                        r"marginals, three-way$"):
        publishable_tables(WORKLOAD, strategy=None, measurements=np.zeros(WORKLOAD.num_queries),
                           noise_variances=1.0, total=None,
                           per_query_variance=np.ones(WORKLOAD.num_queries), fit_space="data")


def test_every_pair_of_a_domain_of_7e11_cells_without_mbi(monkeypatch) -> None:
    # too large for a data vector: the tables themselves are the unknowns, no model needed
    monkeypatch.setattr("engine.workflows.model_tables.model_available", lambda: False)
    big = Domain.from_sizes([30] * 8)  # 6.6e11 cells; 28 pairs of 900 cells
    workload = Workload.marginals(big, k=2)
    rng = np.random.default_rng(9)
    answers = np.concatenate([rng.multinomial(5_000, np.full(900, 1 / 900))
                              for _ in workload.terms]).astype(float)
    noisy = answers + rng.normal(0.0, 2.0, answers.size)
    tables = publishable_tables(workload, strategy=None, measurements=noisy,
                                noise_variances=4.0, total=5_000,
                                per_query_variance=np.full(answers.size, 4.0), raw=noisy)
    assert tables.method.startswith("consistent: non-negative 1- and 2-way tables (25,441 "
                                    "unknowns")
    one_way = {}
    for name, frame in tables.frames.items():
        assert int(frame["estimate"].sum()) == 5_000 and (frame["estimate"] >= 0).all()
        for a in name.split(" x "):
            sums = frame.groupby(a, sort=False)["estimate"].sum().tolist()
            assert one_way.setdefault(a, sums) == sums


def test_a_table_whose_zeros_cannot_carry_the_rounded_totals_is_rounded_nearest() -> None:
    # the row total was rounded down (5.4 -> 5) and the column's up (5.4 -> 6): the one
    # occupied cell cannot hold both, so a unit moves to the nearest cell that can take it
    table = np.array([[5.4, 0.0], [0.0, 0.6]])
    expected = [[5, 0], [1, 0]]
    assert controlled_round(table, np.array([5, 1]), np.array([6, 0])).tolist() == expected
    assert nearest_transport(table, np.array([5, 1]), np.array([6, 0])).tolist() == expected
    near = np.array([[0.7, 0.3], [0.3, 0.7]])
    assert nearest_transport(near, np.array([1, 1]), np.array([1, 1])).tolist() == [[1, 0],
                                                                                     [0, 1]]


def test_greedy_bumps_keep_both_needs_within_the_capacity_or_give_up() -> None:
    rng = np.random.default_rng(5)
    fraction = rng.random((6, 4))
    capacity = np.ones((6, 4), bool)
    capacity[[0, 2, 4], [1, 3, 0]] = False
    rows, columns = np.array([2, 1, 1, 0, 2, 1]), np.array([2, 2, 2, 1])
    bumps = greedy_bumps(rows, columns, capacity, fraction)
    assert bumps is not None
    assert bumps.sum(axis=1).tolist() == rows.tolist()
    assert bumps.sum(axis=0).tolist() == columns.tolist()
    assert not (bumps.astype(bool) & ~capacity).any()
    # ties in need go to the larger fraction
    assert greedy_bumps(np.array([1, 1]), np.array([1, 1]), np.ones((2, 2), bool),
                        np.array([[0.3, 0.9], [0.8, 0.2]])).tolist() == [[0, 1], [1, 0]]
    # the one cell that could carry the row's unit is closed: no bumps
    assert greedy_bumps(np.array([1, 0]), np.array([0, 1]), np.array([[True, False],
                                                                      [True, True]]),
                        np.full((2, 2), 0.5)) is None


def test_tables_rounded_together_keep_their_totals_each_cell_within_one() -> None:
    rng = np.random.default_rng(11)
    tables, rows, columns = [], [], []
    for shape in [(4, 3), (2, 7), (5, 5), (1, 4), (6, 2)]:
        table = rng.gamma(0.6, 4.0, size=shape)
        table[rng.random(shape) < 0.3] = 0.0
        total = int(round(table.sum()))
        rows.append(round_to(table.sum(axis=1), total))
        columns.append(round_to(table.sum(axis=0), total))
        tables.append(table)
    together = controlled_round_many(tables, rows, columns)
    for table, r, c, counts in zip(tables, rows, columns, together, strict=True):
        assert counts.shape == table.shape and counts.dtype == np.int64 and (counts >= 0).all()
        assert counts.sum(axis=1).tolist() == r.tolist()
        assert counts.sum(axis=0).tolist() == c.tolist()
        # every cell rounded up or down from the table scaled to those totals
        assert np.abs(counts - proportional_fit(table, r, c)).max() < 1.0
        assert np.abs(counts - controlled_round(table, r, c)).max() <= 1
    with pytest.raises(ValueError, match="row totals sum to 3, column totals to 4"):
        controlled_round_many([np.ones((2, 2))], [np.array([1, 2])], [np.array([2, 2])])


def round_to(values: np.ndarray, total: int) -> np.ndarray:
    """Whole values summing to ``total`` (largest remainders)."""
    floors = np.floor(values * total / values.sum()).astype(np.int64)
    order = np.argsort(floors - values * total / values.sum())
    floors[order[:total - int(floors.sum())]] += 1
    return floors


def test_three_way_on_two_attributes_fits_the_two_way_tables() -> None:
    """Fewer than three attributes: no 3-way tables to fit (none are formed), so the 2-way fit
    runs and the method says so."""
    workload = Workload.marginals(Domain.from_sizes([3, 4]), upto=2)
    plan = get("hdmm-kron").plan(workload, GAUSSIAN)
    x = np.arange(12.0)
    measurement = plan.measure(x, np.random.default_rng(1))
    tables = publishable_tables(
        workload, strategy=plan.strategy, measurements=measurement.y,
        noise_variances=np.asarray(measurement.noise_std) ** 2, total=66,
        per_query_variance=plan.variances(), raw=plan.reconstruct(measurement),
        fit_space="three-way")
    assert tables.method.startswith("consistent: non-negative 1- and 2-way tables (")
    for frame in tables.frames.values():
        assert int(frame["estimate"].sum()) == 66 and (frame["estimate"] >= 0).all()
    assert len(tables.frames) == 4  # the total, two 1-way tables, one 2-way table


LARGE = Domain.from_sizes([8] * 6)  # 262,144 cells: over AUTO_MIN_CELLS


@pytest.mark.parametrize(("domain", "mechanism", "route"), [
    (LARGE, "hdmm-kron", "consistent: 1- and 2-way tables fitted as the margins of "
                         "non-negative 3-way tables"),
    (LARGE, "identity", "consistent: 1- and 2-way tables fitted as the margins of "
                        "non-negative 3-way tables"),
    (DOMAIN, "hdmm-kron", "consistent: one non-negative estimate of the data"),
])
def test_the_default_fits_three_way_on_a_large_kronecker_plan_else_cells(
        domain, mechanism, route) -> None:
    assert (domain.size > AUTO_MIN_CELLS) == (domain is LARGE)
    workload = Workload.marginals(domain, upto=2)
    rng = np.random.default_rng(3)
    x = np.bincount(rng.zipf(1.4, size=20_000) % domain.size, minlength=domain.size)
    plan = get(mechanism).plan(workload, GAUSSIAN)
    measurement = plan.measure(x.astype(float), np.random.default_rng(4))
    tables = publishable_tables(
        workload, strategy=plan.strategy, measurements=measurement.y,
        noise_variances=np.asarray(measurement.noise_std) ** 2, total=int(x.sum()),
        per_query_variance=plan.variances(), raw=plan.reconstruct(measurement))
    assert tables.method.startswith(route)
    frames = tables.frames
    for frame in frames.values():
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        assert int(frame["estimate"].sum()) == 20_000
    names = domain.names
    for a, b in [(names[0], names[1]), (names[2], names[-1])]:
        pair = frames[f"{a} x {b}"]
        for attr in (a, b):
            sums = pair.groupby(attr, sort=False)["estimate"].sum()
            assert sums.reindex(frames[attr][attr]).tolist() == frames[attr]["estimate"].tolist()
