"""The accessible replacements for Panel internals that axe-core flags (issue 29 item 9)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import panel as pn
import panel.template.base as template_base
import param
from bokeh.document import Document
from panel.io.state import set_curdoc
from panel.template import BootstrapTemplate

from explorer.components.design import READABLE_CSS, ReadableBootstrap
from explorer.components.site_template import (
    SIDEBAR_TAGS,
    STATE_ROOTS,
    TEMPLATE_FILE,
    SiteTemplate,
)
from explorer.components.slider import LabelledSlider
from explorer.components.table import DataTable, cell


def test_site_template_is_panels_bootstrap_template_with_only_the_sidebar_tags_changed():
    # A Panel release that changes its template fails here: copy it again and re-apply the two
    # tags and the state roots (the accessibility browser test checks the result on every
    # page).
    panels = Path(BootstrapTemplate._template).read_text(encoding="utf-8")
    ours = TEMPLATE_FILE.read_text(encoding="utf-8")
    body = ours.split("-#}\n", 1)[1]  # after the comment that says where it comes from
    expected = panels
    for theirs, mine in SIDEBAR_TAGS:
        assert panels.count(theirs) == 1 or theirs == "</ul>"
        expected = expected.replace(theirs, mine)
    assert panels.count(STATE_ROOTS[0]) == 1
    expected = expected.replace(*STATE_ROOTS)
    assert body == expected
    assert re.search(r"<(ul|li)[\s>]", body) is None


def test_site_template_renders_the_sidebar_items_in_a_div():
    nav = pn.pane.Markdown("- [Start](?)", css_classes=["site-nav"])
    template = SiteTemplate(title="t", sidebar=[nav], main=[pn.pane.Markdown("main")])
    page = io.StringIO()
    template.save(page)
    html = page.getvalue()
    sidebar = html.split('id="sidebar"', 1)[1].split('id="main"', 1)[0]
    assert '<div class="nav flex-column">' in sidebar
    assert re.search(r"<(ul|li)[\s>]", sidebar) is None
    # an alert straight in the sidebar gets Bootstrap's page colours: darkened to 4.5:1
    assert ".alert-warning { --bs-alert-color: #664d03; }" in html


def test_site_template_puts_its_design_in_force_once_per_page(monkeypatch):
    calls: list[dict] = []
    config_set = type(pn.config).set

    def counted(self, **settings):
        calls.append(settings)
        return config_set(self, **settings)

    monkeypatch.setattr(type(pn.config), "set", counted)
    template = SiteTemplate(title="t", sidebar=[pn.pane.Markdown("nav")],
                            main=[pn.Column(pn.pane.Markdown("main"))], design=ReadableBootstrap)
    doc = Document()
    with set_curdoc(doc):
        template.server_doc(doc)
    # five roots (main, sidebar, browser information, busy indicator, script area; not the
    # modal dialog's actions): Panel sets the design around each; here once for all of them
    assert len(template._render_items) == 5 and "actions" not in template._render_items
    assert [root.name for root in doc.roots if root.name == "actions"] == []
    assert calls == [{"design": ReadableBootstrap}]
    assert template_base.config is pn.config  # Panel's own config again afterwards
    with set_curdoc(doc):
        assert pn.config.design is ReadableBootstrap  # the page's design, as Panel leaves it
    main = next(obj for obj, _ in template._render_items.values() if obj in template.main)
    assert main.objects[0]._models  # built, with the design's stylesheet applied
    model = next(iter(main.objects[0]._models.values()))[0]
    assert any(READABLE_CSS in str(getattr(sheet, "css", sheet)) for sheet in model.stylesheets)


def test_data_table_sends_formatted_cells_with_their_sort_keys():
    frame = pd.DataFrame({"mechanism": ["hb", "identity"], "rmse": [1234.56789, np.nan],
                          "queries": np.array([3, 40]), "method": ["a", "b"]})
    table = DataTable(frame, titles={"rmse": "RMSE"}, formats={"rmse": ",.2f"},
                      hidden_columns=["method"])
    assert table.columns == [["mechanism", "mechanism"], ["rmse", "RMSE"],
                             ["queries", "queries"]]
    # a missing number is an empty cell sorted last; integers stay integers
    assert table.rows == [[["hb", "hb"], ["1,234.57", 1234.56789], ["3", 3]],
                          [["identity", "identity"], ["", None], ["40", 40]]]
    assert cell(float("inf"), ".3f") == ["", None] and cell(None, "") == ["", None]


def test_data_table_keeps_a_selection_only_while_its_row_exists():
    table = DataTable(pd.DataFrame({"mechanism": ["a", "b", "c"]}), selectable=True)
    table.selection = [2]
    table.value = pd.DataFrame({"mechanism": ["a", "b", "c", "d"]})
    assert table.selection == [2]
    table.value = pd.DataFrame({"mechanism": ["a"]})
    assert table.selection == [] and table.rows == [[["a", "a"]]]


def test_labelled_slider_follows_its_parameter_both_ways():
    class Level(param.Parameterized):
        exponent = param.Number(default=0.0, bounds=(-2.0, 1.0), step=0.01,
                                label="epsilon (log scale)")

    level = Level()
    slider = LabelledSlider.from_param(level.param.exponent, shown_as="power of ten")
    assert (slider.label, slider.start, slider.end, slider.step) == (
        "epsilon (log scale)", -2.0, 1.0, 0.01)
    slider.value = -1.0  # a release in the browser
    assert level.exponent == -1.0
    level.exponent = 0.5
    assert slider.value == 0.5


def test_a_slider_release_does_not_mark_the_whole_server_busy():
    # Panel's busy flag is one per process; a release must not flip it (and every tab's
    # spinner) on and off. A widget without the exemption does, as the control shows.
    seen: list[bool] = []
    watcher = pn.state.param.watch(lambda event: seen.append(event.new), "busy")
    try:
        slider = LabelledSlider(start=-2.0, end=1.0)
        slider._process_events({"value": -0.5})  # what a release in the browser sends
        assert (slider.value, seen) == (-0.5, [])
        control = pn.widgets.FloatSlider(start=-2.0, end=1.0)
        control._process_events({"value": -0.5})
        assert (control.value, seen) == (-0.5, [True, False])
    finally:
        pn.state.param.unwatch(watcher)
