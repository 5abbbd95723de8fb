"""Pages build what is hidden only when it is shown (issue 30: a page's web-process CPU)."""

from __future__ import annotations

import weakref
from types import SimpleNamespace

import panel as pn
from bokeh.document import Document
from panel.io.state import set_curdoc

from explorer.components.lazy_view import (
    Later,
    SeenSignal,
    laid_out,
    lazy_card,
    on_sight,
    on_sight_in_turn,
    once_true,
)
from explorer.components.markdown import LONGEST, Markdown
from explorer.components.progress import PlanningProgress
from explorer.pages.census import CensusPage
from explorer.pages.compare import ComparePage
from explorer.pages.strategy import FIRST_VIEWS, StrategyPage
from explorer.planning.store import PlanStore
from explorer.session import Session

PREFIX = {"domain": {"x": {"size": 16, "kind": "numeric"}},
          "workload": [{"product": {"x": "prefix"}}],
          "privacy": {"noise": "laplace", "epsilon": 1.0},
          "mechanisms": ["identity", "h2"]}


def test_a_lazy_card_builds_its_content_once_on_the_first_expand():
    built: list[int] = []

    def build() -> pn.pane.Markdown:
        built.append(1)
        return pn.pane.Markdown("inside")

    card = lazy_card(build, title="More")
    assert card.collapsed and card.objects == [] and built == []
    card.collapsed = False
    assert built == [1] and card.objects[0].object == "inside"
    card.collapsed = True
    card.collapsed = False
    assert built == [1] and len(card.objects) == 1


def test_the_compare_pages_python_snippet_is_made_when_its_card_opens():
    view = ComparePage(session=Session(PREFIX, store=PlanStore())).__panel__()
    card = next(c for c in view.select(pn.Card)
                if c.title == "Python that reproduces this comparison")
    assert card.objects == []
    card.collapsed = False
    code = next(p for p in card.select(pn.pane.Markdown) if "python-snippet" in p.css_classes)
    assert code.object.startswith("```python\n") and "h2" in code.object


def test_census_charts_are_drawn_only_once_there_are_results():
    page = CensusPage(synthetic_spec="levels=1,2;groups=50;max_size=4;seed=1",
                      variants=["dp"], trials=1, seed=3)
    charts = page.__panel__().select(pn.pane.HoloViews)
    assert len(charts) == 3 and all(chart.object is None for chart in charts)
    page.run()
    assert page.results and all(chart.object is not None for chart in charts)


class ServedContext:
    """Enough of a Bokeh session context for ``served()`` to hold."""

    id = "laziness-test"
    server_context = None
    request = SimpleNamespace(arguments={}, cookies={}, headers={})


def test_a_part_on_sight_is_built_once_when_its_placeholder_is_seen():
    built: list[int] = []

    def build() -> pn.pane.Markdown:
        built.append(1)
        return pn.pane.Markdown("below the fold")

    # not served (a notebook, a test): built at once, no placeholder
    column = on_sight(build, 300, css_classes=["part"])
    assert built == [1] and column.objects[0].object == "below the fold"
    assert column.css_classes == ["part"]
    # served: a placeholder of the given height until the browser says it came near
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        column = on_sight(build, 300)
    (signal,) = column.objects
    assert isinstance(signal, SeenSignal) and signal.height == 300
    assert "on-sight-waiting" in signal.css_classes and built == [1]
    signal.seen = True
    assert built == [1, 1] and column.objects[0].object == "below the fold"
    signal.seen = False
    signal.seen = True
    assert built == [1, 1]


def recorded_part(built: list[str]):
    """A factory of parts: ``part(name)`` builds a Markdown pane of ``name`` and records the
    build in ``built``."""
    def part(name: str):
        def build() -> pn.pane.Markdown:
            built.append(name)
            return pn.pane.Markdown(name)
        return build
    return part


def test_parts_on_sight_in_turn_open_with_one_placeholder_and_build_one_by_one():
    built: list[str] = []
    part = recorded_part(built)

    parts = [(part("a"), 100), (part("b"), 200), (part("c"), 300)]
    # not served: every part at once, in order
    column = on_sight_in_turn(parts)
    assert built == ["a", "b", "c"]
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    built.clear()
    with set_curdoc(doc):
        column = on_sight_in_turn(parts)
        (signal,) = column.objects
        assert isinstance(signal, SeenSignal) and signal.height == 600 and built == []
        signal.seen = True  # the first part, and one placeholder for the other two under it
        assert built == ["a"]
        (held,) = column.objects
        first, rest = held.objects
        assert first.object == "a"
        (signal,) = rest.objects
        assert isinstance(signal, SeenSignal) and signal.height == 500
        signal.seen = True
        assert built == ["a", "b"]
        (signal,) = rest.objects[0].objects[1].objects
        assert signal.height == 300
        signal.seen = True
        assert built == ["a", "b", "c"]
        assert rest.objects[0].objects[1].objects[0].object == "c"


def test_a_part_once_true_is_built_the_first_time_its_condition_holds():
    page = CensusPage(synthetic_spec="levels=1,2;groups=50;max_size=4;seed=1",
                      variants=["dp"], trials=1, seed=3)
    has_results = page.param.results.rx.pipe(bool)
    built: list[int] = []

    def build() -> pn.pane.Markdown:
        built.append(1)
        return pn.pane.Markdown("results")

    # not served: built at once
    assert once_true(build, has_results).objects[0].object == "results" and built == [1]
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        column = once_true(build, has_results)
    assert column.objects == [] and built == [1]
    page.results = [{"variant": "dp"}]
    assert built == [1, 1] and column.objects[0].object == "results"
    page.results = []
    page.results = [{"variant": "dp"}, {"variant": "cdp"}]
    assert built == [1, 1] and len(column.objects) == 1


