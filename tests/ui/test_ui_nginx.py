"""nginx in front of two explorer servers (the recipe for several machines in docs/serving.md).

Two ``panel serve explorer/app.py`` processes on free ports share one data directory (the
session store and the plan cache in it); Debian's nginx balances round robin over them, with
no stickiness, using the configuration of :mod:`explorer.server.nginx` (the one the docs
print). A session's eps, moved on the trade-off page, must survive reloads through nginx, and
nginx's access log must show that the session's page was served by both servers (its
websocket, where the page's document lives, reached each of them).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import pytest
from browser_pages import (
    RESULTS_DIR,
    UNUSED_SESSION_MS,
    app_path,
    move_eps_until_stored,
    session_id,
    wait_for_panel,
)
from playwright.sync_api import expect

from explorer.server.nginx import NGINX, running_nginx
from explorer.server.served import ADDRESS, ServerStartError, free_port, serving
from explorer.server.session_store import SessionStore

pytestmark = [pytest.mark.ui, pytest.mark.slow]

#: Reloads through nginx after the change (round robin alternates, so both servers take some).
RELOADS = 4



def tradeoff_level(page, url: str, sid: str) -> tuple[str, str]:
    """Open the trade-off page of session ``sid`` through ``url``; return its level line and
    the server that answered the page (nginx's ``X-Upstream``), after checking that the page
    kept the session."""
    response = page.goto(url + app_path("/tradeoff", sid), wait_until="load")
    wait_for_panel(page, ".site-nav")
    assert session_id(page, timeout_s=3.0, requested=sid) == sid, "the session was lost"
    level = page.locator(".tradeoff-level").first
    expect(level).to_contain_text("eps", timeout=60_000)
    return level.inner_text(), response.headers.get("x-upstream", "")


def test_nginx_round_robin_serves_a_session_from_both_servers(browser):
    if not Path(NGINX).exists():
        pytest.fail(f"no nginx at {NGINX}: run `make nginx`")
    nginx_port = free_port()
    origin = f"{ADDRESS}:{nginx_port}"
    with tempfile.TemporaryDirectory(prefix="dpwb-shared-") as shared, \
            contextlib.ExitStack() as stack:
        environment = {"DPWB_DATA_DIR": shared, "EXPLORER_PLANNING": "threads"}
        try:
            apps = [stack.enter_context(serving(
                RESULTS_DIR / f"explorer-nginx-{n}.log", "--allow-websocket-origin", origin,
                unused_session_ms=UNUSED_SESSION_MS, environment=environment))
                for n in (1, 2)]
        except ServerStartError as exc:
            pytest.fail(str(exc))
        backends = [app.url.removeprefix("http://") for app in apps]
        nginx = stack.enter_context(running_nginx(ADDRESS, nginx_port, backends))
        store = SessionStore(f"sqlite:///{shared}/ledger.sqlite")
        stack.callback(store.close)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        stack.callback(context.close)
        context.set_default_timeout(60_000)
        page = context.new_page()

        sid, moved = move_eps_until_stored(page, nginx.url + app_path("/tradeoff"), store)

        answered = []
        for reload in range(RELOADS):
            if reload % 2:
                # One request more through nginx: a reload makes a fixed number of requests,
                # so without it round robin could send every websocket to the same server.
                page.request.get(nginx.url + "/favicon.ico")
            shown, upstream = tradeoff_level(page, nginx.url, sid)
            assert shown == moved
            answered.append(upstream)
        assert set(answered) <= set(backends), f"X-Upstream: {answered}"
        page.goto("about:blank")  # closes the last page's websocket, so nginx logs it
        deadline = time.monotonic() + 10
        while len(nginx.upstreams("/app/ws")) < RELOADS + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        sockets = nginx.upstreams("/app/ws")
        pages = nginx.upstreams("/app?")
        assert set(sockets) == set(backends), f"websockets served by {sockets}"
        assert set(pages) <= set(backends), f"pages served by {pages}"
