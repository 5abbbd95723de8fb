"""The one-click tour loads the classic example and compares its mechanisms with the bound."""

from __future__ import annotations

import pytest
from browser_pages import app_path
from playwright.sync_api import expect

from engine.mechanisms import registry_names
from explorer.pages.learn import TOUR_MECHANISMS

pytestmark = pytest.mark.ui



def test_tour_runs_the_classic_example(open_app, console_errors, screenshot):
    page = open_app(app_path("/learn"), wait_for=".start-tour")
    page.get_by_role("button", name="Start the tour: prefix queries on 256 values").click()
    expect(page.locator(".tour-workload").first).to_contain_text(
        "256 queries over 256 cells", timeout=60_000)
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    headline = page.locator(".compare-headline").first
    expect(headline).to_contain_text("most accurate", timeout=240_000)
    expect(headline).not_to_contain_text("still planning", timeout=240_000)
    table = page.locator(".comparison-table").first
    for name in TOUR_MECHANISMS:
        if name in registry_names():
            # the table is redrawn when the last row arrives, just after the headline changes
            expect(table).to_contain_text(name, timeout=30_000)
    expect(table).not_to_contain_text("workload")  # only the tour's mechanisms are compared
    screenshot("flow-tour-compare")
    page.locator(".site-nav").get_by_role("link", name="Learn").click()
    page.get_by_role("button", name="Back to my workload").click()
    expect(page.locator(".tour-workload").first).to_contain_text("96 queries over 64 cells",
                                                                 timeout=60_000)
    assert console_errors == []
