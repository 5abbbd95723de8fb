"""The start page, the served entry point (pages, navigation, the serve command) and charts."""

from __future__ import annotations

import numpy as np
import panel as pn

from engine.mechanisms import registry_names
from explorer import app
from explorer.components.charts import (
    BOUND_COLOR,
    PALETTE,
    mechanism_colors,
    weights_bars,
)
from explorer.components.heatmap import MAX_ENTRIES, matrix_heatmap, too_big
from explorer.pages.base import PAGES
from explorer.pages.overview import OverviewPage, mechanism_frame
from explorer.planning.store import PlanStore
from explorer.session import Session


def _texts(viewable) -> str:
    return "\n".join(str(p.object) for p in viewable.select(pn.pane.Markdown))


def test_start_page_lists_the_registry_and_the_way_in():
    frame = mechanism_frame()
    assert list(frame["mechanism"]) == list(registry_names())
    view = OverviewPage(session=Session(store=PlanStore()), sid="abc").__panel__()
    text = _texts(view)
    assert "# Differential privacy workbench" in text
    assert "[Compare](?page=compare&s=abc)" in text
    assert "[Take the guided tour](?page=learn&s=abc)" in text
    assert "Not compared yet" in text


def test_start_page_shows_engine_failures_instead_of_raising(monkeypatch):
    def broken():
        raise ImportError("cannot import name 'registry_names'")

    monkeypatch.setattr("explorer.pages.overview.mechanism_frame", broken)
    view = OverviewPage(session=Session(store=PlanStore())).__panel__()
    alerts = [str(a.object) for a in view.select(pn.pane.Alert)]
    assert alerts == ["Engine not ready: cannot import name 'registry_names'"]


def test_every_page_is_served_in_a_template():
    assert [path for path, _ in app.menu()] == [path for path, _, _ in PAGES]
    assert set(app.VIEWS) == {path for path, _, _ in PAGES}
    assert {"/adaptive", "/census"} <= set(app.VIEWS)  # registered like the others
    for path, _, _ in PAGES:
        page = app.build_page(path, Session(store=PlanStore()), "sid")
        assert isinstance(page, pn.viewable.Viewer), path
    template = app.page_app("/compare")
    assert isinstance(template, pn.template.BaseTemplate)


def test_a_page_that_fails_shows_its_error_and_unknown_pages_name_the_choices(monkeypatch):
    def broken(session, sid):
        raise AttributeError("no such widget")

    monkeypatch.setitem(app.VIEWS, "/compare", broken)
    page = app.build_page("/compare", Session(store=PlanStore()), "sid")
    assert isinstance(page, pn.pane.Alert)
    assert page.object == "This page could not be built: AttributeError: no such widget"
    missing = app.build_page("/nowhere", Session(store=PlanStore()), "sid")
    assert missing.object.startswith("page: no page 'nowhere' (allowed: start, builder, ")


def test_navigation_keeps_the_session_id():
    nav = app.navigation("/compare", "abc123")
    assert "- **[Compare](?page=compare&s=abc123)**" in nav.object
    assert "- [Workload](?page=builder&s=abc123)" in nav.object
    assert "- [Start](?s=abc123)" in nav.object


# ----- charts and heat maps ---------------------------------------------------------------------
def test_each_mechanism_keeps_one_colour():
    colors = mechanism_colors()
    assert list(colors) == list(registry_names())
    assert len(set(colors.values())) == len(colors)
    assert mechanism_colors(["not-registered"])["not-registered"] in PALETTE
    assert BOUND_COLOR not in colors.values()


def test_weights_bars():
    import holoviews as hv

    assert isinstance(weights_bars({"a": 1.0}, "w"), hv.Bars)


def test_heatmap_keeps_row_zero_at_the_top_and_refuses_huge_matrices():
    image = matrix_heatmap(np.tril(np.ones((3, 4))), "t")
    assert image.dimension_values(2, flat=False)[0].tolist() == [1, 0, 0, 0]
    assert image.opts.get().kwargs["invert_yaxis"] is True
    assert image.opts.get().kwargs["cmap"] == "viridis"
    assert matrix_heatmap(-np.eye(2), "t").opts.get().kwargs["cmap"] == "RdBu_r"
    assert too_big((10, 10)) == ""
    assert "too large" in too_big((MAX_ENTRIES, 2))
