"""Issue 17 items 3 and 6 in the served app: controls that tell the truth, pages that read.

Each test checks values on the page against what the engine computes for the same scenario.
"""

from __future__ import annotations

import pytest
from browser_pages import app_path, table_rows, upload_scenario
from playwright.sync_api import expect

pytestmark = pytest.mark.ui

PLAN_TIMEOUT_MS = 120_000

# Prefix sums over 8 cells with Laplace noise at eps = 1: identity's RMSE is exactly 3 (variance
# 2 per cell, 4.5 cells per query on average); hb picks branching 8 there, i.e. identity.
PREFIX8 = """domain:
  x: {size: 8, kind: numeric}
workload:
  - product: {x: prefix}
privacy: {noise: laplace, epsilon: 1.0}
mechanisms: [identity, hb, h2]
"""

# The alpha of each trade-off curve's line, by mechanism, read from the Bokeh document (the
# curves' one source has a row per line, with its alpha).
CURVE_ALPHAS_JS = """() => {
  const out = {};
  for (const m of Bokeh.documents[0].all_models) {
    const data = m.data_source && m.data_source.data;
    if (m.glyph && data && data.xs !== undefined && data.alpha !== undefined) {
      data.mechanism.forEach((name, i) => { out[name] = data.alpha[i]; });
    }
  }
  return out;
}"""


def readout_row(page, name: str):
    rows = page.locator(".tradeoff-readout tbody tr")
    for i in range(rows.count()):
        row = rows.nth(i)
        if row.locator('td[data-field="mechanism"]').inner_text().strip() == name:
            return row
    raise AssertionError(f"{name} not in the trade-off readout")


def type_into(page, selector: str, text: str) -> None:
    box = page.locator(f"{selector} input").first
    box.fill(text)
    box.press("Enter")


def test_tradeoff_controls_refuse_nonsense_and_tell_equal_lines_apart(open_app, console_errors,
                                                                      screenshot):
    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    upload_scenario(page, PREFIX8)
    expect(page.locator(".workload-stats").first).to_contain_text("8 queries over 8 cells")
    page.locator(".site-nav").get_by_role("link", name="Privacy trade-off").click()
    readout = page.locator(".tradeoff-readout").first
    expect(readout).to_contain_text("h2", timeout=PLAN_TIMEOUT_MS)
    level = page.locator(".tradeoff-level").first
    expect(level).to_contain_text("laplace eps=1")

    # identity and hb: the same number, and the table says so
    identity = readout_row(page, "identity")
    assert float(identity.locator('td[data-field="rmse"]').inner_text()) == 3.0
    hb = readout_row(page, "hb")
    assert float(hb.locator('td[data-field="rmse"]').inner_text()) == 3.0
    expect(hb.locator('td[data-field="note"]')).to_have_text("same error as identity")

    # a typed eps of 0 is refused in words; the page keeps eps = 1
    type_into(page, ".eps-input", "0")
    expect(page.locator(".privacy-problem").first).to_contain_text(
        "eps: must be more than 0 (got 0); still using 1.")
    expect(level).to_contain_text("laplace eps=1")
    type_into(page, ".eps-input", "2")
    expect(level).to_contain_text("laplace eps=2", timeout=30_000)
    expect(page.locator(".privacy-problem").first).to_be_hidden()
    # Laplace at eps = 2 halves the noise's standard deviation: identity's RMSE is 1.5
    expect(readout_row(page, "identity").locator('td[data-field="rmse"]')).to_have_text(
        "1.5000")
    expect(page.locator(".privacy-conversion").first).to_contain_text(
        "Pure eps = 2 (Laplace) implies rho = 2 zCDP.", timeout=30_000)

    # a target error of -5 is refused and the last target is still answered
    type_into(page, ".target-people", "1.5")
    expect(page.locator(".required-lead").first).to_contain_text(
        "within +/- 1.5 people", timeout=30_000)
    expect(page.locator(".required-budget").first).to_contain_text("identity")
    type_into(page, ".target-people", "-5")
    expect(page.locator(".tradeoff-page .box-problem").first).to_contain_text(
        "Target error (+/- people, 95 %): must be more than 0 (got -5); still using 1.5.")
    expect(page.locator(".target-people input").first).to_have_value("-5")
    expect(page.locator(".required-budget").first).to_contain_text("identity")

    # clicking a row highlights that mechanism's line
    assert set(page.evaluate(CURVE_ALPHAS_JS).values()) == {1}
    readout_row(page, "h2").locator('td[data-field="mechanism"]').click()
    page.wait_for_function(f"() => ({CURVE_ALPHAS_JS})()['identity'] < 0.5", timeout=30_000)
    alphas = page.evaluate(CURVE_ALPHAS_JS)
    assert alphas["h2"] == 1.0 and alphas["identity"] == pytest.approx(0.15)
    screenshot("readable-tradeoff")
    assert console_errors == []


def test_census_page_says_what_to_do_then_prints_whole_counts(open_app, console_errors,
                                                              screenshot):
    page = open_app(app_path("/census"), wait_for=".census-empty")
    expect(page.locator(".census-empty").first).to_contain_text("No results yet.")
    expect(page.locator(".learn-note").first).to_contain_text("What am I looking at?")
    expect(page.get_by_text("released vs true")).to_have_count(0)  # no empty charts
    spec = page.get_by_label("Synthetic spec")
    spec.fill("levels=1,2,5;groups=300;max_size=6;seed=1")
    spec.press("Enter")
    page.get_by_role("button", name="Run trials").click()
    table = page.locator(".census-results").first
    expect(table).to_contain_text("M_DP (plain, exact DP)", timeout=PLAN_TIMEOUT_MS)
    expect(page.locator(".census-empty").first).to_be_hidden()
    # the results table is redrawn as each variant finishes: read it once the run is over
    expect(page.get_by_role("button", name="Run trials")).to_be_enabled(timeout=PLAN_TIMEOUT_MS)
    expect(table.locator("th").first).to_have_text("variant")
    # dp releases are consistent: 0 violations, printed as a whole number
    first = table_rows(table)[0]
    assert first["variant"] == "dp"
    assert first["violations"] == "0"
    expect(page.locator(".census-csv").first).to_be_visible()
    screenshot("readable-census")
    assert console_errors == []


def test_adaptive_page_says_what_to_do_before_a_run(open_app, console_errors):
    page = open_app(app_path("/adaptive"), wait_for=".adaptive-empty")
    expect(page.locator(".adaptive-empty").first).to_contain_text(
        "No results yet. Choose the data and the attributes on the left")
    expect(page.locator(".learn-note").first).to_contain_text("What am I looking at?")
    assert console_errors == []
