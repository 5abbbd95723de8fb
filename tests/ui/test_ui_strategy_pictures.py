"""Issue 29 item 3 in the served app: on the analyst's workload (age x sex x race, 1,400 cells,
more than the 1,024 cells once drawn), hdmm-opt0 and querysmasher each show a picture of their
strategy and their structure views with numbers (the engine's), and the optimiser's
diagnostics sit under a folded "Details"."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml
from browser_pages import app_path, reveal, upload_scenario
from playwright.sync_api import expect

from engine import gaussian_half_width, value_count_variances
from engine.mechanisms import get
from engine.scenario import Scenario
from engine.workloads import catalog

pytestmark = pytest.mark.ui

PLAN_TIMEOUT_MS = 240_000

SCENARIO = yaml.safe_dump({
    **catalog.spec("age_sex_race"),
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
    "mechanisms": ["hdmm-opt0", "querysmasher"],
}, sort_keys=False)

#: "Largest: **name** (value units); smallest: **name** (value units)." as the page shows it,
#: or "Every value: value units." when they are all equal.
EXTREMES = re.compile(r"Largest: (.+?) \(([-\d.,e+]+)[^)]*\); smallest: (.+?) \(([-\d.,e+]+)")
EQUAL = re.compile(r"Every value: ([-\d.,e+]+)")


#: The text under an element, through Panel's shadow roots (inner_text stops at the host).
TEXT = """element => { const out = []; const walk = node => {
    if (node.nodeType === 3) out.push(node.textContent);
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) walk(child); };
  walk(element); return out.join(" ").replace(/\\s+/g, " "); }"""


def extremes(page, key: str) -> tuple[str | None, float, str | None, float]:
    """The names and values the page gives as largest and smallest (names None: all equal)."""
    line = page.locator(f".strategy-extremes-{key}").first
    expect(line).to_be_visible(timeout=PLAN_TIMEOUT_MS)
    text = line.evaluate(TEXT)
    equal = EQUAL.search(text)
    if equal:
        value = float(equal[1].replace(",", ""))
        return None, value, None, value
    match = EXTREMES.search(text)
    assert match, text
    return (match[1], float(match[2].replace(",", "")), match[3],
            float(match[4].replace(",", "")))


def show(page, mechanism: str) -> None:
    page.locator(".strategy-mechanism select").first.select_option(mechanism)
    expect(page.locator(".strategy-views").first).to_contain_text(mechanism,
                                                                  timeout=PLAN_TIMEOUT_MS)
    reveal(page)  # the views below the first screen are built when scrolled to


def pictures_drawn(page) -> None:
    # the strategy and AᵀA, each a Bokeh canvas (the matrix is 806 x 1,400: drawn from blocks)
    for key in ("A", "gram"):
        picture = page.locator(f".strategy-picture-{key} canvas").first
        expect(picture).to_be_visible(timeout=60_000)
        box = picture.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100


def test_strategy_pictures_and_structure_views(open_app, console_errors, screenshot):
    s = Scenario.from_spec(yaml.safe_load(SCENARIO))
    assert s.workload.domain.size == 1400
    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    upload_scenario(page, SCENARIO)
    expect(page.locator(".workload-stats").first).to_contain_text(
        "1,014 queries over 1,400 cells", timeout=60_000)
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    page.locator(".site-nav").get_by_role("link", name="Strategy").click()

    # hdmm-opt0: the picture, how precisely each race count is known (the engine's numbers)
    show(page, "hdmm-opt0")
    pictures_drawn(page)
    views = page.locator(".strategy-views").first
    expect(views).to_contain_text("For each value of race: the number of records")
    expect(views).not_to_contain_text("at most 1,024 cells")
    opt0 = get("hdmm-opt0").plan(s.workload, s.privacy)
    unit = value_count_variances(opt0.strategy, s.workload.domain.shape)[2]
    race = gaussian_half_width(opt0.noise_std() * np.sqrt(unit))  # ± people at 95 %
    labels = list(s.workload.domain.attributes[2].labels)
    top, top_value, bottom, bottom_value = extremes(page, "counts-race")
    if top is not None:
        assert race[labels.index(top)] == pytest.approx(top_value, rel=1e-4)
        assert race[labels.index(bottom)] == pytest.approx(bottom_value, rel=1e-4)
    assert top_value == pytest.approx(race.max(), rel=1e-4)
    assert bottom_value == pytest.approx(race.min(), rel=1e-4)
    assert 30 < bottom_value <= top_value < 60  # ± people at 95 %, race is symmetric here
    # age varies: the page names the least and most precise age
    unit = value_count_variances(opt0.strategy, s.workload.domain.shape)[0]
    age = gaussian_half_width(opt0.noise_std() * np.sqrt(unit))
    top, top_value, bottom, bottom_value = extremes(page, "counts-age")
    assert top == f"age value {int(age.argmax())}" and bottom == f"age value {int(age.argmin())}"
    assert top_value == pytest.approx(age.max(), rel=1e-4)
    assert bottom_value == pytest.approx(age.min(), rel=1e-4) and bottom_value < top_value

    # diagnostics are folded: not visible until "Details" is opened
    gap = page.get_by_text("certified duality gap (relative)").first
    expect(gap).to_be_hidden()
    for word, exact in (("Cholesky", False), ("inf", True), ("None", True)):
        shown = [m for m in page.get_by_text(word, exact=exact).all() if m.is_visible()]
        assert not shown, word
    page.locator(".strategy-details").get_by_text("Details: opt_0 strategy").first.click()
    expect(gap).to_be_visible(timeout=30_000)
    screenshot("strategy-hdmm-opt0")

    # querysmasher: its picture and the budget share of each residual, as numbers
    show(page, "querysmasher")
    pictures_drawn(page)
    expect(views).to_contain_text("A residual is what a table adds beyond its smaller")
    shares = get("querysmasher").plan(s.workload, s.privacy).view("residual_shares")
    by_name = shares.as_dict()
    top, top_value, bottom, bottom_value = extremes(page, "residual-shares")
    assert top is not None and bottom is not None
    assert top_value == pytest.approx(max(by_name.values()), rel=1e-4)
    assert bottom_value == pytest.approx(min(by_name.values()), rel=1e-4)
    assert by_name[top] == pytest.approx(top_value, rel=1e-4)
    assert by_name[bottom] == pytest.approx(bottom_value, rel=1e-4)
    gamma = page.get_by_text("loss multiplier gamma").first
    expect(gamma).to_be_hidden()
    assert "L1 sensitivity" not in views.evaluate(TEXT)
    screenshot("strategy-querysmasher")
    assert console_errors == []
