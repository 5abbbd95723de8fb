"""The served overview page renders its heading and mechanism list without console errors."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.ui


def test_overview_page_renders(open_app, console_errors, screenshot):
    page = open_app("/", wait_for=".mechanism-list")

    assert page.get_by_role("heading", name="Differential privacy workbench").is_visible()
    mechanism_list = page.locator(".mechanism-list").first
    assert mechanism_list.get_by_role("heading", name="Mechanisms").is_visible()
    # Either the registered names or the engine's problem is shown, never an empty area.
    assert mechanism_list.inner_text().strip() != "Mechanisms"

    # The comparison table (or the engine's problem) replaces the placeholder after load.
    comparison = page.locator(".comparison-table").first
    expect(comparison).not_to_contain_text("Comparing mechanisms", timeout=120_000)
    path = screenshot("overview")
    assert path.stat().st_size > 0
    assert console_errors == []
