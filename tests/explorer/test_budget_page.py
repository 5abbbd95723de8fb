"""The Budget page and the Adaptive page's release path through the ledger, without a browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.ledger import Ledger
from engine.privacy import cdp_rho
from explorer.pages.adaptive import AdaptivePage
from explorer.pages.budget import BudgetPage

SMALL = ["sex", "race"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


def test_register_release_twice_then_refused(url: str) -> None:
    rho = cdp_rho(1.0, 1e-9)
    budget = BudgetPage(ledger_url=url, name="adult", total=2.5 * rho)
    budget.register()
    assert budget.error == "" and budget.status.startswith("Registered adult with rho=")
    assert [r["data set"] for r in budget.datasets] == ["adult"]
    page = AdaptivePage(ledger_url=url, attributes=SMALL, max_rounds=3, compare_rp=False)
    for n in (1, 2):
        page.run()
        assert page.error == "", page.error
        assert "Released: charged" in page.status
        assert page.budget_share == pytest.approx(100 * n / 2.5, abs=0.01)
    page.run()
    assert page.status == "Refused: nothing was released." and page.results == []
    assert page.error.startswith(f"budget: refused: data set 'adult' has spent {2 * rho:.6g} "
                                 f"/ requested {rho:.6g}")
    assert page.budget_share == pytest.approx(80.0, abs=0.01)
    budget.refresh()
    (row,) = budget.datasets
    assert row["spent"] == pytest.approx(2 * rho, rel=1e-12) and row["releases"] == 2
    assert row["remaining rho"] == pytest.approx(0.5 * rho, rel=1e-9)
    assert [r["mechanism"] for r in budget.releases] == ["aim-grem", "aim-grem"]
    record = json.loads(budget.record_file("release.json").getvalue())
    assert record["mechanism"] == "aim-grem" and not record["seeded"]
    assert math_sum(c["rho"] for c in record["ledger"]) == pytest.approx(rho, rel=1e-12)
    answers = budget.record_file("answers.csv").getvalue().decode()
    assert answers.splitlines()[0] == "marginal,cell,answer"
    history = Ledger(url).history("adult")
    assert history[0].rounds == json.loads(Path(history[0].record_path, "release.json")
                                           .read_text())["ledger"]


def math_sum(values) -> float:
    import math

    return math.fsum(values)


def test_seeded_and_unregistered_runs_are_not_charged(url: str) -> None:
    page = AdaptivePage(ledger_url=url, attributes=SMALL, max_rounds=2, compare_rp=False)
    page.run()
    assert page.status.endswith("Not budgeted: this data set is not registered in the budget "
                                "ledger (register it on the Budget page).")
    BudgetPage(ledger_url=url, name="adult", total=1.0).register()
    page.seed = 3
    page.run()
    assert page.status.endswith("Seeded: not a release; the budget ledger is not charged.")
    assert Ledger(url).history("adult") == []


def test_bad_registrations_are_one_line(url: str, tmp_path: Path) -> None:
    page = BudgetPage(ledger_url=url, name="adult")
    page.register()
    page.register()
    assert page.error == "name: 'adult' is already registered"
    page = BudgetPage(ledger_url=url, name="mine", source="Uploaded CSV")
    page.register()
    assert page.error == "data: upload a CSV file"
    page = BudgetPage(ledger_url=url, name="other", unit="(eps, delta)", total=1.0,
                      csv_file=b"a\n1\n", source="Uploaded CSV")
    page.register()
    assert page.error == "" and page.datasets[-1]["unit"] == "epsilon-delta"
    broken = BudgetPage(ledger_url=f"sqlite:///{tmp_path}")  # a directory, not a database
    broken.refresh()
    assert broken.error == f"ledger: cannot open {str(tmp_path)!r}: unable to open database file"


def test_one_default_delta_everywhere_but_the_aim_page():
    import argparse

    from engine.cli.budget import add_budget_arguments
    from engine.privacy import DEFAULT_DELTA, Privacy
    from explorer.pages.adaptive import AIM_DELTA, AdaptivePage

    assert DEFAULT_DELTA == 1e-6 and Privacy().delta == DEFAULT_DELTA
    page = BudgetPage()
    assert page.total_delta == DEFAULT_DELTA and page.at_delta == DEFAULT_DELTA
    parser = add_budget_arguments(argparse.ArgumentParser())
    assert parser.parse_args(["show"]).delta == DEFAULT_DELTA
    assert AIM_DELTA == 1e-9 and AdaptivePage().delta == AIM_DELTA  # AIM's published setting
