"""An invalid uploaded scenario shows the validator's message and keeps the workload."""

from __future__ import annotations

import pytest
from browser_pages import app_path, upload_scenario
from playwright.sync_api import expect

pytestmark = pytest.mark.ui

BAD_SCENARIO = b"""domain:
  age: {size: 10, kind: numeric}
workload:
  - product: {age: prefx}
"""


def test_invalid_upload_shows_the_error_and_keeps_the_previous_workload(
        open_app, console_errors, screenshot):
    page = open_app(app_path("/builder"), wait_for=".workload-stats")
    stats = page.locator(".workload-stats").first
    expect(stats).to_contain_text("96 queries over 64 cells")
    editor = page.locator(".spec-editor").first
    expect(editor).to_contain_text("sex")

    upload_scenario(page, BAD_SCENARIO, "bad.yaml")

    message = ("bad.yaml: workload[0].product.age: unknown block 'prefx' "
               "(did you mean 'prefix'?)")
    expect(page.locator(".upload-error").first).to_contain_text(message)
    expect(page.locator(".notyf").first).to_contain_text("unknown block 'prefx'")
    # The previous workload, its YAML and the attribute list all stay.
    expect(stats).to_contain_text("96 queries over 64 cells")
    expect(editor).to_contain_text("sex")
    expect(editor).not_to_contain_text("prefx")
    expect(page.locator(".attribute-table").first).to_contain_text("sex")
    screenshot("upload-invalid")
    assert console_errors == []
