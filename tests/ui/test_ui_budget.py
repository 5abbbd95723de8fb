"""The budget ledger in the browser: register an uploaded CSV under its own name with a budget
that admits two adaptive releases, release twice from the Adaptive page (the same CSV and its
public domain) and watch the spent bar move, be refused the third time with the ledger's message
and what remains on the page, and find both releases on the Budget page."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from browser_pages import name_budget_upload, save_screenshot, start_server, wait_for_panel
from playwright.sync_api import expect

from engine.privacy import cdp_rho

pytestmark = pytest.mark.ui

RUN_TIMEOUT_MS = 180_000


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with start_server("explorer-server-budget.log") as base:
        yield base


def open_page(browser, url: str, wait_for: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(url, wait_until="load")
    wait_for_panel(page, wait_for)
    return page


def bar_value(page, selector: str) -> str | None:
    return page.locator(f"{selector} progress").first.get_attribute("value")


def test_two_releases_then_refused(browser, served: str, tmp_path) -> None:
    rho = cdp_rho(1.0, 1e-9)  # the Adaptive page's default (eps, delta) = (1, 1e-9)
    records = tmp_path / "survey.csv"
    records.write_text("a,b,c\n" + "".join(f"{i % 3},{(i // 3) % 2},{(i * 7) % 2}\n"
                                           for i in range(300)))
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"a": 3, "b": 2, "c": 2}))
    budget = open_page(browser, f"{served}/app?page=budget", ".budget-total")
    name_budget_upload(budget, records, "people survey")
    total = budget.locator(".budget-total input")
    total.fill(f"{2.5 * rho:.12g}")
    total.press("Enter")
    budget.get_by_role("button", name="Register").click()
    expect(budget.get_by_text("Registered people survey (owner anonymous) with rho=")
           ).to_be_visible()
    expect(budget.locator(".budget-bar progress").first).to_have_attribute("value", "0")

    adaptive = open_page(browser, f"{served}/app?page=adaptive", ".adaptive-status")
    adaptive.get_by_role("button", name="Uploaded CSV + domain").click()
    files = adaptive.locator("input[type=file]")
    files.nth(0).set_input_files(str(records))
    files.nth(1).set_input_files(str(domain))
    run = adaptive.get_by_role("button", name="Run")
    for spent in ("40", "80"):
        run.click()
        expect(adaptive.locator(".adaptive-budget-bar progress").first).to_have_attribute(
            "value", spent, timeout=RUN_TIMEOUT_MS)
        expect(adaptive.get_by_text(f"in {int(spent) // 40} releases;").first).to_be_visible()
        expect(run).to_be_enabled(timeout=RUN_TIMEOUT_MS)
    run.click()
    expect(adaptive.get_by_text(
        f"budget: refused: data set 'people survey' has spent {2 * rho:.6g} / requested "
        f"{rho:.6g}").first).to_be_visible(timeout=RUN_TIMEOUT_MS)
    expect(adaptive.get_by_text(f"remaining: rho = {0.5 * rho:.6g} = eps").first).to_be_visible()
    assert bar_value(adaptive, ".adaptive-budget-bar") == "80"
    save_screenshot(adaptive, "budget-refused-on-adaptive")

    budget.reload(wait_until="load")
    wait_for_panel(budget, ".budget-bar")
    expect(budget.locator(".budget-bar progress").first).to_have_attribute("value", "80")
    expect(budget.get_by_text("(rho; 2 releases)").first).to_be_visible()
    expect(budget.get_by_role("cell", name="aim-grem")).to_have_count(2)
    save_screenshot(budget, "budget-page-two-releases")
