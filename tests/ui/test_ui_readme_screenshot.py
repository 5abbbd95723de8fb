"""The README's picture of the Compare page (``assets/compare-page.png``) is taken here, from
the served app, so it always shows the current page: a workload of age prefixes by sex, five
mechanisms planned, the SVD bound first."""

from __future__ import annotations

import struct

import pytest
import yaml
from browser_pages import REPO_ROOT, app_path, upload_scenario
from playwright.sync_api import expect

from engine import Scenario, svd_bound

pytestmark = pytest.mark.ui

SPEC = {
    "domain": {"age": {"size": 64, "kind": "numeric"}, "sex": {"size": 2, "labels": ["F", "M"]}},
    "workload": [{"product": {"age": "prefix", "sex": "identity"}},
                 {"product": {"age": "identity"}}],
    "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1.0e-6},
    "mechanisms": ["identity", "h2", "wavelet", "hdmm", "eigen-design"],
}
PICTURE = REPO_ROOT / "assets" / "compare-page.png"
TIMEOUT_MS = 120_000
SIZE = {"width": 1280, "height": 1000}


def test_the_readme_screenshot_of_the_compare_page(open_app, console_errors) -> None:
    scenario = Scenario.from_spec(SPEC)
    bound = f"{svd_bound(scenario.workload).rmse(scenario.workload, scenario.privacy):.4g}"
    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    upload_scenario(page, yaml.safe_dump(SPEC), "readme.yaml")
    expect(page.locator(".workload-stats").first).to_contain_text("128 cells")
    page.locator(".site-nav").get_by_role("link", name="Compare").click()
    expect(page.locator(".bound-status").first).to_contain_text(
        f"SVD lower bound: {bound} per count", timeout=TIMEOUT_MS)
    table = page.locator(".comparison-table").first
    for name in SPEC["mechanisms"]:
        expect(table).to_contain_text(name, timeout=TIMEOUT_MS)
    page.set_viewport_size(SIZE)  # tall enough for the chart's axis labels
    page.wait_for_timeout(1_000)  # the chart's re-layout
    PICTURE.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(PICTURE))
    header = PICTURE.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (SIZE["width"], SIZE["height"])
    assert console_errors == []
