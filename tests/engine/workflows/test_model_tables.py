"""Consistent whole counts from a graphical model (the ``mbi`` route of the published tables,
for domains too large to hold one count per cell, with a table of 3 or more attributes):
tables agree exactly on every attribute they share, share one total (the public one when
given), are whole and non-negative, and stay within the raw estimate's margins; junction
trees too large are refused with a reason. Runs only where the optional ``mbi`` package is
installed (the ``pgm`` extra); the message without it is tested in test_tables.py and
test_family_tables.py."""

from __future__ import annotations

import numpy as np
import pytest

from engine.data import Dataset
from engine.domain import Domain
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workflows.adaptive_tables import adaptive_tables
from engine.workflows.table_rounding import controlled_round, round_within_groups
from engine.workflows.tables import MARGIN_Z, publishable_tables
from engine.workloads.workload import Workload

pytest.importorskip("mbi")

DOMAIN = Domain.from_spec({"sex": {"labels": ["female", "male"]},
                           "age": {"kind": "numeric", "bin_edges": [0, 30, 40, 50, 65, 100]},
                           "smoker": {"labels": ["no", "yes"]}, "region": 3})
#: a chain of tables: its junction tree holds 26 cells, the domain 60
CHAIN = [["sex", "age", "smoker"], ["smoker", "region"], ["region"]]
SHARED = {"smoker": ("sex x age x smoker", "smoker x region"),
          "region": ("smoker x region", "region")}
SD = 2.0


def _truth(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).poisson(20, DOMAIN.size).astype(float)


def _tables(workload: Workload, truth: np.ndarray, seed: int, total: int | None):
    answers = workload.answer(truth)
    noisy = answers + np.random.default_rng(seed).normal(0.0, SD, answers.size)
    return publishable_tables(workload, strategy=None, measurements=noisy,
                              noise_variances=SD**2, total=total,
                              per_query_variance=np.full(answers.size, SD**2), raw=noisy,
                              raw_column=True)


def _agree(tables) -> None:
    for attr, (left, right) in SHARED.items():
        assert (tables.frames[left].groupby(attr, sort=False)["estimate"].sum().tolist()
                == tables.frames[right].groupby(attr, sort=False)["estimate"].sum().tolist())


