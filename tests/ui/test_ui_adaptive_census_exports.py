"""The adaptive and census pages in the served app: counts people can read, the per-round log
explained, and CSV downloads that pandas reads with their privacy level as columns.

Both runs are seeded (teaching mode): never a release, so no budget ledger is touched.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest
from browser_pages import app_path, table_rows
from playwright.sync_api import expect

from explorer.components.exports import SCENARIO_COLUMNS

pytestmark = pytest.mark.ui

RUN_TIMEOUT_MS = 120_000
# A count of records as the page prints it: whole with thousands separators, or one decimal.
COUNT = re.compile(r"\d{1,3}(,\d{3})*(\.\d)?")


def download_csv(page, selector: str, filename: str) -> str:
    """Click a download button and return the saved file's text."""
    with page.expect_download() as download_info:
        page.locator(f"{selector} button").first.click()
    download = download_info.value
    assert download.suggested_filename == filename
    return Path(download.path()).read_text(encoding="utf-8")


def test_adaptive_page_prints_counts_explains_rounds_and_downloads_adaptive_csv(
        open_app, console_errors, screenshot):
    page = open_app(app_path("/adaptive"), wait_for=".adaptive-empty")
    expect(page.locator(".learn-note").first).to_contain_text("What am I looking at?")
    for label, value in (("Rounds cap", "6"), ("Seed (teaching only)", "1")):
        field = page.get_by_label(label)
        field.fill(value)
        field.press("Enter")
    # the attributes are labelled check boxes: untick one by its name, as a screen reader would
    workclass = page.get_by_role("checkbox", name="workclass", exact=True)
    expect(workclass).to_be_checked()
    workclass.uncheck()
    expect(workclass).not_to_be_checked()
    expect(page.get_by_role("checkbox", name="Compare with ResidualPlanner")).to_be_checked()
    page.get_by_role("button", name="Run").click()
    results = page.locator(".adaptive-results").first
    expect(results).to_contain_text("ResidualPlanner (batch)", timeout=RUN_TIMEOUT_MS)
    expect(page.locator(".adaptive-empty").first).to_be_hidden()

    rows = table_rows(results)
    assert [row["method"] for row in rows] == ["AIM+GReM", "ResidualPlanner (batch)"]
    for row in rows:
        for column in ("mean L1 (counts)", "mean L2 (counts)", "max L1 (counts)"):
            assert COUNT.fullmatch(row[column]), (column, row[column])
    rounds = table_rows(page.locator(".adaptive-rounds").first)
    assert [row["Round"] for row in rounds] == [str(n) for n in range(1, len(rounds) + 1)]
    assert all(COUNT.fullmatch(row["Noise sigma (records)"]) for row in rounds)
    assert all(COUNT.fullmatch(row["Workload error (records)"]) for row in rounds)
    expect(page.locator(".adaptive-rounds-help").first).to_contain_text(
        "Noise sigma (records): standard deviation of the Gaussian noise added to each count "
        "of the marginal measured this round, in records.")
    screenshot("adaptive-readable")

    table = pd.read_csv(io.StringIO(download_csv(page, ".adaptive-csv", "adaptive.csv")),
                        dtype_backend="numpy_nullable")
    assert {str(table[c].dtype) for c in ("round", "rounds", "skipped")} == {"Int64"}
    assert table["round"].dropna().tolist() == list(range(1, len(rounds) + 1))
    assert list(table.columns[-len(SCENARIO_COLUMNS):]) == list(SCENARIO_COLUMNS)
    assert set(table["privacy"]) == {"gaussian eps=1 delta=1e-09"}
    # 2-way marginals of age, education-num, sex, race and income>50K (workclass unticked)
    assert set(table["workload"]) == {"2,293 queries over 27,200 cells (10 terms)"}
    assert set(table["release"]) == {"seeded: reproducible, not a private release"}
    assert console_errors == []


def test_census_csv_has_privacy_columns_and_whole_counts(open_app, console_errors):
    page = open_app(app_path("/census"), wait_for=".census-empty")
    expect(page.locator(".learn-note").first).to_contain_text("What am I looking at?")
    spec = page.get_by_label("Synthetic spec")
    spec.fill("levels=1,2,5;groups=300;max_size=6;seed=1")
    spec.press("Enter")
    seed = page.get_by_label("Seed (teaching only)")
    seed.fill("2")
    seed.press("Enter")
    # a number box keeps what was typed and says what is wrong beside it
    trials = page.get_by_label("Trials", exact=True)
    trials.fill("abc")
    trials.press("Enter")
    expect(page.locator(".census-trials-problem").first).to_contain_text(
        'Trials: "abc" is not a number; still using 5.')
    trials.fill("5")
    trials.press("Enter")
    expect(page.locator(".census-trials-problem").first).to_be_hidden()
    page.get_by_role("button", name="Run trials").click()
    expect(page.locator(".census-results").first).to_contain_text(
        "M_DP (plain, exact DP)", timeout=RUN_TIMEOUT_MS)
    # the tree view is built with the first results (not on every open) and redrawn with
    # each: read its table once the run is over
    expect(page.get_by_role("button", name="Run trials")).to_be_enabled(timeout=RUN_TIMEOUT_MS)
    expect(page.locator(".census-children").first).to_contain_text("nation")
    expect(page.locator(".census-children th").first).to_be_visible()
    children = table_rows(page.locator(".census-children").first)
    assert children[0]["region"] == "nation" and children[0]["true groups"] == "300"

    text = download_csv(page, ".census-csv", "census.csv")
    table = pd.read_csv(io.StringIO(text), dtype=str).set_index("variant")
    assert set(table["privacy"]) == {"pure eps-DP eps=1"}
    assert set(table["noise"]) == {"geometric"} and set(table["epsilon"]) == {"1.0"}
    assert set(table["queries"]) == {"56"} and set(table["cells"]) == {"35"}
    assert table.loc["dp", "violations"] == "0"
    assert console_errors == []
