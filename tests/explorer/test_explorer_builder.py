"""The workload builder's view-model: forms, validation next to the field, presets, files."""

from __future__ import annotations

import weakref
from types import SimpleNamespace

import panel as pn
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc

from engine.workloads import BLOCKS, GROUPS
from explorer.components.lazy_view import SeenSignal
from explorer.pages.builder import (
    LOWER_CARDS_HEIGHT,
    TABLE_PAGE_ROWS,
    BuilderPage,
    listing_table,
)
from explorer.pages.builder_forms import (
    GROUP_HELP,
    MENU_BLOCKS,
    YAML_ONLY_BLOCKS,
    BlockChoice,
    GroupForm,
    WorkloadBuilder,
    attribute_spec,
    group_summary,
)
from explorer.planning.store import PlanStore
from explorer.session import Session


@pytest.fixture
def builder() -> WorkloadBuilder:
    return WorkloadBuilder(Session(store=PlanStore()))


def add_attribute(builder, name, size, kind="numeric", labels=""):
    builder.attribute.param.update(attr_name=name, size=size, kind=kind, labels=labels)
    return builder.add_attribute()


def test_build_a_two_attribute_workload_from_scratch(builder):
    session = builder.session
    builder.start_empty()
    assert session.draft["domain"] == {} and session.draft_error.startswith("domain:")
    default_queries = session.scenario.workload.num_queries  # the last valid one stays

    assert add_attribute(builder, "age", 16) == ""
    assert session.draft_error == "workload: expected a non-empty list of query groups"
    assert session.scenario.workload.num_queries == default_queries
    assert add_attribute(builder, "sex", 2, "categorical") == ""
    assert builder.group.param.attributes.objects == ["age", "sex"]

    builder.group.attributes = ["age", "sex"]
    blocks = {b.attribute: b.block for b in builder.group.blocks}
    assert blocks == {"age": "prefix", "sex": "identity"}  # defaults follow the kind
    assert builder.add_group() == ""

    assert session.draft_error == ""
    assert session.draft["workload"] == [{"product": {"age": "prefix", "sex": "identity"}}]
    assert builder.stats() == {"queries": 32, "cells": 32, "groups": 1, "attributes": 2,
                               "terms": 1}
    assert builder.group_rows() == [{"#": 1, "queries": 32, "weight": 1.0,
                                     "group": "product of age: prefix, sex: identity"}]
    assert "age: {size: 16, kind: numeric}" in session.draft_text


def test_bad_attribute_input_is_refused_with_the_validators_message(builder):
    draft = builder.session.draft
    assert add_attribute(builder, "race", 3, "categorical", "a, b") == \
        "domain.race.labels: expected 3 labels, got 2"
    assert builder.attribute_error == "domain.race.labels: expected 3 labels, got 2"
    assert builder.session.draft == draft  # nothing was added
    assert add_attribute(builder, "age", 4) == \
        "domain.age: there is already an attribute called 'age'"
    assert add_attribute(builder, "  ", 4) == "domain: the attribute needs a name"
    assert add_attribute(builder, "race", 3, "categorical", "a, b, c") == ""
    assert builder.attribute_error == ""
    assert builder.session.draft["domain"]["race"] == {"size": 3, "kind": "categorical",
                                                      "labels": ["a", "b", "c"]}


def test_bad_group_input_is_refused_with_the_validators_message(builder):
    group = builder.group
    assert builder.add_group() == "workload: pick at least one attribute for the group"
    group.param.update(kind="affine", attributes=["age"])
    assert builder.add_group() == "workload[2].affine: expected a list of two attribute names"
    group.param.update(kind="product", attributes=["age"])
    group.blocks[0].param.update(block="range", width=99)
    assert builder.add_group() == "workload[2].product.age.width: must be 1..32, got 99"
    group.blocks[0].width = 4
    assert builder.add_group() == ""
    assert builder.session.scenario.workload.num_queries == 96 + 29


def test_removing_an_attribute_drops_the_groups_that_use_it(builder):
    builder.remove_attribute("sex")
    session = builder.session
    assert list(session.draft["domain"]) == ["age"]
    assert session.draft["workload"] == [{"product": {"age": "identity"}}]
    assert builder.message == "Removed attribute 'sex' and 1 query group(s) that used it."
    assert session.scenario.workload.num_queries == 32
    builder.remove_group(0)
    assert session.draft_error == "workload: expected a non-empty list of query groups"


