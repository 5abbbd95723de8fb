"""The data steward in the browser (issue 28): register their own CSV under their own name on
the Budget page, plan a two-attribute workload on Compare, release the recommended plan on the
Release page from the same CSV, download the zip and find labelled, whole, non-negative,
consistent counts with margins, then release again until the ledger refuses and says what
remains. Then an AIM+GReM release of another registered CSV on the Adaptive page, and a census
hierarchy registered with a pure eps budget (the Budget page's Unit menu) and released on the
Census page charged to it, each downloaded and checked the same way; the Budget page's spent
moves by exactly the census release's cost."""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from browser_pages import (
    name_budget_upload,
    save_screenshot,
    start_server,
    upload_scenario,
    wait_for_panel,
)
from playwright.sync_api import expect

from engine.ledger import Cost
from engine.mechanisms.hierarchical.io import write_hierarchy_csv
from engine.mechanisms.hierarchical.synthetic import synthetic_census
from engine.privacy import DEFAULT_DELTA, cdp_eps, cdp_rho
from engine.scenario import Scenario
from engine.workflows.compare import compare

pytestmark = [pytest.mark.ui, pytest.mark.slow]

PLAN_TIMEOUT_MS = 120_000
NAME = "clinic visits 2026"
RHO, TOTAL = 0.25, 0.6  # two releases fit, the third does not
TOWNS, TOWNS_EPS = "towns census", 3.0  # the census hierarchy's data set and pure eps budget
AGES = ["0-29", "30-39", "40-49", "50-64", "65-99"]
SCENARIO = yaml.safe_dump({
    "domain": {"sex": {"labels": ["female", "male"]},
               "age": {"kind": "numeric", "bin_edges": [0, 30, 40, 50, 65, 100]}},
    "workload": [{"marginals": {"k": 2}}, {"marginals": {"k": 1}}],
    "privacy": {"noise": "zcdp", "rho": RHO},
    "mechanisms": ["identity", "hdmm"],
}, sort_keys=False)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """An explorer of its own: its own data directory, so its own empty ledger."""
    with start_server("explorer-server-steward.log") as base:
        yield base


def records(path: Path) -> Path:
    """400 seeded visits in their raw values: sex as words, age in years."""
    rng = np.random.default_rng(28)
    sex = rng.choice(["female", "male"], 400)
    age = rng.integers(18, 95, 400)
    path.write_text("sex,age\n" + "".join(f"{s},{a}\n" for s, a in zip(sex, age, strict=True)))
    return path


def remaining_text(rho: float) -> str:
    return f"remaining: rho = {rho:.6g} = eps {cdp_eps(rho, DEFAULT_DELTA):.6g} at delta"


def published(zip_bytes: bytes) -> tuple[dict[str, pd.DataFrame], dict, dict[str, str]]:
    """The zip's tables (read past their ``#`` provenance lines, labels as text), its record,
    and the first line of every CSV."""
    archive = zipfile.ZipFile(io.BytesIO(zip_bytes))
    tables, first = {}, {}
    for name in archive.namelist():
        if name.endswith(".csv"):
            text = archive.read(name).decode()
            first[name] = text.splitlines()[0]
            frame = pd.read_csv(io.StringIO(text), comment="#")
            labels = [c for c in frame.columns if c not in ("estimate", "margin_95", "raw")]
            tables[name[:-4]] = pd.read_csv(io.StringIO(text), comment="#",
                                            dtype=dict.fromkeys(labels, str))
    return tables, json.loads(archive.read("release.json")), first


def whole_with_margins(tables: dict[str, pd.DataFrame]) -> set[int]:
    """Assert every table's estimates are whole, non-negative and have margins; their
    totals."""
    totals = set()
    for table in tables.values():
        assert table["estimate"].dtype == np.int64 and (table["estimate"] >= 0).all()
        assert (table["margin_95"] > 0).all() and table["raw"].notna().all()
        totals.add(int(table["estimate"].sum()))
    return totals


def download(page, selector: str, filename: str) -> bytes:
    with page.expect_download() as info:
        page.locator(f"{selector} button").first.click()
    assert info.value.suggested_filename == filename
    return Path(info.value.path()).read_bytes()


def budget_spent(page, name: str, unit: str) -> float:
    """The spent budget of data set ``name`` as the Budget page's bar line prints it
    (``name: spent S of T (unit; N releases)``)."""
    line = page.locator(".budget-line", has_text=f"{name}: spent").first.locator("p")
    expect(line).to_be_visible()
    text = line.inner_text()
    match = re.search(rf"{re.escape(name)}: spent (\S+) of \S+ \({unit};", text)
    assert match, text
    return float(match.group(1))


