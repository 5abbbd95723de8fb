"""Every page of the served explorer loads without console errors; a screenshot of each.

The pages share one explorer session (``?s=...``), visited in menu order, so the Compare page
plans the default workload and the Strategy and Privacy pages show those plans.
"""

from __future__ import annotations

import pytest
from browser_pages import app_path
from playwright.sync_api import expect

from explorer.app import menu

pytestmark = pytest.mark.ui

#: A selector that shows each built-in page is ready, and the text it must reach.
READY = {
    "/": (".mechanism-list", "identity"),
    "/builder": (".workload-stats", "queries over"),
    "/compare": (".compare-headline", "most accurate"),
    "/strategy": (".strategy-facts", "typical error per query"),
    "/tradeoff": (".tradeoff-readout", "identity"),
    "/learn": (".glossary", "Glossary"),
}
PATHS = [path for path, _ in menu()]


def screenshot_name(path: str) -> str:
    return "page-" + (path.strip("/") or "index")


@pytest.mark.parametrize("path", PATHS)
def test_page_loads_without_console_errors(path, open_app, console_errors, screenshot):
    page = open_app(app_path(path))
    if path in READY:
        selector, text = READY[path]
        expect(page.locator(selector).first).to_contain_text(text, timeout=120_000)
        expect(page.locator(".page-title").first).to_be_visible()
        # Every built-in page carries its collapsible plain-words note.
        expect(page.locator(".learn-note").first).to_contain_text("What am I looking at?")
    page.wait_for_timeout(1500)  # late renders (charts, async views) report errors too
    shot = screenshot(screenshot_name(path))
    assert shot.stat().st_size > 0
    assert console_errors == [], f"{path}: {console_errors}"
