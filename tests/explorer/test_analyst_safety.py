"""Issue 29 item 5, your work is safe: a preset, an upload or "start empty" asks before it
replaces a workload and can be undone in one step; an invalid draft says on every page that
it is not applied, and every page says which workload it uses."""

from __future__ import annotations

import panel as pn
import pytest

from explorer.pages.base import workload_status
from explorer.pages.builder import BuilderPage
from explorer.pages.builder_forms import WorkloadBuilder
from explorer.pages.compare import ComparePage
from explorer.pages.tradeoff import TradeoffPage
from explorer.planning.store import PlanStore
from explorer.session import Session

MINE = "domain: {x: 8, y: 3}\nworkload: [{marginals: {k: 2}}]\n"


@pytest.fixture
def builder() -> WorkloadBuilder:
    b = WorkloadBuilder(Session(store=PlanStore()))
    b.ask(lambda: b.upload(MINE, "mine.yaml"), "Loading mine.yaml")  # the default: no question
    assert b.pending == "" and b.session.workload.num_queries == 24
    # work by hand: a third attribute (2-way tables of x, y, z: 24 + 16 + 6 queries)
    b.attribute.param.update(attr_name="z", size=2, kind="categorical")
    assert b.add_attribute() == ""
    assert b.session.workload.describe().startswith("46 queries over 48 cells")
    return b


def test_a_preset_asks_first_and_can_be_undone(builder):
    session = builder.session
    builder.preset = "cps_marginals"
    builder.ask(builder.load_preset, "Loading the preset 'CPS'")
    # nothing replaced yet: the question names what would be lost
    assert session.workload.num_queries == 46
    assert builder.pending == (f"Loading the preset 'CPS' replaces your workload "
                               f"({session.workload.describe()}). Replace it? (Undo brings it "
                               "back.)")
    builder.cancel()
    assert builder.pending == "" and session.workload.num_queries == 46
    builder.ask(builder.load_preset, "Loading the preset 'CPS'")
    builder.confirm()
    assert session.workload.num_queries == 618_120
    assert builder.undo_label.startswith("Undo: back to 46 queries over 48 cells")
    builder.undo()
    assert session.workload.num_queries == 46 and builder.undo_label == ""
    assert "z:" in session.draft_text  # the user's own work
    # the hand work is back, so the next replacement asks again
    builder.ask(builder.load_preset, "Loading")
    assert builder.pending.startswith("Loading replaces your workload (46 queries")
    builder.confirm()
    # what was loaded is not hand work: replacing it asks nothing (Undo goes one step back)
    builder.ask(builder.start_empty, "Starting empty")
    assert builder.pending == "" and session.draft["domain"] == {}
    builder.undo()
    assert session.workload.num_queries == 618_120
    builder.ask(builder.load_preset, "Loading")
    assert builder.pending == ""


def test_a_refused_upload_keeps_the_undo_and_start_empty_can_be_undone(builder):
    session = builder.session
    builder.start_empty()
    assert session.draft["domain"] == {}
    assert builder.upload("domain: {x: 4}\nworkload: [{product: {x: prefx}}]\n", "bad.yaml")
    assert builder.undo_label.startswith("Undo: back to 46 queries")
    builder.undo()
    assert session.draft["domain"] == {"x": 8, "y": 3, "z": 2}
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
    assert "Every page still uses the last valid workload: **46 queries" in text
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