def printed_half_unit(value: float, digits: int = 6) -> float:
    """Half a unit in the last place of ``value`` printed with ``digits`` significant
    digits (``{:.6g}``): how far the printed number may be from the true one."""
    if value == 0:
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)


def steward_page(browser) -> tuple[object, object, list[str]]:
    """A browser context that accepts downloads, its page, and the list the page's uncaught
    errors are collected in."""
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  accept_downloads=True)
    context.set_default_timeout(60_000)
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    return context, page, errors


def test_steward_registers_releases_downloads_and_is_refused(browser, served: str,
                                                             tmp_path: Path) -> None:
    csv_file = records(tmp_path / "clinic.csv")
    context, page, errors = steward_page(browser)

    # 1. the Budget page: their own CSV under their own name, with their own budget
    page.goto(f"{served}/app?page=budget", wait_until="load")
    wait_for_panel(page, ".budget-total")
    name_budget_upload(page, csv_file, NAME)
    total = page.locator(".budget-total input")
    total.fill(str(TOTAL))
    total.press("Enter")
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_text(f"Registered {NAME} (owner anonymous) with rho={TOTAL:g}")
           ).to_be_visible()

    # 2. Compare: a two-attribute workload, planned
    page.goto(f"{served}/app?page=builder", wait_until="load")
    wait_for_panel(page, ".workload-stats")
    upload_scenario(page, SCENARIO, "clinic.yaml")
    expect(page.locator(".workload-stats").first).to_contain_text("17 queries over 10 cells")
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).to_contain_text("most accurate", timeout=PLAN_TIMEOUT_MS)
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    scenario = Scenario.from_spec(yaml.safe_load(SCENARIO))
    best = compare(scenario.workload, scenario.privacy, scenario.mechanisms).best().mechanism
    expect(headline).to_contain_text(f"the most accurate mechanism is {best} ")

    # 3. Release: the recommended plan, the same CSV, what it costs and leaves
    page.locator(".site-nav").get_by_role("link", name="Release").click()
    wait_for_panel(page, ".release-page")
    expect(page.locator(".release-plan select").first).to_have_value(best)
    page.locator(".release-upload input[type=file]").set_input_files(str(csv_file))
    expect(page.locator(".release-data").first).to_contain_text(
        "clinic.csv: 400 records over sex, age.")
    quote = page.locator(".release-quote").first
    expect(quote).to_contain_text(
        f"This release costs rho={RHO:g}, charged to {NAME} (rho={TOTAL:g} in all); remaining "
        f"after it: {TOTAL - RHO:.6g} (rho {TOTAL - RHO:.6g} = eps "
        f"{cdp_eps(TOTAL - RHO, DEFAULT_DELTA):.6g} at delta 1e-06).")
    button = page.get_by_role("button", name="Release", exact=True)
    status = page.locator(".release-status").first
    button.click()
    expect(status).to_contain_text(f"charged rho={RHO:g} to {NAME}: spent {RHO:g} of "
                                   f"rho={TOTAL:g}", timeout=PLAN_TIMEOUT_MS)

    # the first published table on the page: the domain's values, whole counts
    shown = page.locator(".release-table tbody tr")
    expect(shown.first).to_be_visible()
    first_row = [shown.first.locator(f'td[data-field="{c}"]').inner_text().strip()
                 for c in ("sex", "age", "estimate")]
    assert first_row[:2] == ["female", "0-29"] and first_row[2].isdigit(), first_row
    save_screenshot(page, "steward-release")

    with page.expect_download() as info:
        page.locator(".release-zip button").first.click()
    assert info.value.suggested_filename == "release.zip"
    tables, record, first_lines = published(Path(info.value.path()).read_bytes())
    assert sorted(tables) == ["age", "sex", "sex_x_age"]
    assert set(first_lines.values()) == {"# release: private release"}
    assert record["mechanism"] == best and record["notice"] is None
    assert record["budget"]["spent"] == pytest.approx(RHO, abs=1e-12)
    assert record["budget"]["remaining"] == pytest.approx(TOTAL - RHO, abs=1e-12)
    assert record["post_processing"].startswith("consistent: one non-negative estimate")
    pair = tables["sex_x_age"]
    assert list(pair.columns) == ["sex", "age", "estimate", "margin_95", "raw"]
    assert pair["sex"].tolist() == ["female"] * 5 + ["male"] * 5
    assert pair["age"].tolist() == AGES * 2
    assert first_row[2] == str(pair["estimate"].iloc[0])  # the page shows the download's
    for attr, values in (("sex", ["female", "male"]), ("age", AGES)):
        one_way = tables[attr]
        assert one_way[attr].tolist() == values
        # consistent: the 1-way table is the sum of the 2-way one
        assert pair.groupby(attr, sort=False)["estimate"].sum().tolist() == \
            one_way["estimate"].tolist()
    totals = set()
    for table in tables.values():
        assert table["estimate"].dtype == np.int64 and (table["estimate"] >= 0).all()
        assert (table["margin_95"] > 0).all()
        totals.add(int(table["estimate"].sum()))
    assert len(totals) == 1 and abs(totals.pop() - 400) <= 3 * tables["sex"]["margin_95"].sum()

    # 4. again: the second release fits, the third is refused and says what remains
    button.click()
    expect(status).to_contain_text(f"spent {2 * RHO:g} of rho={TOTAL:g}",
                                   timeout=PLAN_TIMEOUT_MS)
    button.click()
    expect(status).to_contain_text("Refused: nothing was drawn or released.",
                                   timeout=PLAN_TIMEOUT_MS)
    refusal = page.locator(".release-error").first
    expect(refusal).to_contain_text(f"data set '{NAME}' has spent {2 * RHO:.6g}")
    expect(refusal).to_contain_text(remaining_text(TOTAL - 2 * RHO))
    save_screenshot(page, "steward-refused")

    page.goto(f"{served}/app?page=budget", wait_until="load")
    wait_for_panel(page, ".budget-bar")
    expect(page.get_by_text("(rho; 2 releases)").first).to_be_visible()
    expect(page.locator(".budget-history").get_by_role("cell", name=best, exact=True)
           ).to_have_count(2)
    expect(page.locator(".budget-bar progress").first).to_have_attribute(
        "value", str(round(100 * 2 * RHO / TOTAL)))
    context.close()
    assert errors == []