def test_round_within_groups_keeps_every_target_within_one_of_the_scaled_values() -> None:
    values = np.array([[0.4, 1.6, 1.0], [2.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
    targets = np.array([4, 3, 5])
    counts = round_within_groups(values, targets)
    np.testing.assert_array_equal(counts.sum(axis=1), targets)
    scaled = np.array([[0.5333, 2.1333, 1.3333], [2.5, 0.5, 0.0], [5 / 3] * 3])
    assert np.all(np.abs(counts - scaled) < 1.0)
    assert counts.tolist() == [[1, 2, 1], [3, 0, 0], [2, 2, 1]]  # ties: the first cell


def test_a_chain_of_marginals_gets_whole_counts_that_agree_from_one_model(monkeypatch) -> None:
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 30)
    workload = Workload.marginals(DOMAIN, sets=CHAIN)
    truth = _truth(0)
    tables = _tables(workload, truth, seed=1, total=None)
    assert list(tables.frames["sex x age x smoker"].columns) == [
        "sex", "age", "smoker", "estimate", "margin_95", "raw"]
    totals = set()
    for frame in tables.frames.values():
        assert frame["estimate"].dtype == np.int64 and (frame["estimate"] >= 0).all()
        totals.add(int(frame["estimate"].sum()))
    # the fitted total: three measurements of the total, the best with sd SD * sqrt(3)
    assert len(totals) == 1 and abs(totals.pop() - truth.sum()) <= 4 * SD * np.sqrt(3)
    _agree(tables)
    assert tables.method.startswith("consistent: a graphical model (Private-PGM, the mbi "
                                    "package: 1000 mirror-descent iterations) fitted to the "
                                    "released workload answers")
    assert "the model holds 26 cells, not the domain's" in tables.method
    assert tables.method.endswith("it holds for the unbiased raw estimate (the released "
                                  "answers), not for the rounded counts.")


def test_a_public_total_is_kept_and_counts_stay_within_the_raw_margins(monkeypatch) -> None:
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 30)
    workload = Workload.marginals(DOMAIN, sets=CHAIN)
    truth = _truth(2)
    inside = cells = 0
    for seed in range(4):
        tables = _tables(workload, truth, seed=seed, total=int(truth.sum()))
        _agree(tables)
        true, start = workload.answer(truth), 0
        for term, frame in zip(workload.terms, tables.frames.values(), strict=True):
            assert int(frame["estimate"].sum()) == int(truth.sum())
            expected = true[start:start + term.num_queries]
            start += term.num_queries
            inside += int(np.sum(np.abs(frame["estimate"] - expected)
                                 <= frame["margin_95"] + 1))
            cells += len(frame)
        assert (tables.frames["region"]["margin_95"] == round(MARGIN_Z["gaussian"] * SD, 2)
                ).all()
    # the model pools the tables: its whole counts (within 1 of its marginals) fall inside
    # the raw estimate's 95 % margin (+1 for the rounding) at least as often as the raw does
    assert 0.93 <= inside / cells <= 1.0, inside / cells


def test_a_chain_of_a_domain_of_2e8_cells_comes_from_a_model_of_17500() -> None:
    big = Domain.from_sizes([25] * 6)
    workload = Workload.marginals(big, sets=[["a1", "a2"], ["a2", "a3", "a4"], ["a4", "a5"],
                                             ["a5", "a6"]])
    rng = np.random.default_rng(5)
    records = rng.integers(0, 25, size=(20_000, 6))
    truth = np.concatenate([np.bincount(np.ravel_multi_index(records[:, list(t.attrs)].T,
                                                             [25] * len(t.attrs)),
                                        minlength=25 ** len(t.attrs)) for t in workload.terms
                            ]).astype(float)
    noisy = truth + rng.normal(0.0, SD, truth.size)
    tables = publishable_tables(workload, strategy=None, measurements=noisy,
                                noise_variances=SD**2, total=20_000,
                                per_query_variance=np.full(truth.size, SD**2), raw=noisy)
    assert "the model holds 17,500 cells, not the domain's" in tables.method
    counts = np.concatenate([f["estimate"].to_numpy() for f in tables.frames.values()])
    assert {int(f["estimate"].sum()) for f in tables.frames.values()} == {20_000}
    assert (counts >= 0).all()
    # pooled and non-negative: closer to the truth than the raw answers (sd 2 per cell)
    ratio = np.abs(counts - truth).mean() / np.abs(noisy - truth).mean()
    assert 0.2 <= ratio <= 1.0, ratio


def test_aim_grem_tables_on_a_domain_too_large_come_from_a_model(monkeypatch) -> None:
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 30)
    data = Dataset.synthetic(DOMAIN, 400, rng=6, correlation=0.5)
    workload = Workload.marginals(DOMAIN, sets=CHAIN)
    result = get("aim-grem", max_rounds=4).run(workload, Privacy(noise="zcdp", rho=0.5), data,
                                               np.random.default_rng(7))
    tables = adaptive_tables(workload, result)
    _agree(tables)
    totals = {int(f["estimate"].sum()) for f in tables.frames.values()}
    assert len(totals) == 1 and abs(totals.pop() - 400) <= 60
    assert "fitted to the released GReM-MLE marginals" in tables.method


def test_a_junction_tree_too_large_for_3_way_tables_publishes_raw_and_says_why(monkeypatch
                                                                             ) -> None:
    monkeypatch.setattr("engine.workflows.tables.max_cells", lambda: 30)
    workload = Workload.marginals(DOMAIN, sets=[["sex", "age", "smoker"],
                                                ["age", "smoker", "region"],
                                                ["sex", "region"]])
    tables = _tables(workload, _truth(3), seed=3, total=None)
    assert tables.method.startswith("raw: ")
    assert tables.method.endswith(
        "The domain has 60 cells, more than the 30 whose one count per cell fits in memory: "
        "raw only; a graphical model of these tables would hold 60 cells, more than the 30 "
        "that fit in memory.")


def test_controlled_rounding_keeps_both_totals_and_every_cell_within_one() -> None:
    rng = np.random.default_rng(8)
    for _ in range(50):
        table = rng.gamma(0.5, 5.0, rng.integers(1, 12, 2))
        table[rng.random(table.shape) < 0.3] = 0.0
        n = int(round(table.sum()))
        rows = round_within_groups(table.sum(axis=1)[None, :], np.array([n]))[0]
        columns = round_within_groups(table.sum(axis=0)[None, :], np.array([n]))[0]
        counts = controlled_round(table, rows, columns)
        np.testing.assert_array_equal(counts.sum(axis=1), rows)
        np.testing.assert_array_equal(counts.sum(axis=0), columns)
        assert (counts >= 0).all() and np.abs(counts - table).max() < 2.0
