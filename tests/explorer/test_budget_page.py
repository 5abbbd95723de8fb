"""The Budget page and the Adaptive page's release path through the pipeline and the ledger,
without a browser."""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from engine.ledger import Ledger
from engine.privacy import cdp_eps, cdp_rho
from explorer.pages.adaptive import ADULT, UPLOAD, AdaptivePage
from explorer.pages.budget import BudgetPage

SMALL = ["sex", "race"]
ROWS = ("a,b,c\n" + "".join(f"{i % 3},{(i // 3) % 2},{(i * 7) % 2}\n" for i in range(300))
        ).encode()
DOMAIN = json.dumps({"a": 3, "b": 2, "c": 2}).encode()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


def upload_page(url: str, **params) -> AdaptivePage:
    return AdaptivePage(ledger_url=url, dataset=UPLOAD, csv_file=ROWS, domain_file=DOMAIN,
                        domain_name="domain.json", attributes=[], max_rounds=3,
                        compare_rp=False, **params)


def test_register_release_twice_then_refused_with_what_remains(url: str) -> None:
    rho = cdp_rho(1.0, 1e-9)
    budget = BudgetPage(ledger_url=url, dataset_name="people survey", csv_file=ROWS,
                        total=2.5 * rho)
    budget.register()
    assert budget.error == ""
    assert budget.status.startswith("Registered people survey (owner anonymous) with rho=")
    assert [(r["data set"], r["owner"]) for r in budget.datasets] == [("people survey",
                                                                       "anonymous")]
    page = upload_page(url)
    page.update_quote()
    assert page.quote_line == (f"This release costs rho={rho:.6g}, charged to people survey "
                               f"(rho={2.5 * rho:.6g} in all); remaining after it: "
                               f"{1.5 * rho:.6g} (rho {1.5 * rho:.6g} = eps "
                               f"{cdp_eps(1.5 * rho, 1e-9):.6g} at delta 1e-09).")
    for n in (1, 2):
        page.run()
        assert page.error == "", page.error
        assert "Released: charged rho=" in page.status
        assert page.budget_share == pytest.approx(100 * n / 2.5, abs=0.01)
    assert page.released_name == "a x b" and len(page.released_rows) == 6
    assert list(page.released_rows[0]) == ["a", "b", "estimate", "margin_95", "raw"]
    assert page.released_method.startswith(
        "consistent: whole counts fitted to the released GReM-MLE marginals by raking")
    shipped = zipfile.ZipFile(io.BytesIO(page.released_zip()))
    assert sorted(shipped.namelist()) == ["a_x_b.csv", "a_x_c.csv", "b_x_c.csv",
                                          "release.json"]
    tables = {name: pd.read_csv(io.BytesIO(shipped.read(f"{name}.csv")), comment="#")
              for name in ("a_x_b", "a_x_c", "b_x_c")}
    assert [len(t) for t in tables.values()] == [3 * 2, 3 * 2, 2 * 2]
    assert len({int(t["estimate"].sum()) for t in tables.values()}) == 1
    assert (tables["a_x_b"].groupby("a")["estimate"].sum().tolist()
            == tables["a_x_c"].groupby("a")["estimate"].sum().tolist())
    page.run()
    assert page.status == "Refused: nothing was released." and page.results == []
    left = 0.5 * rho
    assert page.error == (f"budget: refused: data set 'people survey' has spent {2 * rho:.6g} "
                          f"/ requested {rho:.6g} (rho={rho:.6g}) / total {2.5 * rho:.6g} (rho); "
                          f"nothing was released; remaining: rho = {left:.6g} = eps "
                          f"{cdp_eps(left, 1e-9):.6g} at delta = 1e-09")
    assert 0.65 < cdp_eps(left, 1e-9) < 0.75  # eps grows like sqrt(rho): half of eps=1 is ~0.7
    assert page.budget_share == pytest.approx(80.0, abs=0.01)
    assert page.quote_line == page.error  # the next run would be refused the same way
    budget.refresh()
    (row,) = budget.datasets
    assert row["spent"] == pytest.approx(2 * rho, rel=1e-12) and row["releases"] == 2
    assert row["remaining rho"] == pytest.approx(left, rel=1e-9)
    assert [r["mechanism"] for r in budget.releases] == ["aim-grem", "aim-grem"]
    record = json.loads(budget.record_file("release.json").getvalue())
    assert record["mechanism"] == "aim-grem" and not record["seeded"]
    assert record["notice"] is None and len(record["data_sha256"]) == 64
    assert record["budget"]["spent"] == pytest.approx(2 * rho, rel=1e-12)
    assert record["budget"]["remaining_rho"] == pytest.approx(left, rel=1e-9)
    assert math.fsum(c["rho"] for c in record["ledger"]) == pytest.approx(rho, rel=1e-12)
    archive = zipfile.ZipFile(budget.tables_zip())
    assert sorted(archive.namelist()) == ["a_x_b.csv", "a_x_c.csv", "b_x_c.csv",
                                          "release.json"]
    table = archive.read("a_x_b.csv").decode()
    assert budget.record_file("a_x_b.csv").getvalue().decode() == table
    lines = table.splitlines()
    assert lines[0] == "# release: private release"
    assert [x for x in lines if not x.startswith("#")][0] == "a,b,estimate,margin_95,raw"
    with Ledger(url) as ledger:
        history = ledger.history("people survey")
    assert history[0].rounds == json.loads(Path(history[0].record_path, "release.json")
                                           .read_text())["ledger"]


