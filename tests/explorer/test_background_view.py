"""BackgroundView and on_page_tick: slow views built off the event loop, newest first, and
page changes made under the page's own document.

A served page is stood in for by a document that records its next-tick callbacks, so the
tests decide when the "event loop" runs them.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from types import SimpleNamespace
from typing import Any

import panel as pn
import param
from panel.io.state import set_curdoc

from explorer.components import background
from explorer.components.background import (
    BackgroundView,
    on_page_tick,
    page_closed,
    page_loaded,
)


class Inputs(param.Parameterized):
    level = param.Number(default=1.0)
    noise = param.String(default="gaussian")


class ServedDocument:
    """The parts of a served Bokeh document these components use."""

    def __init__(self) -> None:
        self.session_context = SimpleNamespace(
            request=SimpleNamespace(arguments={}, cookies={}, headers={}))
        self.ticks: list[Any] = []
        self.destroyed: list[Any] = []

    def add_next_tick_callback(self, callback: Any) -> None:
        self.ticks.append(callback)

    def on_session_destroyed(self, callback: Any) -> None:
        self.destroyed.append(callback)

    def run_ticks(self) -> None:
        ticks, self.ticks = self.ticks, []
        for tick in ticks:
            tick()


def text_of(view: BackgroundView) -> str:
    return view.current.object


def test_unserved_views_are_built_at_once_and_text_updates_one_pane_in_place():
    inputs = Inputs()
    view = BackgroundView(lambda level, noise: f"{noise} at {level:g}", inputs.param.level,
                          inputs.param.noise, css_classes=["probe"])
    first = view.current
    assert text_of(view) == "gaussian at 1"
    inputs.param.update(level=2.5, noise="laplace")
    assert text_of(view) == "laplace at 2.5"
    assert view.current is first  # the same Markdown pane, its text replaced
    assert "probe" in pn.panel(view).css_classes
    inputs.level = 3.0
    assert text_of(view) == "laplace at 3"


def test_unserved_views_replace_panes_and_show_a_build_error_without_raising():
    inputs = Inputs()

    def build(level: float) -> pn.viewable.Viewable:
        if level < 0:
            raise ValueError("level must be positive")
        return pn.pane.Markdown(f"level {level:g}")

    view = BackgroundView(build, inputs.param.level)
    assert view.current.object == "level 1"
    inputs.level = -1.0
    assert isinstance(view.current, pn.pane.Alert)
    assert view.current.object == "level must be positive"  # no exception class name
    inputs.level = 4.0
    assert view.current.object == "level 4"


def test_served_views_show_only_the_newest_build_on_their_own_document():
    inputs = Inputs()
    doc = ServedDocument()
    release_old = threading.Event()
    seen_documents: list[Any] = []

    def build(level: float) -> str:
        seen_documents.append(pn.state.curdoc)
        if level == 2.0:  # an older request that outlasts the newer one
            release_old.wait(10)
        return f"level {level:g}"

    with set_curdoc(doc):
        view = BackgroundView(build, inputs.param.level, placeholder="computing...")
        assert text_of(view) == "computing..."  # nothing is built on the event loop
    assert seen_documents == [] and len(doc.ticks) == 1  # the first build waits for a tick
    doc.run_ticks()
    view.wait(10)
    doc.run_ticks()
    assert text_of(view) == "level 1"

    inputs.level = 2.0  # its build blocks ...
    inputs.level = 3.0  # ... while this one finishes
    for _ in range(1000):
        doc.run_ticks()
        if text_of(view) == "level 3":
            break
        time.sleep(0.01)
    assert text_of(view) == "level 3"
    release_old.set()
    view.wait(10)
    doc.run_ticks()
    assert text_of(view) == "level 3"  # the older build finished last and was dropped
    assert seen_documents and all(d is doc for d in seen_documents)

    for destroyed in doc.destroyed:  # the page closes: the view stops following its inputs
        destroyed(None)
    inputs.level = 5.0
    view.wait(10)
    doc.run_ticks()
    assert text_of(view) == "level 3"


def test_a_delayed_view_builds_once_for_a_burst_of_changes():
    inputs = Inputs()
    doc = ServedDocument()
    built: list[float] = []

    def build(level: float) -> str:
        built.append(level)
        return f"level {level:g}"

    with set_curdoc(doc):
        view = BackgroundView(build, inputs.param.level, delay=0.2)
    doc.run_ticks()  # the page's first tick requests the first build
    for level in (2.0, 3.0, 4.0):
        inputs.level = level
    view.wait(10)
    doc.run_ticks()
    assert text_of(view) == "level 4"
    assert built == [4.0]  # the first request and the two in between were superseded


def test_on_page_tick_runs_the_change_under_its_own_document():
    page, other = ServedDocument(), ServedDocument()
    current: list[Any] = []
    with set_curdoc(other):  # e.g. scheduled from the session's other page
        assert on_page_tick(page, lambda: current.append(pn.state.curdoc))
    assert current == [] and other.ticks == []
    page.run_ticks()
    assert current == [page]
    assert not on_page_tick(None, lambda: current.append("now"))
    assert current == [page]  # not served: the caller runs the change itself


def test_a_closed_tabs_page_is_not_changed_but_a_loading_one_is():
    page = ServedDocument()
    page.session_context.session = SimpleNamespace(connection_count=0)
    done: list[str] = []
    # still loading: no connection yet, and the change must reach it
    assert on_page_tick(page, lambda: done.append("loading"))
    page_loaded(page)
    page.session_context.session.connection_count = 1
    assert on_page_tick(page, lambda: done.append("open"))
    page.run_ticks()
    assert done == ["loading", "open"] and not page_closed(page)
    page.session_context.session.connection_count = 0  # the tab has gone
    assert page_closed(page)
    assert on_page_tick(page, lambda: done.append("closed"))  # taken, and dropped
    page.run_ticks()
    assert done == ["loading", "open"]
    inputs = Inputs()
    with set_curdoc(page):
        view = BackgroundView(lambda level, noise: f"{level} {noise}", inputs.param.level,
                              inputs.param.noise)
    view.refresh()
    view.wait(5)
    page.run_ticks()
    assert view.current.object == ""  # the placeholder: nothing built for nobody


class HeldBuilders:
    """Builder threads that run nothing until told: the requests made can be counted."""

    def __init__(self) -> None:
        self.queued: list[Any] = []

    def submit(self, work: Any, *args: Any) -> Any:
        future: Any = concurrent.futures.Future()
        self.queued.append((future, lambda: work(*args)))
        return future

    def run(self) -> None:
        queued, self.queued = self.queued, []
        for future, work in queued:
            future.set_result(work())


def test_one_update_of_two_inputs_is_one_build(monkeypatch):
    builders = HeldBuilders()
    monkeypatch.setattr(background, "BUILDERS", builders)
    inputs = Inputs()
    doc = ServedDocument()
    built: list[tuple[float, str]] = []

    def build(level: float, noise: str) -> str:
        built.append((level, noise))
        return f"{level:g} {noise}"

    with set_curdoc(doc):
        view = BackgroundView(build, inputs.param.level, inputs.param.noise)
    doc.run_ticks()  # the first build is requested on the page's first tick
    builders.run()
    inputs.param.update(level=2.0, noise="laplace")  # as plans and selection arrive together
    assert len(builders.queued) == 1  # one request, not one per input
    builders.run()
    doc.run_ticks()
    assert built == [(1.0, "gaussian"), (2.0, "laplace")]
    assert view.current.object == "2 laplace"
