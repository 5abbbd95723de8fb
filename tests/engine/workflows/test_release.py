"""The release pipeline: the charge comes before any noise, a refusal or a failure leaves no
file and no count, the teaching sandbox is never charged, every record and table says what it
is, and files appear whole or not at all."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import engine.workflows.release as pipeline
from engine.data import Dataset
from engine.domain import Domain
from engine.errors import Cancelled, SpecError
from engine.ledger import Budget, BudgetExceeded, Ledger
from engine.ledger.charge import release_cost
from engine.mechanisms import get
from engine.noise import SEEDED_LABEL
from engine.privacy import Privacy, cdp_eps
from engine.progress import Progress
from engine.workflows.release import quote, release
from engine.workflows.release_files import TEACHING_LABEL
from engine.workflows.tables import PublishedTables
from engine.workloads import Workload

FINGERPRINT = "ef" * 32
DOMAIN = Domain.from_sizes([3, 4, 2])
WORKLOAD = Workload.marginals(DOMAIN, k=2)
ZCDP = Privacy(noise="zcdp", rho=0.5)


@pytest.fixture
def data() -> Dataset:
    return Dataset.synthetic(DOMAIN, 400, rng=0, correlation=0.5)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with Ledger(url) as ledger:
        ledger.register("people", FINGERPRINT, Budget("rho", 1.2), user="alice")
    return url


@pytest.fixture
def draws(monkeypatch) -> list:
    """Every noise generator the pipeline asks for (one per release)."""
    seen: list = []
    real = pipeline.release_rng

    def spy(seed=None):
        seen.append(seed)
        return real(seed)

    monkeypatch.setattr(pipeline, "release_rng", spy)
    return seen


def csv_files(out: Path) -> list[str]:
    """The CSV tables of a release directory, sorted (Parquet copies appear beside them when
    pyarrow is installed)."""
    return sorted(name for name in os.listdir(out) if name.endswith(".csv"))


def history(url: str) -> list:
    with Ledger(url) as ledger:
        return ledger.history("people", all_statuses=True)


def test_charged_release_record_and_tables_say_everything(data, url, tmp_path) -> None:
    out = tmp_path / "r1"
    before = dt.datetime.now(dt.UTC)
    r = release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=out, ledger=url, user="alice")
    assert r.charged is not None and r.charged.rho == pytest.approx(0.5, rel=1e-12)
    assert r.notes == ("charged rho=0.5 to people: spent 0.5 of rho=1.2",)
    assert r.status.spent.spent == pytest.approx(0.5, rel=1e-12) and r.status.releases == 1
    assert r.out_dir == out and csv_files(out) == ["a1_x_a2.csv", "a1_x_a3.csv", "a2_x_a3.csv"]
    assert (out / "release.json").is_file()
    record = json.loads((out / "release.json").read_text())
    assert record == json.loads(json.dumps(r.record))
    assert before - dt.timedelta(seconds=1) <= dt.datetime.fromisoformat(record["time"]) \
        <= dt.datetime.now(dt.UTC)
    assert record["time"].endswith("+00:00") and record["package_version"]
    assert record["mechanism"] == "identity" and isinstance(record["knobs"], dict)
    assert record["privacy"] == {"noise": "zcdp", "rho": 0.5}
    assert record["privacy_unit"] == "one record (add/remove) of the data"
    assert record["noise"]["sampler"] == "discrete_gaussian"
    assert record["noise"]["scale"] == pytest.approx(1.0, rel=1e-8)  # sigma = 1/sqrt(2 rho)
    assert record["post_processing"].startswith("consistent: one non-negative estimate of "
                                                 "the data")
    assert record["post_processing"] == r.tables.method
    assert record["data_sha256"] == FINGERPRINT and record["notice"] is None
    budget = record["budget"]
    assert budget["spent"] == pytest.approx(0.5) and budget["remaining"] == pytest.approx(0.7)
    assert budget["remaining_epsilon"] == pytest.approx(cdp_eps(0.7, 1e-6), rel=1e-12)
    tables = {name: pd.read_csv(out / f"{name.replace(' x ', '_x_')}.csv", comment="#")
              for name in ("a1 x a2", "a1 x a3", "a2 x a3")}
    assert list(r.tables.frames) == list(tables)
    raw = []
    for name, table in tables.items():
        first, second = name.split(" x ")
        sizes = (DOMAIN.shape[int(first[1]) - 1], DOMAIN.shape[int(second[1]) - 1])
        assert list(table.columns) == [first, second, "estimate", "margin_95", "raw"]
        assert len(table) == sizes[0] * sizes[1]
        assert table[first].tolist() == np.repeat(np.arange(sizes[0]), sizes[1]).tolist()
        assert table[second].tolist() == np.tile(np.arange(sizes[1]), sizes[0]).tolist()
        assert table["estimate"].dtype == np.int64 and (table["estimate"] >= 0).all()
        # identity at rho 0.5: sigma 1 per cell, and a cell of a 2-way table sums the cells
        # of the attribute left out: margin 1.96 sqrt(its size)
        summed = DOMAIN.size // (sizes[0] * sizes[1])
        assert (table["margin_95"] == round(1.959963984540054 * np.sqrt(summed), 2)).all()
        raw.append(table["raw"].to_numpy())
    assert np.array_equal(np.concatenate(raw), r.result)  # the unbiased estimates, unchanged
    totals = {int(t["estimate"].sum()) for t in tables.values()}
    assert len(totals) == 1 and abs(totals.pop() - 400) <= 3 * 1.96 * np.sqrt(24)
    # consistent: a1's counts are the same summed from a1 x a2 and from a1 x a3
    assert tables["a1 x a2"].groupby("a1")["estimate"].sum().tolist() == \
        tables["a1 x a3"].groupby("a1")["estimate"].sum().tolist()
    (row,) = history(url)
    assert (row.status, row.user, row.record_path) == ("released", "alice", str(out))


def test_a_refusal_draws_no_noise_and_writes_nothing(data, url, tmp_path, draws) -> None:
    release("identity", data=data, workload=WORKLOAD, privacy=Privacy(noise="zcdp", rho=1.0),
            fingerprint=FINGERPRINT, out=tmp_path / "first", ledger=url)
    assert len(draws) == 1
    out = tmp_path / "refused"
    with pytest.raises(BudgetExceeded) as refused:
        release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=out, ledger=url)
    assert len(draws) == 1  # no generator was made for the refused release
    assert str(refused.value).endswith(
        f"nothing was released; remaining: rho = 0.2 = eps {cdp_eps(0.2, 1e-6):.6g} at "
        "delta = 1e-06")
    assert list(out.iterdir()) == [] and len(history(url)) == 1


def test_a_cancelled_release_is_failed_and_leaves_no_file(data, url, tmp_path) -> None:
    progress = Progress()
    progress.cancel()
    out = tmp_path / "cancelled"
    with pytest.raises(Cancelled):
        release("aim-grem", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=out, ledger=url, progress=progress)
    (row,) = history(url)
    assert row.status == "failed" and list(out.iterdir()) == []
    with Ledger(url) as ledger:
        assert ledger.status("people").spent.spent == 0.0


def test_a_crash_while_writing_keeps_the_old_release_whole(data, url, tmp_path,
                                                           monkeypatch) -> None:
    out = tmp_path / "same"
    release("identity", data=data, workload=WORKLOAD, privacy=ZCDP, fingerprint=FINGERPRINT,
            out=out, ledger=url)
    old = {name: (out / name).read_text() for name in os.listdir(out)}

    def half_then_crash(self, directory) -> None:
        (Path(directory) / "a1_x_a2.csv").write_text("a1,a2,estimate\n0,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PublishedTables, "write", half_then_crash)
    with pytest.raises(SpecError, match="^--out: cannot write the release into .*No space"):
        release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=out, ledger=url)
    assert {name: (out / name).read_text() for name in os.listdir(out)} == old  # no staging
    assert [r.status for r in history(url)] == ["released", "failed"]


@pytest.mark.parametrize(("flags", "notice"), [
    ({"bundled": True}, TEACHING_LABEL),
    ({"teaching": True}, TEACHING_LABEL),
    ({"seed": 7}, SEEDED_LABEL),
])
def test_the_teaching_sandbox_is_never_charged(data, url, tmp_path, flags, notice) -> None:
    out = tmp_path / "sandbox"
    r = release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=out, ledger=url, **flags)
    assert r.charged is None and r.status is None and history(url) == []
    assert r.record["notice"] == notice and r.record["budget"]["charged"] is False
    assert csv_files(out) == ["a1_x_a2.csv", "a1_x_a3.csv", "a2_x_a3.csv"]
    for name in csv_files(out):
        assert (out / name).read_text().splitlines()[0] == f"# release: {notice}"


def test_seeded_releases_repeat(data) -> None:
    a, b = (release("hdmm", data=data, workload=WORKLOAD, privacy=ZCDP, seed=3)
            for _ in range(2))
    assert np.array_equal(a.result, b.result) and a.out_dir is None
    assert a.notes == ("seeded run: not a private release; the budget ledger is not charged",)


def test_unregistered_and_unwritten_releases_are_not_charged(data, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'none.sqlite'}"
    r = release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, out=tmp_path / "u", ledger=url)
    assert r.charged is None and r.notes[0].startswith(
        "data set not registered in the budget ledger: this release (rho=0.5) is not budgeted")
    assert not (tmp_path / "none.sqlite").exists()
    r = release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, ledger=url)
    assert r.notes == ("evaluation only: nothing is written, so nothing is released; the "
                       "budget ledger is not charged",)


def test_a_computed_plan_is_released_at_its_own_or_a_new_level(data, url) -> None:
    plan = get("hdmm").plan(WORKLOAD, ZCDP)
    r = release(plan, data=data, fingerprint=FINGERPRINT, store=True, ledger=url)
    assert r.charged.rho == pytest.approx(0.5, rel=1e-12)
    assert r.record["expected_rmse"] == pytest.approx(
        plan.rmse() * np.sqrt(r.record["noise"]["variance_factor"]), rel=1e-12)
    assert r.out_dir is not None and r.out_dir.parts[-2:] == ("people", "000001")
    rescaled = release(plan, data=data, privacy=Privacy(noise="zcdp", rho=0.125),
                       fingerprint=FINGERPRINT, store=True, ledger=url)
    assert rescaled.charged.rho == pytest.approx(0.125, rel=1e-12)
    assert rescaled.status.spent.spent == pytest.approx(0.625, rel=1e-12)


def test_only_the_ledger_and_the_pipeline_charge() -> None:
    root = Path(__file__).resolve().parents[3]
    charging = sorted(str(path.relative_to(root)) for folder in ("engine", "explorer")
                      for path in (root / folder).rglob("*.py")
                      if ".reserve(" in path.read_text(encoding="utf-8"))
    assert charging == ["engine/ledger/store.py", "engine/workflows/release.py"]


def test_a_quote_says_what_the_release_costs_and_leaves(data, url, tmp_path) -> None:
    cost = release_cost(ZCDP)
    before = quote(cost, fingerprint=FINGERPRINT, ledger=url)
    assert (before.dataset, before.note, before.refusal) == ("people", None, None)
    assert before.after.remaining_rho == pytest.approx(0.7, rel=1e-12)
    assert before.line() == (f"This release costs rho=0.5, charged to people (rho=1.2 in all); "
                             f"remaining after it: 0.7 (rho 0.7 = eps {cdp_eps(0.7, 1e-6):.6g} "
                             "at delta 1e-06).")
    for _ in range(2):
        release("identity", data=data, workload=WORKLOAD, privacy=ZCDP,
                fingerprint=FINGERPRINT, store=True, ledger=url)
    refused = quote(cost, fingerprint=FINGERPRINT, ledger=url, at_delta=1e-9)
    assert refused.line() == refused.refusal and refused.refusal.endswith(
        f"remaining: rho = 0.2 = eps {cdp_eps(0.2, 1e-9):.6g} at delta = 1e-09")
    assert len(history(url)) == 2  # a quote writes nothing
    assert quote(cost, fingerprint=FINGERPRINT, ledger=url, bundled=True).line() == (
        "Not charged (rho=0.5): teaching: not a private release: the teaching sandbox (bundled "
        "demo data) is never charged to the budget ledger.")
    missing = f"sqlite:///{tmp_path / 'missing.sqlite'}"
    assert quote(cost, fingerprint=FINGERPRINT, ledger=missing).note.startswith(
        "data set not registered in the budget ledger")
    assert not (tmp_path / "missing.sqlite").exists()
