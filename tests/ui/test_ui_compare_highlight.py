"""Issue 17 items 3 and 6 on the served compare and workload pages: a click on a legend entry
or a table row highlights one mechanism on compare's chart; the tables hide no row and cut no
text.

The highlight is read from the Bokeh document (each bar's fill alpha), the tables from the
page: every row's mechanism or group name is on the page in full, and no cell's text is wider
than its cell (a cut text would be).
"""

from __future__ import annotations

import re

import pytest
import yaml
from browser_pages import app_path, upload_scenario
from playwright.sync_api import expect

from explorer.components.charts import FADED_ALPHA
from explorer.pages.builder import TABLE_PAGE_ROWS
from explorer.session import Session

pytestmark = pytest.mark.ui

PLAN_TIMEOUT_MS = 120_000

# Prefix sums over 8 cells: three quick mechanisms (identity and hb tie at RMSE 3).
PREFIX8 = {"domain": {"x": {"size": 8, "kind": "numeric"}},
           "workload": [{"product": {"x": "prefix"}}],
           "privacy": {"noise": "laplace", "epsilon": 1.0},
           "mechanisms": ["identity", "hb", "h2"]}

# More query groups than a page of the group table, one of them with a long label, and every
# registered mechanism (no list in the scenario): some do not apply to Laplace noise or need
# data, and say so at length in the note column.
LONG_LABEL = "age bracket of the oldest household member (self-reported)"
MANY = {"domain": {"age": {"size": 6, "kind": "numeric"},
                   "sex": {"size": 2, "kind": "categorical"},
                   LONG_LABEL: {"size": 3, "kind": "categorical"}},
        "workload": [{"product": {"age": "prefix"}, "weight": float(w + 1)}
                     for w in range(TABLE_PAGE_ROWS + 2)]
        + [{"product": {"sex": "identity", LONG_LABEL: "identity"}}],
        "privacy": {"noise": "laplace", "epsilon": 1.0}}

#: Fill alpha of each bar of the compare chart, by mechanism (the bars' one source has a ratio
#: and an alpha column, a row per mechanism).
BAR_ALPHAS_JS = """() => {
  const out = {};
  for (const m of Bokeh.documents[0].all_models) {
    const data = m.data_source && m.data_source.data;
    if (m.glyph && data && data.ratio !== undefined && data.alpha !== undefined) {
      data.mechanism.forEach((name, i) => { out[name] = data.alpha[i]; });
    }
  }
  return out;
}"""

#: Cells of the tables under ``selector`` whose text is wider than the cell (cut off), or
#: null when no table cell is found there (the cells live in the tables' shadow roots).
CUT_CELLS_JS = """(selector) => {
  const cells = [];
  const walk = (root, inside) => {
    for (const el of root.children) {
      const within = inside || el.matches(selector);
      if (within && el.matches('td, th')) cells.push(el);
      if (el.shadowRoot) walk(el.shadowRoot, within);
      walk(el, within);
    }
  };
  walk(document, false);
  if (cells.length === 0) return null;
  return cells.filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.textContent.trim());
}"""


def upload(page, spec: dict) -> None:
    upload_scenario(page, yaml.safe_dump(spec, sort_keys=False))


def open_compare(open_app, spec: dict, cells: str):
    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    upload(page, spec)
    expect(page.locator(".workload-stats").first).to_contain_text(cells, timeout=30_000)
    return page


def wait_for_alphas(page, condition: str) -> dict[str, float]:
    page.wait_for_function(f"() => {{ const a = ({BAR_ALPHAS_JS})(); return {condition}; }}",
                           timeout=30_000)
    return page.evaluate(BAR_ALPHAS_JS)


def test_a_legend_entry_highlights_one_mechanism(open_app, console_errors,
                                                 screenshot):
    page = open_compare(open_app, PREFIX8, "8 cells")
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).to_contain_text("most accurate mechanism is", timeout=PLAN_TIMEOUT_MS)
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    alphas = wait_for_alphas(page, "Object.keys(a).length === 3")
    assert alphas == {"identity": 1, "hb": 1, "h2": 1}

    legend = page.locator(".rmse-chart .bk-item")
    expect(legend.filter(has_text=re.compile(r"^SVD lower bound: \+/- \d"))).to_have_count(1)
    # each bar's alpha reaches the browser in its own patch: wait for the whole picture
    legend.filter(has_text=re.compile(r"^h2$")).click()
    alphas = wait_for_alphas(page, "a.identity < 0.5 && a.hb < 0.5 && a.h2 === 1")
    assert alphas == {"identity": pytest.approx(FADED_ALPHA), "hb": pytest.approx(FADED_ALPHA),
                      "h2": 1}
    screenshot("compare-legend-highlight")
    legend.filter(has_text=re.compile(r"^h2$")).click()  # again: all alike
    assert set(wait_for_alphas(page, "Object.values(a).every(v => v === 1)").values()) == {1}
    assert console_errors == []


def test_a_table_row_highlights_one_mechanism(open_app, console_errors):
    page = open_compare(open_app, PREFIX8, "8 cells")
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    wait_for_alphas(page, "Object.keys(a).length === 3")
    rows = page.locator(".comparison-table tbody tr")
    rows.filter(has=page.locator('td[data-field="mechanism"]',
                                 has_text=re.compile(r"^hb$"))).first.click()
    alphas = wait_for_alphas(page, "a.h2 < 0.5 && a.identity < 0.5 && a.hb === 1")
    assert alphas["hb"] == 1 and alphas["identity"] == pytest.approx(FADED_ALPHA)
    assert console_errors == []


def test_builder_and_compare_tables_hide_no_row_and_cut_no_text(open_app, console_errors,
                                                                screenshot):
    page = open_compare(open_app, MANY, "36 cells")
    groups = page.locator(".group-table").first
    # every group is listed: a first page of TABLE_PAGE_ROWS rows, the rest on the next page
    expect(groups.locator("tbody tr")).to_have_count(TABLE_PAGE_ROWS)
    groups.get_by_role("button", name="Next page").click()
    expect(groups.locator("tbody tr")).to_have_count(len(MANY["workload"]) -
                                                           TABLE_PAGE_ROWS)
    expect(groups).to_contain_text(LONG_LABEL)
    attributes = page.locator(".attribute-table").first
    expect(attributes.locator("tbody tr")).to_have_count(3)
    expect(attributes).to_contain_text(LONG_LABEL)
    assert page.evaluate(CUT_CELLS_JS, ".attribute-table") == []
    assert page.evaluate(CUT_CELLS_JS, ".group-table") == []
    screenshot("builder-tables-complete")

    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).to_contain_text("most accurate mechanism is", timeout=PLAN_TIMEOUT_MS)
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    table = page.locator(".comparison-table").first
    mechanisms = table.locator('tbody tr td[data-field="mechanism"]')
    expect(mechanisms).to_have_count(len(Session(MANY).mechanisms), timeout=30_000)
    expect(table).to_contain_text("not applicable")
    assert page.evaluate(CUT_CELLS_JS, ".comparison-table") == []
    screenshot("compare-table-complete")
    assert console_errors == []
