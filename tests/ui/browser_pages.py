"""Plain helpers of the browser tests (import them: ``from browser_pages import app_path``).

- :func:`start_server`: serve the explorer with extra ``panel serve`` options until a block ends.
- :func:`wait_for_panel`, :func:`workload_page_built`, :func:`reveal`: wait until a page is drawn,
  laid out, or built below the first screen.
- :func:`upload_scenario`, :func:`load_preset`, :func:`name_budget_upload`: what a person does on
  the Workload and Budget pages, each waiting for the server to have it.
- :func:`comparison_rows`, :func:`table_rows`, :func:`session_id`, :func:`move_eps_until_stored`:
  what a page shows, and what reached the session store.
- :func:`app_path` (the URL path of a page, optionally in a session the server issued),
  :func:`save_screenshot`.

They live in a module of their own, not in ``conftest.py``: every test directory has a
``conftest.py``, so ``from conftest import ...`` found whichever of them pytest had imported
last, and a run that collected another directory's tests after these failed to import.

Playwright locators pierce Panel's open shadow roots, so CSS selectors such as
``.mechanism-list`` (from a component's ``css_classes``) and ``get_by_role`` work directly.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from explorer.presets import PRESETS
from explorer.server.served import (
    EPS_SLIDER,
    ServerStartError,
    drag_eps_slider,
    serving,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "test-results"
SCREENSHOT_DIR = RESULTS_DIR / "screenshots"
PAGE_TIMEOUT_MS = 60_000

#: Sessions nobody is connected to are discarded after 10 s (Bokeh's default is 15-32 s), so a
#: closed tab's session ends within a test's patience.
UNUSED_SESSION_MS = 10_000


@contextlib.contextmanager
def start_server(log_name: str, *options: str, prefix: str = "") -> Iterator[str]:
    """Serve the explorer (with extra ``panel serve`` options) until the block ends.

    Yields the base URL (with ``prefix``, served through ``--prefix``); the output goes to
    ``test-results/<log_name>``. See :func:`explorer.server.served.serving`.
    """
    try:
        with serving(RESULTS_DIR / log_name, *options, prefix=prefix,
                     unused_session_ms=UNUSED_SESSION_MS) as app:
            yield app.url
    except ServerStartError as exc:
        pytest.fail(str(exc))


def wait_for_panel(page, wait_for: str | None = None) -> None:
    """Wait until Bokeh has rendered the served document (and ``wait_for`` is visible)."""
    page.wait_for_function(
        "() => window.Bokeh !== undefined && Bokeh.documents.length > 0"
        " && Bokeh.documents[0].roots().length > 0"
    )
    if wait_for is not None:
        page.locator(wait_for).first.wait_for(state="visible")


def workload_page_built(page) -> None:
    """Wait for the Workload page's workload matrix, the last part the page builds after it
    opens: input given to a box while the cards around it are still being laid out can reach
    a box about to be redrawn (and be lost), or reach the server only after the test's next
    step."""
    page.get_by_text("The workload matrix").first.wait_for(state="visible")


def upload_scenario(page, text: str | bytes, filename: str = "scenario.yaml") -> None:
    """Give the Workload page's "Upload a scenario" box the file ``filename`` holding ``text``,
    once the page is built (:func:`workload_page_built`; a file given before could be lost)."""
    workload_page_built(page)
    buffer = text.encode() if isinstance(text, str) else text
    page.locator(".spec-upload input[type=file]").first.set_input_files(
        files=[{"name": filename, "mimeType": "text/yaml", "buffer": buffer}])


def load_preset(page, key: str) -> None:
    """Load the Workload page's preset ``key`` (a key of ``explorer.presets.PRESETS``).

    Waits until the page is built (:func:`workload_page_built`), then picks the preset and
    waits until the card shows that preset's description, which the server writes once it has
    the choice: a click before that would load the preset the server still had (CI at 2e1a32e
    loaded the default's 96 queries).
    """
    workload_page_built(page)
    preset = PRESETS[key]
    page.locator(".preset-form select").first.select_option(label=preset.title)
    expect(page.locator(".presets-card").first).to_contain_text(preset.description[:60])
    page.get_by_role("button", name="Load preset").click()


def name_budget_upload(page, csv_file: Path, name: str) -> None:
    """Give the Budget page's upload box ``csv_file`` and name the data set ``name``.

    Waits first until the Name box shows the file's name (the page puts it there "until the
    steward types theirs"): typed before the upload has arrived, the text was overwritten or
    joined to it (CI at f2fb027: "townstowns census").
    """
    page.locator("input[type=file]").set_input_files(str(csv_file))
    box = page.locator(".budget-name input")
    expect(box).to_have_value(csv_file.stem)
    box.fill(name)
    box.press("Enter")


def reveal(page, timeout_s: float = 60.0) -> None:
    """Scroll each part that the page builds when the reader comes near it (a placeholder with
    the class ``on-sight-waiting``, see ``explorer.components.lazy_view``) into view, until
    every one is built, as a reader scrolling down the page would."""
    waiting = page.locator(".on-sight-waiting")
    deadline = time.monotonic() + timeout_s
    while waiting.count() and time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # replaced by its part meanwhile
            waiting.first.scroll_into_view_if_needed(timeout=5_000)
        page.wait_for_timeout(300)
    assert not waiting.count(), "parts of the page were never built when scrolled to"


def comparison_rows(page) -> dict[str, str]:
    """The comparison table's rows on ``page`` as ``{mechanism: rmse cell text}``, read from
    the mechanism cells (a text search for "hdmm" would also match "hdmm-kron")."""
    rows = page.locator(".comparison-table tbody tr")
    out = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        name = row.locator('td[data-field="mechanism"]').inner_text().strip()
        if name:
            out[name] = row.locator('td[data-field="rmse"]').inner_text().strip()
    return out


def app_path(path: str = "/", sid: str = "") -> str:
    """The URL path of page ``path`` (``/builder``...) of the served app, in session ``sid``.

    Only ids the server issued join a session (read one with :func:`session_id`); without
    one, or with a made-up one, the page opens in a fresh session.
    """
    query = {"page": path.strip("/")} if path.strip("/") else {}
    if sid:
        query["s"] = sid
    return "/app" + ("?" + urllib.parse.urlencode(query) if query else "")


def session_id(page, timeout_s: float = 30.0, requested: str | None = None) -> str:
    """The session id the server put into ``page``'s address bar (after the page loaded).

    ``requested``: the id the page was opened with; the answer is the first other id seen
    (the server replaces a refused id once the page has loaded, which takes a moment), or
    ``requested`` itself when it is still there after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
        if query.get("s") and query["s"][0] != requested:
            return query["s"][0]
        page.wait_for_timeout(100)
    if requested is not None:
        return requested
    raise AssertionError(f"no session id in the address bar: {page.url}")


def save_screenshot(page, name: str) -> Path:
    """Save a full-page PNG as ``test-results/screenshots/<name>.png``; return its path.

    The templates scroll their ``#main`` area rather than the document, so a plain full-page
    screenshot would stop at the window's bottom edge: the window is stretched to the whole
    content for the shot, then restored.
    """
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    size = page.viewport_size or {"width": 1280, "height": 900}
    content = page.evaluate(
        "() => { const main = document.querySelector('#main');"
        " return main ? main.scrollHeight + main.getBoundingClientRect().top + 20 : 0; }"
    )
    tall = int(min(max(content, size["height"]), 12_000))
    if tall > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": tall})
        page.wait_for_timeout(500)  # let responsive plots re-layout
    try:
        page.screenshot(path=str(path), full_page=True)
    finally:
        if tall > size["height"]:
            page.set_viewport_size(size)
    return path


#: Seconds a change may take to reach the shared session store (0.25 s on a quiet machine).
STORE_WRITE_S = 20.0


def move_eps_until_stored(page, url: str, store) -> tuple[str, str]:
    """Open the trade-off page at ``url``, drag eps and wait until the shared session store
    (a :class:`explorer.server.session_store.SessionStore`) holds the new level; returns the
    session id and the level line the page shows."""
    page.goto(url, wait_until="load")
    wait_for_panel(page, ".eps-slider")
    sid = session_id(page)
    level = page.locator(".tradeoff-level").first
    expect(level).to_contain_text("eps", timeout=60_000)
    before = level.inner_text()
    drag_eps_slider(page, 80)
    expect(level).not_to_have_text(before, timeout=30_000)
    deadline = time.monotonic() + STORE_WRITE_S
    row = None
    while time.monotonic() < deadline:
        row = store.load(sid, None)
        if row is not None and row.state["privacy"]["epsilon"] != 1.0:
            return sid, level.inner_text()
        time.sleep(0.2)
    stored = "no row" if row is None else f"version {row.version}, eps {row.state['privacy']}"
    raise AssertionError(
        f"the change did not reach the store in {STORE_WRITE_S:.0f} s (the page's eps slider "
        f"at {page.locator(EPS_SLIDER).first.input_value()}, level line "
        f"{level.inner_text()!r}; stored: {stored})")


#: Reads an HTML table's header cells and body rows in one step in the browser, as text.
TABLE_TEXT = """table => ({
    header: [...table.querySelectorAll("thead th")].map(cell => cell.textContent.trim()),
    rows: [...table.querySelectorAll("tbody tr")].map(
        row => [...row.querySelectorAll("td")].map(cell => cell.textContent.trim())),
})"""


def table_rows(table, tries: int = 25) -> list[dict[str, str]]:
    """The rows of the HTML table in ``table`` (a component on the page), as header -> cell
    text. Header and rows are read in one step in the browser, so a redraw cannot fall between
    them (read across one, a header once lacked its first column); an empty or unfinished table
    is read again."""
    for _ in range(tries):
        snapshot = table.locator("table").first.evaluate(TABLE_TEXT)
        header, rows = snapshot["header"], snapshot["rows"]
        if header and rows and all(len(row) == len(header) for row in rows):
            break
        table.page.wait_for_timeout(200)
    return [dict(zip(header, row, strict=True)) for row in rows]
