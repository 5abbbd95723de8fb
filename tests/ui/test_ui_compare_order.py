"""Bound first, estimates always: on the served compare page the SVD bound's value shows while
a slow mechanism is still waiting or planning, and the waiting row shows its estimate.

The scenario: prefix queries on 2,048 cells with identity, h2 and hdmm-opt0. OPT_0's cost
model (100 n**3 operations on the dense Gram) puts it over a minute, so it is held for
"Plan anyway"; pressing it starts it while the bound stays on screen.
"""

from __future__ import annotations

import re

import pytest
import yaml
from browser_pages import app_path, upload_scenario
from playwright.sync_api import expect

from engine.analysis.svd_bound import svd_bound
from engine.scenario import Scenario
from explorer.planning.schedule import estimate_mechanism

pytestmark = pytest.mark.ui

SPEC = {
    "domain": {"x": {"size": 2048, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
    "mechanisms": ["identity", "h2", "hdmm-opt0"],
}
TIMEOUT_MS = 60_000


def test_bound_shows_before_the_slow_mechanism_and_its_row_shows_an_estimate(
        open_app, console_errors, screenshot):
    scenario = Scenario.from_spec(SPEC)
    bound = f"{svd_bound(scenario.workload).rmse(scenario.workload, scenario.privacy):.4g}"
    opt0 = estimate_mechanism("hdmm-opt0", scenario.workload, scenario.privacy)
    assert not opt0.starts_automatically

    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    upload_scenario(page, yaml.safe_dump(SPEC), "slow.yaml")
    expect(page.locator(".workload-stats").first).to_contain_text("2,048 cells")
    page.locator(".site-nav").get_by_role("link", name="Compare").click()

    status = page.locator(".bound-status").first
    expect(status).to_contain_text(f"SVD lower bound: {bound} per count", timeout=TIMEOUT_MS)
    queue = page.locator(".planning-queue").first
    expect(queue).to_contain_text("hdmm-opt0", timeout=TIMEOUT_MS)
    expect(queue).to_contain_text(opt0.describe())
    expect(queue).to_contain_text("press 'Plan anyway'")
    expect(queue).to_contain_text(re.compile(r"~\de\d+ operations"))
    table = page.locator(".comparison-table").first
    expect(table).to_contain_text("h2", timeout=TIMEOUT_MS)
    expect(table).not_to_contain_text("hdmm-opt0")
    screenshot("compare-order-held")

    page.locator(".plan-anyway button").first.click()
    expect(queue).to_contain_text("planning now", timeout=TIMEOUT_MS)
    # the slow mechanism is running: its row is not in the table, the bound's value is shown
    expect(status).to_contain_text(f"SVD lower bound: {bound} per count")
    expect(table).not_to_contain_text("hdmm-opt0")
    expect(table).to_contain_text("identity")
    screenshot("compare-order-planning")
    page.locator(".cancel-planning button").first.click()
    expect(page.locator(".planning-progress").first).to_be_hidden(timeout=TIMEOUT_MS)
    assert console_errors == []
