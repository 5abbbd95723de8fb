"""Browser-test fixtures: a served explorer, Debian's Chromium via Playwright, console capture.

Fixtures (use them by name in a test's arguments):

- ``app_url`` (session): base URL (``http://127.0.0.1:PORT``, no trailing slash) of the explorer
  started as ``panel serve explorer/app.py --address 127.0.0.1 --port PORT`` in a subprocess
  (by :func:`explorer.server.served.serving`, which the benchmarks share); stopped at the end of the
  session. Its output goes to
  ``test-results/explorer-server.log``.
- ``browser`` (session): a Playwright ``Browser`` on ``/usr/bin/chromium`` (override with the
  ``CHROMIUM`` environment variable). Playwright's own browser builds are never used.
- ``console_errors`` (function): list of strings, one per console ``error`` message or uncaught
  page exception seen by ``page``.
- ``page`` (function): a fresh Playwright ``Page`` (own context, 1280x900) whose console errors
  land in ``console_errors``.
- ``open_app`` (function): ``open_app(path="/", wait_for=None)`` navigates ``page`` to
  ``app_url + path``, waits until Bokeh has rendered the document (and ``wait_for``, a selector,
  is visible) and returns the page.
- ``screenshot`` (function): ``screenshot(name)`` saves a full-page PNG of ``page`` as
  ``test-results/screenshots/<name>.png`` and returns the path.

Plain helpers (waits, uploads, reading tables, screenshots) are in ``browser_pages.py``.
pytest-playwright's plugin is disabled (``-p no:playwright`` in pyproject) because its
``browser``/``page`` fixtures want Playwright's downloaded browser builds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_pages import PAGE_TIMEOUT_MS, save_screenshot, start_server, wait_for_panel

from explorer.server.served import chromium_options


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    """Serve the explorer in a subprocess for the whole session; yield its base URL."""
    with start_server("explorer-server.log") as base:
        yield base


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian Chromium driven by Playwright's sync API."""
    try:
        options = chromium_options()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**options)
        try:
            yield browser
        finally:
            browser.close()


# Every console error and uncaught page error counts against a page. Nothing from outside this
# machine is loaded (BootstrapTemplate, not FastListTemplate, whose design links web fonts from
# a CDN and fails offline). "reference pNNNN isn't known" was once exempt: views built under
# another page's document sent models this browser never received (fixed by
# explorer.components.background; a regression must fail here).
@pytest.fixture
def console_errors() -> list[str]:
    """Console errors and uncaught exceptions seen by ``page`` during the test."""
    return []


@pytest.fixture
def page(browser, console_errors: list[str]) -> Iterator[object]:
    """A fresh page in its own browser context; console errors go to ``console_errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()

    def on_console(message) -> None:
        if message.type != "error":
            return
        location = message.location.get("url", "") if message.location else ""
        text = f"{message.text} [{location}]" if location else message.text
        console_errors.append(text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: console_errors.append(f"uncaught: {error}"))

    try:
        yield page
    finally:
        context.close()



@pytest.fixture
def open_app(page, app_url: str) -> Callable[..., object]:
    """``open_app(path="/", wait_for=None)``: load a page of the served app and wait for it."""

    def open_path(path: str = "/", wait_for: str | None = None):
        page.goto(app_url + path, wait_until="load")
        wait_for_panel(page, wait_for)
        return page

    return open_path


@pytest.fixture
def screenshot(page) -> Callable[[str], Path]:
    """``screenshot(name)``: save a full-page PNG of ``page``; returns the path."""
    return lambda name: save_screenshot(page, name)