def test_presets_replace_the_draft_and_keep_privacy(builder):
    builder.session.privacy.epsilon = 0.3
    builder.session.sync_draft_privacy()
    builder.preset = "cps_marginals"
    assert builder.load_preset() == ""
    assert builder.stats()["queries"] == 618_120
    assert builder.session.draft["privacy"]["epsilon"] == 0.3
    builder.param.update(preset="kway", preset_k=1)
    builder.load_preset()  # applies to the current (CPS) attributes
    assert builder.stats()["queries"] == 50 + 100 + 7 + 4 + 2


def test_upload_errors_keep_the_previous_workload(builder):
    before = builder.stats()
    message = builder.upload(b"domain: {x: 4}\nworkload: [{product: {x: prefx}}]\n",
                             "bad.yaml")
    assert message.startswith("bad.yaml: workload[0].product.x: unknown block 'prefx'")
    assert builder.upload_error == message
    assert builder.stats() == before
    assert builder.upload(b"\xff\xfe", "binary.yaml") == \
        "binary.yaml: not a text file (expected YAML or JSON)"
    assert builder.upload(b"domain: {x: 5}\nworkload: {marginals: {k: 1}}\n", "ok.yml") == ""
    assert builder.stats()["queries"] == 5 and builder.upload_error == ""


def test_workload_matrix_only_for_small_workloads(builder):
    matrix = builder.workload_matrix()
    assert matrix.shape == (96, 64) and matrix[0].sum() == 1 and matrix[62].sum() == 32
    builder.preset = "cps_marginals"
    builder.load_preset()
    assert "too large to draw" in builder.workload_matrix()


def test_form_helpers():
    assert attribute_spec("sex", 2, "categorical", "") == ("sex", 2)
    assert attribute_spec("age", 9, "numeric", "") == ("age", {"size": 9, "kind": "numeric"})
    assert BlockChoice(attribute="a", block="range", width=3).spec() == \
        {"block": "range", "width": 3}
    assert BlockChoice(attribute="a", block="circular_range", width=3).spec() == \
        {"block": "circular_range", "width": 3}
    assert "CDF" in BlockChoice(attribute="a", block="prefix").help()
    form = GroupForm()
    form.set_domain({"a": "numeric", "b": "categorical"})
    form.param.update(kind="marginals", attributes=["a", "b"], weight=2.0)
    assert form.spec() == {"marginals": {"sets": [["a", "b"]]}, "weight": 2.0}
    assert group_summary({"marginals": {"k": 2}}) == "marginals, k = 2"
    assert group_summary({"product": {}}) == "product of the total"


def test_menus_come_from_the_registries():
    # every registered block is in the menu or named as a YAML-only block, never both
    assert set(MENU_BLOCKS) | set(YAML_ONLY_BLOCKS) == set(BLOCKS)
    assert not set(MENU_BLOCKS) & set(YAML_ONLY_BLOCKS)
    assert "identity_total" in MENU_BLOCKS and "permuted" in YAML_ONLY_BLOCKS
    assert BlockChoice.param.block.objects == list(MENU_BLOCKS)
    assert BlockChoice(attribute="s", block="identity_total").help() == \
        f"*s*: {BLOCKS['identity_total'].help}"
    assert BlockChoice(attribute="s", block="identity_total").spec() == "identity_total"
    assert list(GROUP_HELP) == ["product", "marginals", "prefix_marginals", "affine", "abs_diff"]
    assert GROUP_HELP["marginals"] == GROUPS["marginals"].kinds["marginals"]
    form = GroupForm()
    form.set_domain({"a": "numeric", "b": "numeric"})
    form.param.update(kind="abs_diff", attributes=["a", "b"])
    assert form.spec() == {"abs_diff": ["a", "b"]}


def test_builder_page_renders_without_a_server():
    page = BuilderPage(session=Session(store=PlanStore()))
    view = page.__panel__()
    assert isinstance(view, pn.viewable.Viewable)
    texts = " ".join(str(p.object) for p in view.select(pn.pane.Markdown))
    # the note is folded in the page (a <details> the browser unfolds), under its title
    assert "Workload builder" in texts and '<summary>What am I looking at?</summary>' in texts
    assert view.select(pn.widgets.CodeEditor)[0].value == page.session.draft_text