SURVEY_DOMAIN = {"gender": {"labels": ["female", "male"]},
                 "years": {"kind": "numeric", "bin_edges": [0, 30, 40, 50, 65, 100]},
                 "smoker": {"labels": ["no", "yes"]}}


def survey(path: Path) -> Path:
    """300 seeded survey answers in their raw values (gender and smoker in words, years)."""
    rng = np.random.default_rng(29)
    gender = rng.choice(["female", "male"], 300)
    years = rng.integers(18, 95, 300)
    smoker = np.where(rng.random(300) < 0.2 + 0.004 * (years - 18), "yes", "no")
    path.write_text("gender,years,smoker\n" + "".join(
        f"{g},{y},{s}\n" for g, y, s in zip(gender, years, smoker, strict=True)))
    return path


def test_steward_releases_aim_grem_and_a_census_hierarchy(browser, served: str,
                                                          tmp_path: Path) -> None:
    csv_file = survey(tmp_path / "survey.csv")
    domain_file = tmp_path / "survey-domain.json"
    domain_file.write_text(json.dumps(SURVEY_DOMAIN))
    context, page, errors = steward_page(browser)

    # 1. register the survey under its own name
    page.goto(f"{served}/app?page=budget", wait_until="load")
    wait_for_panel(page, ".budget-total")
    name_budget_upload(page, csv_file, "household survey")
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_text("Registered household survey (owner anonymous) with rho=1")
           ).to_be_visible()

    # 2. AIM+GReM on the Adaptive page: charged, shown, downloaded as labelled tables
    page.goto(f"{served}/app?page=adaptive", wait_until="load")
    wait_for_panel(page, ".adaptive-status")
    page.get_by_role("button", name="Uploaded CSV + domain").click()
    files = page.locator("input[type=file]")
    files.nth(0).set_input_files(str(csv_file))
    files.nth(1).set_input_files(str(domain_file))
    rho = cdp_rho(1.0, 1e-9)  # the page's default (eps, delta) = (1, 1e-9)
    page.get_by_role("button", name="Run").click()
    expect(page.locator(".adaptive-status").first).to_contain_text(
        f"Released: charged rho={rho:.6g} to household survey", timeout=PLAN_TIMEOUT_MS)
    expect(page.locator(".adaptive-released").first).to_contain_text("female")
    expect(page.locator(".adaptive-method").first).to_contain_text(
        "consistent: whole counts fitted to the released GReM-MLE marginals by raking")
    save_screenshot(page, "steward-aim-grem")
    tables, record, first_lines = published(download(page, ".adaptive-release-zip",
                                                     "aim-grem-release.zip"))
    assert sorted(tables) == ["gender_x_smoker", "gender_x_years", "years_x_smoker"]
    assert set(first_lines.values()) == {"# release: private release"}
    assert record["mechanism"] == "aim-grem" and record["notice"] is None
    assert record["budget"]["spent"] == pytest.approx(rho, rel=1e-12)
    pair = tables["gender_x_years"]
    assert list(pair.columns) == ["gender", "years", "estimate", "margin_95", "raw"]
    assert pair["gender"].tolist() == ["female"] * 5 + ["male"] * 5
    assert pair["years"].tolist() == AGES * 2
    assert set(tables["years_x_smoker"]["smoker"]) == {"no", "yes"}
    totals = whole_with_margins(tables)
    assert len(totals) == 1 and abs(totals.pop() - 300) <= 60
    for attr, (left, right) in {"gender": ("gender_x_years", "gender_x_smoker"),
                                "years": ("gender_x_years", "years_x_smoker"),
                                "smoker": ("gender_x_smoker", "years_x_smoker")}.items():
        # consistent, exactly: a 1-way marginal is the same from every table holding it
        assert (tables[left].groupby(attr, sort=False)["estimate"].sum().to_dict()
                == tables[right].groupby(attr, sort=False)["estimate"].sum().to_dict())

    # 3. a census hierarchy: registered on the Budget page with a pure eps budget (the Census
    # page's releases are pure eps), released on the Census page charged to it, one table per
    # level, parents = children; the Budget page's spent moves by exactly the release's cost
    hierarchy = tmp_path / "towns.csv"
    write_hierarchy_csv(synthetic_census("levels=1,3,8;groups=600;max_size=6;seed=3"),
                        hierarchy)
    page.goto(f"{served}/app?page=budget", wait_until="load")
    wait_for_panel(page, ".budget-total")
    name_budget_upload(page, hierarchy, TOWNS)
    unit = page.get_by_label("Unit", exact=True)
    expect(unit.locator("option")).to_have_text(["rho (zCDP)", "eps (pure)", "(eps, delta)"])
    expect(page.locator(".budget-unit-note").first).to_contain_text(
        "eps (pure) takes only pure releases, such as the Census page's")
    unit.select_option(label="eps (pure)")
    total = page.locator(".budget-total input")
    total.fill(str(TOWNS_EPS))
    total.press("Enter")
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_text(f"Registered {TOWNS} (owner anonymous) with eps={TOWNS_EPS:g}")
           ).to_be_visible()
    spent_before = budget_spent(page, TOWNS, "epsilon")

    page.goto(f"{served}/app?page=census", wait_until="load")
    wait_for_panel(page, ".census-empty")
    page.get_by_role("button", name="upload CSV").click()
    page.locator("input[type=file]").set_input_files(str(hierarchy))
    top = page.get_by_label("Max size (public top bucket)")
    top.fill("6")
    top.press("Enter")
    cost = Cost.pure(1.0)  # the page's default eps
    expect(page.locator(".census-quote").first).to_contain_text(
        f"This release costs {cost.describe()}, charged to {TOWNS} (eps={TOWNS_EPS:g} in all)")
    page.get_by_role("button", name="Release", exact=True).click()
    status = page.locator(".census-release-status").first
    expect(status).to_contain_text("Released dp at eps = 1 (0 consistency violations); "
                                   f"charged {cost.describe()} to {TOWNS}: spent",
                                   timeout=PLAN_TIMEOUT_MS)
    expect(page.locator(".census-release-method").first).to_contain_text(
        "'estimate' column is consistent")
    save_screenshot(page, "steward-census")
    levels, record, _ = published(download(page, ".census-release-zip",
                                           "census-release.zip"))
    assert sorted(levels) == ["county", "nation", "state"]
    assert record["mechanism"] == "hierarchical-pgsr" and record["notice"] is None
    assert record["budget"]["spent"] == pytest.approx(cost.epsilon, rel=1e-12)
    county, state, nation = levels["county"], levels["state"], levels["nation"]
    assert list(county.columns) == ["nation", "state", "county", "size", "estimate",
                                    "margin_95", "raw"]
    assert county["size"].tolist()[:7] == ["0", "1", "2", "3", "4", "5", "6+"]
    assert whole_with_margins(levels) == {600}  # every level sums to the public n
    assert (county.groupby(["state", "size"], sort=False)["estimate"].sum().tolist()
            == state["estimate"].tolist())
    assert (state.groupby("size", sort=False)["estimate"].sum().tolist()
            == nation["estimate"].tolist())

    page.goto(f"{served}/app?page=budget", wait_until="load")
    wait_for_panel(page, ".budget-bar")
    spent_after = budget_spent(page, TOWNS, "epsilon")
    # the page prints 6 significant digits: each reading is within half its last digit
    tolerance = printed_half_unit(spent_before) + printed_half_unit(spent_after)
    assert abs((spent_after - spent_before) - cost.epsilon) <= tolerance, (spent_before,
                                                                           spent_after)
    context.close()
    assert errors == []
