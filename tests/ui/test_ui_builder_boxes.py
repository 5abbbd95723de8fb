"""Issue 29 item 4 on the workload builder's group form: the k, weight and width boxes say what
is wrong next to the box and keep the typed text; "1,000" is read as 1000."""

from __future__ import annotations

import re

import pytest
from browser_pages import app_path
from playwright.sync_api import expect

pytestmark = pytest.mark.ui


def type_into(scope, selector: str, text: str) -> None:
    box = scope.locator(f"{selector} input").first
    box.fill(text)
    box.press("Enter")


def test_group_boxes_say_what_is_wrong_and_keep_the_text(open_app, console_errors):
    page = open_app(app_path("/builder"), wait_for=".groups-card")
    card = page.locator(".groups-card").first
    table = page.locator(".group-table").first
    expect(table).to_contain_text("age")  # the default workload's two groups
    weight, k = card.locator(".group-weight-problem"), card.locator(".group-k-problem")

    type_into(card, ".group-weight", "abc")
    expect(weight).to_have_text('Weight (importance): "abc" is not a number; still using 1.')
    expect(card.locator(".group-weight input").first).to_have_value("abc")
    type_into(card, ".group-k", "-5")
    expect(k).to_have_text(
        "k: all k-way marginals (marginals only): must be at least 1 (got -5); still counted "
        "as empty.")
    expect(card.locator(".group-k input").first).to_have_value("-5")

    # a group is not added while a box holds a refused entry
    card.locator(".group-attributes").get_by_role("button", name="age").click()
    card.get_by_role("button", name="Add group").click()
    expect(card.locator(".spec-error").first).to_contain_text("The group was not added.")
    expect(table.locator("tbody tr")).to_have_count(2)

    # "1,000" is read as 1000 and kept as typed; an emptied k is no k
    type_into(card, ".group-weight", "1,000")
    type_into(card, ".group-k", "")
    expect(weight).to_be_hidden()
    expect(k).to_be_hidden()
    expect(card.locator(".group-weight input").first).to_have_value("1,000")

    # a range block's width box refuses -5 (still using 2), then takes 3
    card.locator(".block-age select").first.select_option("range")
    width = card.locator(".width-age-problem")
    type_into(card, ".width-age", "-5")
    expect(width).to_have_text(
        "Width for age (range blocks): must be at least 1 (got -5); still using 2.")
    type_into(card, ".width-age", "2")
    expect(width).to_be_hidden()
    card.get_by_role("button", name="Add group").click()
    expect(card.locator(".spec-error").first).to_be_hidden()
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3, timeout=30_000)
    expect(rows.nth(2).locator('td[data-field="weight"]')).to_have_text(
        re.compile(r"^1,?000(\.0+)?$"))
    expect(rows.nth(2).locator('td[data-field="group"]')).to_have_text(
        "product of age: range")
    assert console_errors == []
