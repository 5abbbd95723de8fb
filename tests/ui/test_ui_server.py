"""The served app as an agency runs it: every page, isolated sessions, shared plans, auth.

The explorer runs as ``panel serve explorer/app.py`` in its own subprocess per server here
(one plain, one with basic auth), so its log holds only what these tests did.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_pages import (
    RESULTS_DIR,
    app_path,
    comparison_rows,
    session_id,
    start_server,
    upload_scenario,
    wait_for_panel,
)
from playwright.sync_api import expect

from engine.mechanisms import mechanism_class, registry_names
from explorer.app import TITLE, menu

pytestmark = pytest.mark.ui

PLAN_TIMEOUT_MS = 240_000
LOG_NAME = "explorer-server-sessions.log"
#: Logged by a server process when a tab closes or a session ends badly (issue 16).
NOISY = re.compile(r"Traceback|WebSocketClosedError|AssertionError|ERROR")
#: Prefix sizes whose comparison outlasts what the tests do meanwhile on a quiet machine: on
#: 512 values every mechanism was planned in 5.5 s, before the first user could cancel, and
#: on 1,024 in 10 s, before Bokeh discarded the closed tab (10-12 s).
SHARED_SIZE = 896  # every mechanism starts at once (none estimated over a minute)
CLOSED_TAB_SIZE = 1280  # four HDMM-family plans of tens of seconds each


def scenario(size: int) -> bytes:
    """A one-attribute prefix workload on ``size`` values (HDMM plans it for seconds)."""
    return (
        f"domain: {{x: {{size: {size}, kind: numeric}}}}\n"
        f"workload: [{{product: {{x: prefix}}}}]\n"
        f"privacy: {{noise: laplace, epsilon: 1.0}}\n"
    ).encode()


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with start_server(LOG_NAME) as base:
        yield base


def log_text() -> str:
    return (RESULTS_DIR / LOG_NAME).read_text(errors="replace")


def open_page(browser, url: str, wait_for: str | None = None):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(url, wait_until="load")
    wait_for_panel(page, wait_for)
    return page


def upload(page, size: int) -> None:
    """Load the prefix workload on ``size`` values through the builder's file upload."""
    upload_scenario(page, scenario(size), f"prefix{size}.yaml")
    expect(page.locator(".workload-stats").first).to_contain_text(
        f"{size:,} queries over {size:,} cells"
    )


def test_panel_serve_serves_every_page(served):
    with urllib.request.urlopen(served + "/", timeout=30) as response:
        assert response.url == served + "/app"  # the site root leads to the app
    for path, label in menu():
        with urllib.request.urlopen(served + app_path(path), timeout=60) as response:
            html = response.read().decode()
        title = TITLE if path == "/" else f"{TITLE} · {label}"
        assert response.status == 200 and f"<title>{title}</title>" in html, path


def test_behind_a_reverse_proxy_every_page_is_served_under_its_prefix(browser):
    with start_server("explorer-server-prefix.log", prefix="/dp") as base:
        for path, _ in menu():
            with urllib.request.urlopen(base + app_path(path), timeout=60) as response:
                assert response.status == 200, path
        page = open_page(browser, base + app_path("/builder"), ".workload-stats")
        page.locator(".site-nav").get_by_role("link", name="Compare").click()
        expect(page.locator(".compare-intro").first).to_contain_text("96 queries over 64")
        assert urllib.parse.urlparse(page.url).path == "/dp/app"  # relative links keep it
        page.context.close()


def test_a_made_up_session_id_gets_a_fresh_empty_session(served, browser):
    owner = open_page(browser, served + app_path("/builder"), ".workload-stats")
    upload(owner, 48)
    owner_sid = session_id(owner)

    for made_up in ("madeup0001", owner_sid[:-1] + ("A" if owner_sid[-1] != "A" else "B")):
        guest = open_page(browser, served + app_path("/builder", made_up), ".workload-stats")
        guest_sid = session_id(guest, requested=made_up)
        assert guest_sid not in (made_up, owner_sid) and len(guest_sid) == 22
        # The default scenario, not the owner's 48-value workload.
        expect(guest.locator(".workload-stats").first).to_contain_text("96 queries over 64 cells")
        guest.context.close()
    owner.context.close()


