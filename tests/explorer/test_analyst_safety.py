"""Issue 29 item 5, your work is safe: a preset, an upload or "start empty" asks before it
replaces a workload and can be undone in one step; an invalid draft says on every page that
it is not applied, and every page says which workload it uses."""

from __future__ import annotations

import panel as pn
import pytest

from explorer.pages.base import workload_status
from explorer.pages.builder import BuilderPage, WorkloadBuilder
from explorer.pages.compare import ComparePage
from explorer.pages.tradeoff import TradeoffPage
from explorer.planning.store import PlanStore
from explorer.session import Session

MINE = "domain: {x: 8, y: 3}\nworkload: [{marginals: {k: 2}}]\n"


@pytest.fixture
def builder() -> WorkloadBuilder:
    b = WorkloadBuilder(Session(store=PlanStore()))
    assert b.upload(MINE, "mine.yaml") == ""
    assert b.session.workload.num_queries == 24
    return b


def test_a_preset_asks_first_and_can_be_undone(builder):
    session = builder.session
    builder.preset = "cps_marginals"
    builder.ask(builder.load_preset, "Loading the preset 'CPS'")
    # nothing replaced yet: the question names what would be lost
    assert session.workload.num_queries == 24
    assert builder.pending == (f"Loading the preset 'CPS' replaces your workload "
                               f"({session.workload.describe()}). Replace it? (Undo brings it "
                               "back.)")
    builder.cancel()
    assert builder.pending == "" and session.workload.num_queries == 24
    builder.ask(builder.load_preset, "Loading the preset 'CPS'")
    builder.confirm()
    assert session.workload.num_queries == 618_120
    assert builder.undo_label.startswith("Undo: back to 24 queries over 24 cells")
    builder.undo()
    assert session.workload.num_queries == 24 and builder.undo_label == ""
    assert "x: 8" in session.draft_text  # the user's own text, as they wrote it


def test_a_refused_upload_keeps_the_undo_and_start_empty_can_be_undone(builder):
    session = builder.session
    builder.start_empty()
    assert session.draft["domain"] == {}
    assert builder.upload("domain: {x: 4}\nworkload: [{product: {x: prefx}}]\n", "bad.yaml")
    assert builder.undo_label.startswith("Undo: back to 24 queries")
    builder.undo()
    assert session.draft["domain"] == {"x": 8, "y": 3}
    # with nothing to lose (an empty draft) there is no question
    builder.start_empty()
    builder.ask(builder.load_preset, "Loading")
    assert builder.pending == "" and session.draft["domain"] != {}


def test_an_invalid_draft_is_announced_on_every_page(builder):
    session = builder.session
    assert workload_status(session) == f"Workload in use: **{session.workload.describe()}**."
    session.draft_text = "domain: {x: 8, y: 3}\nworkload: [{marginals: {k: 7}}]\n"
    assert session.draft_error
    text = workload_status(session)
    assert text.startswith("**Draft not applied:** ")
    assert "Every page still uses the last valid workload: **24 queries" in text
    assert "Error:" not in text
    for page in (BuilderPage(session=session), ComparePage(session=session),
                 TradeoffPage(session=session)):
        header = page.header()
        banners = [p for p in header.select(pn.pane.Alert) if "draft-banner" in p.css_classes]
        assert banners and banners[0].object.startswith("**Draft not applied:**")


def test_the_builder_page_has_the_question_and_undo(builder):
    page = BuilderPage(session=builder.session)
    page.__panel__()
    page.model.preset = "cps_marginals"
    page.model.ask(page.model.load_preset, "Loading")
    assert page.model.pending
    page.model.confirm()
    assert page.model.undo_label