def test_bundled_seeded_and_unregistered_runs_are_not_charged(url: str, tmp_path) -> None:
    page = AdaptivePage(ledger_url=url, dataset=ADULT, attributes=SMALL, max_rounds=2,
                        compare_rp=False)
    page.run()
    assert page.error == ""
    assert page.status.endswith("Not charged: teaching: not a private release: the teaching "
                                "sandbox (bundled demo data) is never charged to the budget "
                                "ledger.")
    teaching = zipfile.ZipFile(io.BytesIO(page.released_zip()))
    assert teaching.read("race_x_sex.csv").decode().startswith(
        "# release: teaching: not a private release\n")
    assert not (tmp_path / "ledger.sqlite").exists()
    page = upload_page(url)
    page.run()
    assert "Not charged: data set not registered in the budget ledger" in page.status
    BudgetPage(ledger_url=url, dataset_name="mine", csv_file=ROWS, total=1.0).register()
    page.seed = 3
    page.run()
    assert page.status.endswith("Not charged: seeded run: not a private release; the budget "
                                "ledger is not charged.")
    with Ledger(url) as ledger:
        assert ledger.history("mine") == []


def test_bad_registrations_are_one_line(url: str, tmp_path: Path) -> None:
    page = BudgetPage(ledger_url=url, dataset_name="mine", csv_file=b"a\n1\n")
    page.register()
    page.register()
    assert page.error == "name: 'mine' is already registered"
    page = BudgetPage(ledger_url=url, dataset_name="again", csv_file=b"a\n1\n")
    page.register()
    assert page.error == "name: the data set is already registered as 'mine'"
    page = BudgetPage(ledger_url=url, dataset_name="nothing")
    page.register()
    assert page.error == "data: upload a CSV file"
    page = BudgetPage(ledger_url=url, dataset_name="other", unit="(eps, delta)", total=1.0,
                      csv_file=b"a\n2\n")
    page.register()
    assert page.error == "" and page.datasets[-1]["unit"] == "epsilon-delta"
    broken = BudgetPage(ledger_url=f"sqlite:///{tmp_path}")  # a directory, not a database
    broken.refresh()
    assert broken.error == f"ledger: cannot open {str(tmp_path)!r}: unable to open database file"


def test_archive_keeps_the_history_and_stops_releases(url: str) -> None:
    budget = BudgetPage(ledger_url=url, dataset_name="mine", csv_file=ROWS, total=1.0)
    budget.register()
    page = upload_page(url)
    page.run()
    assert "Released: charged" in page.status
    budget.archive()
    assert budget.error == "" and budget.status.startswith("Archived mine")
    assert budget.datasets[0]["archived"] == "yes" and len(budget.releases) == 1
    page.run()
    assert page.error == ("dataset: 'mine' is archived (its history is kept as evidence; it "
                          "takes no new release)")


def test_one_default_delta_everywhere_but_the_aim_page():
    import argparse

    from engine.cli.budget import add_budget_arguments
    from engine.privacy import DEFAULT_DELTA, Privacy
    from explorer.pages.adaptive import AIM_DELTA

    assert DEFAULT_DELTA == 1e-6 and Privacy().delta == DEFAULT_DELTA
    page = BudgetPage()
    assert page.total_delta == DEFAULT_DELTA and page.at_delta == DEFAULT_DELTA
    parser = add_budget_arguments(argparse.ArgumentParser())
    assert parser.parse_args(["show"]).delta == DEFAULT_DELTA
    assert AIM_DELTA == 1e-9 and AdaptivePage().delta == AIM_DELTA  # AIM's published setting