def test_a_later_part_takes_its_place_only_once_its_condition_holds():
    page = CensusPage(synthetic_spec="levels=1,2;groups=50;max_size=4;seed=1",
                      variants=["dp"], trials=1)
    built: list[str] = []
    part = recorded_part(built)

    first, last = pn.pane.Markdown("first"), pn.pane.Markdown("last")
    results = Later(part("results"), page.param.results.rx.pipe(bool))
    error = Later(part("error"), page.param.error.rx.bool())
    # not served: built at once, in order
    column = laid_out(pn.Column, first, error, results, last)
    assert [o.object for o in column.objects] == ["first", "error", "results", "last"]
    built.clear()
    views: list[int] = []

    class Box(pn.viewable.Viewer):  # a component whose view is made by __panel__
        def __panel__(self) -> pn.pane.Markdown:
            views.append(1)
            return pn.pane.Markdown("last")

    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        column = laid_out(pn.Row, first, error, results, Box(), margin=0)
    assert isinstance(column, pn.Row) and column.margin == 0
    assert column.objects[0] is first and len(column.objects) == 2
    assert built == []  # nothing stands in for the parts not built
    page.results = [{"variant": "dp"}]
    assert [o.object for o in column.objects] == ["first", "results", "last"]
    page.error = "trials: must be a whole number"
    assert [o.object for o in column.objects] == ["first", "error", "results", "last"]
    page.results = []
    page.results = [{"variant": "dp"}]  # true again: not built twice
    assert built == ["results", "error"] and len(column.objects) == 4
    assert views == [1]  # the same view of the box throughout (its models are kept)


def test_the_served_census_page_builds_its_results_only_once_there_are_some():
    page = CensusPage(synthetic_spec="levels=1,2;groups=50;max_size=4;seed=1",
                      variants=["dp"], trials=1, seed=3)
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        view = page.__panel__()
    assert view.select(pn.pane.HoloViews) == [] and view.select(pn.widgets.FileInput) == []
    page.run()
    assert len(view.select(pn.pane.HoloViews)) == 3
    assert all(chart.object is not None for chart in view.select(pn.pane.HoloViews))
    assert any("census-results" in p.css_classes for p in view.select(pn.pane.DataFrame))


def test_the_strategy_page_draws_the_first_views_and_waits_with_the_rest():
    session = Session(PREFIX, store=PlanStore())
    session.compare_now()
    doc, context = Document(), ServedContext()
    doc._session_context = weakref.ref(context)
    page = StrategyPage(session=session)
    with set_curdoc(doc):
        views = page._views("h2", session.plans)
    drawn, waiting = views.objects[:FIRST_VIEWS], views.objects[FIRST_VIEWS]
    assert len(drawn) == FIRST_VIEWS
    # the other views wait behind one placeholder of their heights (AᵀA's and more)
    (signal,) = waiting.objects
    assert isinstance(signal, SeenSignal) and signal.height > 480 + 200
    assert not any(isinstance(part.objects[0], SeenSignal)
                   for part in views.objects[FIRST_VIEWS + 1:])
    assert drawn[0].select(pn.pane.DataFrame)  # the plan's numbers
    assert drawn[1].select(pn.pane.HoloViews)  # the picture of A


def test_the_planning_row_polls_only_while_a_browser_is_connected():
    view = PlanningProgress(session=Session(PREFIX, store=PlanStore()))
    assert view._layout.objects == []  # no job shown yet: an empty hidden row
    looks: list[int] = []
    view.follow_elsewhere = lambda: looks.append(1)  # what a tick does without a job here
    connection = SimpleNamespace(connection_count=1)
    view._doc = SimpleNamespace(session_context=SimpleNamespace(session=connection))
    view.tick()
    assert looks == [1] and view.connected()
    connection.connection_count = 0  # the tab closed; Bokeh keeps its session a while
    stopped: list[int] = []
    view._callback = SimpleNamespace(stop=lambda: stopped.append(1))
    view.tick()
    assert looks == [1] and not view.connected()
    assert stopped == [1] and view._callback is None  # no more polls for a closed page
    view._doc = None  # not served (a notebook): always polls
    view.tick()
    assert looks == [1, 1]


def test_a_markdown_text_is_parsed_once_per_process(monkeypatch):
    text = "**Noise** is added *once* per measurement (a text no other test uses)."
    theirs = pn.pane.Markdown(text).get_root().text
    assert Markdown(text).get_root().text == theirs  # the same HTML as Panel's own pane
    parsed: list[str] = []
    panels = pn.pane.Markdown._transform_object

    def counted(self, obj):
        parsed.append(obj)
        return panels(self, obj)

    monkeypatch.setattr(pn.pane.Markdown, "_transform_object", counted)
    assert Markdown(text).get_root().text == theirs and parsed == []  # reused
    Markdown(text, hard_line_break=True).get_root()  # another setting: parsed again
    long = "x" * (LONGEST + 1)
    Markdown(long).get_root()
    Markdown(long).get_root()  # too long to keep: parsed each time
    assert parsed == [text, long, long]