def test_one_session_cancels_and_the_others_comparison_completes(served, browser):
    first = open_page(browser, served + app_path("/builder"), ".workload-stats")
    upload(first, SHARED_SIZE)
    first.locator(".share-session button").first.click()
    link = first.locator(".share-link input").first
    expect(link).to_have_value(re.compile(r"\?view="))
    shared = link.input_value()
    assert session_id(first) not in shared  # the link never carries the session id

    # The second user opens the read-only link: a copy of the same workload, own session.
    second = open_page(browser, shared, ".site-nav")
    assert session_id(second) != session_id(first)

    first.locator(".site-nav").get_by_role("link", name="Compare").click()
    expect(first.locator(".planning-status").first).to_contain_text("Planning", timeout=60_000)
    second.locator(".site-nav").get_by_role("link", name="Compare").click()
    # the page builds while the first session's job plans on the same two cores
    expect(second.locator(".compare-intro").first).to_contain_text(
        f"{SHARED_SIZE} queries over {SHARED_SIZE}", timeout=60_000
    )
    expect(second.locator(".planning-status").first).to_contain_text("Planning", timeout=60_000)

    first.locator(".cancel-planning button").first.click()
    # The first user's view stops waiting while the job is unfinished (the click waits for
    # the web process, which builds the second user's page meanwhile on a shared machine)...
    expect(first.locator(".planning-progress").first).to_be_hidden(timeout=30_000)
    expect(first.locator(".compare-headline").first).to_contain_text("still planning")
    # ...and the second user's comparison still completes, every mechanism planned.
    headline = second.locator(".compare-headline").first
    expect(headline).to_contain_text("most accurate", timeout=PLAN_TIMEOUT_MS)
    expect(headline).not_to_contain_text("still planning", timeout=PLAN_TIMEOUT_MS)
    table = second.locator(".comparison-table").first
    expect(table).not_to_contain_text("skipped")
    # the static comparison plans every data-independent mechanism (the data-dependent ones
    # have their own pages)
    # the table's rows reach the browser in their own patches: read until every one is there
    planned = {n for n in registry_names() if not mechanism_class(n).data_dependent}
    deadline = time.monotonic() + PLAN_TIMEOUT_MS / 1000
    while not planned <= set(rows := comparison_rows(second)) and time.monotonic() < deadline:
        second.wait_for_timeout(500)
    assert planned <= set(rows)
    first.context.close()
    second.context.close()


def test_a_closed_planning_tab_stops_its_job_and_logs_no_traceback(served, browser):
    page = open_page(browser, served + app_path("/builder"), ".workload-stats")
    upload(page, CLOSED_TAB_SIZE)
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    expect(page.locator(".planning-status").first).to_contain_text("Planning", timeout=60_000)
    page.context.close()

    # Bokeh discards a session 10-12 s after its last connection closes (serve_command).
    stopped = re.compile(
        rf"planning job \w+/laplace \({CLOSED_TAB_SIZE:,} queries over "
        rf"{CLOSED_TAB_SIZE:,} cells.*\): "
        r"cancelled after (\d+) of (\d+)"
    )
    deadline = time.monotonic() + 90
    while not stopped.search(log_text()) and time.monotonic() < deadline:
        time.sleep(1)
    match = stopped.search(log_text())
    assert match, f"the closed tab's job did not stop:\n{log_text()[-3000:]}"
    assert int(match.group(1)) < int(match.group(2))
    assert not NOISY.search(log_text()), log_text()


@pytest.fixture(scope="module")
def credentials(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "credentials.json"
    path.write_text(json.dumps({"analyst": "correct horse battery"}))
    return path


def test_basic_auth_refuses_strangers_and_admits_the_right_password(credentials, browser):
    options = ("--basic-auth", str(credentials), "--cookie-secret", "tests-only-cookie-secret")
    with start_server("explorer-server-auth.log", *options) as base:
        address = urllib.parse.urlparse(base)
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        connection.request("GET", app_path("/compare"))
        response = connection.getresponse()
        assert response.status == 302 and "/login" in response.getheader("Location", "")
        connection.close()

        context = browser.new_context()
        page = context.new_page()
        page.goto(base + app_path("/builder"))
        page.fill("input[name=username]", "analyst")
        page.fill("input[name=password]", "wrong password")
        page.click("button[type=submit]")
        expect(page.locator(".errormessage")).not_to_be_empty()
        assert "/login" in page.url

        page.fill("input[name=username]", "analyst")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        wait_for_panel(page, ".site-nav")
        page.goto(base + app_path("/builder"))  # the login cookie admits every page
        wait_for_panel(page, ".workload-stats")
        expect(page.locator(".workload-stats").first).to_contain_text("96 queries over 64")
        context.close()