def test_all_k_way_marginals_from_the_form(builder):
    session = builder.session
    builder.start_empty()
    for name, size in (("a", 2), ("b", 3), ("c", 4)):
        assert add_attribute(builder, name, size, "categorical") == ""
    builder.group.param.update(kind="marginals", k=2)
    assert builder.group.attributes == [] and builder.add_group() == ""  # no ticks needed
    assert session.draft["workload"] == [{"marginals": {"k": 2}}]
    # the 2-way tables ab, ac, bc: 6 + 8 + 12 queries over 2 * 3 * 4 cells
    assert builder.stats()["queries"] == 26 and builder.stats()["cells"] == 24
    builder.group.param.update(k=None, attributes=["a", "c"])
    assert builder.add_group() == ""
    assert session.draft["workload"][1] == {"marginals": {"sets": [["a", "c"]]}}
    builder.group.param.update(kind="product", k=2, attributes=["a"])
    assert builder.group.spec() == {"product": {"a": "identity"}}  # k is for marginals only


def test_attribute_and_group_tables_hide_no_row():
    few = [{"name": f"a{i}", "size": i} for i in range(3)]
    many = [{"name": f"a{i}", "size": i} for i in range(TABLE_PAGE_ROWS + 5)]
    short = listing_table(few, "attribute-table")
    assert short.height is None and len(short.rows) == 3  # as tall as its rows, one page
    paged = listing_table(many, "group-table")  # pages of TABLE_PAGE_ROWS rows in the browser
    assert paged.height is None and paged.page_size == TABLE_PAGE_ROWS
    assert len(paged.rows) == TABLE_PAGE_ROWS + 5


def test_served_builder_starts_each_workloads_svd_bound(monkeypatch):
    # Bound first: the workload page starts the bound of the workload it shows and of each
    # one loaded there, so Compare opens with it.
    import time

    import explorer.pages.builder as builder_module

    monkeypatch.setattr(builder_module, "served", lambda: True)
    store = PlanStore()
    session = Session(store=store)
    BuilderPage(session=session).__panel__()
    first = session.key
    session.apply_draft({"domain": {"x": {"size": 8, "kind": "numeric"}},
                         "workload": [{"product": {"x": "prefix"}}]})
    assert session.key != first
    deadline = time.monotonic() + 30
    while (store.bound(first) is None or store.bound(session.key) is None) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    # 8 prefix queries: a closed-form bound with a value; the default workload's too
    assert store.bound(session.key).rmse(session.workload, session.privacy) > 0
    assert store.bound(first) is not None


class ServedContext:
    """Enough of a Bokeh session context for ``served()`` to hold."""

    id = "builder-test"
    server_context = None
    request = SimpleNamespace(arguments={}, cookies={}, headers={})


def cards(view: pn.viewable.Viewable) -> list[str]:
    """The page's cards (their CSS class)."""
    return [card.css_classes[0] for card in view.select(pn.Card)]


def test_served_page_opens_with_the_first_screen_and_builds_the_rest_when_seen():
    # issue 30: the cards below the first screen wait for the reader, messages for a message
    page = BuilderPage(session=Session(store=PlanStore()))
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        view = page.__panel__()
        assert cards(view) == ["attributes-card"]
        assert view.select(pn.pane.Alert) == [] and view.select(pn.widgets.FileInput) == []
        [signal] = view.select(SeenSignal)
        assert signal.height == LOWER_CARDS_HEIGHT
        signal.seen = True
        assert cards(view) == ["attributes-card", "groups-card", "presets-card", "files-card"]
        assert view.select(SeenSignal) == [] and len(view.select(pn.widgets.FileInput)) == 1
        # a refused attribute: its message is put right under the form, then kept current
        assert page.add_attribute() == "domain: the attribute needs a name"
        [attributes] = [card for card in view.select(pn.Card)
                        if "attributes-card" in card.css_classes]
        alert = attributes.objects[2]
        assert isinstance(alert, pn.pane.Alert) and "attribute-form" in \
            attributes.objects[1].css_classes
        assert alert.object == "domain: the attribute needs a name" and alert.visible
        page.model.attribute_error = ""
        assert attributes.objects[2] is alert and not alert.visible
        # the first replacement's Undo appears under the header, once
        page.model.load_preset()
        undo = [b for b in view.select(pn.widgets.Button) if "undo-replace" in b.css_classes]
        assert len(undo) == 1 and undo[0].visible and view.objects[1].objects[-1] is undo[0]
