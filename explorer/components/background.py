"""Views that are built off the event loop whenever their inputs change; the newest build wins.

A served page must not block its event loop on a slow view (per-query variances, dense
strategy pictures, root searches). Binding a coroutine with ``pn.bind`` did that, but under
load Panel's asynchronous references went wrong in two ways: an older build could land after a
newer one, and a view could stop following its inputs altogether (the privacy conversion line
froze after an eps move and a noise switch inside 0.3 s, until the page was reloaded).
Replacing panes from a coroutine that carries another page's document (the session's other
pages change the same parameters) also sometimes sent the browser a patch naming a model it
was never sent ("reference pNNNN isn't known"), and BokehJS then drops the whole patch.

:class:`BackgroundView` does the same job explicitly: a change bumps a generation number and
queues a build on a small thread pool; a finished build is shown only if no newer request came
meanwhile, and it is put into the page on that page's own document (its next tick, under its
lock). In a notebook or a test (not served) the view is built at once, on the caller's thread.

:func:`on_page_tick` is the one way the explorer changes a served page's models from outside
that page's own callbacks (another page of the session, a table event, a worker thread);
:func:`change_page` uses it, and makes the change at once where nothing is served.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import panel as pn
import param
from panel.io.state import set_curdoc

from explorer.components.messages import plain
from explorer.components.progress import browser_connections, served

LOG = logging.getLogger(__name__)

#: Threads that build background views, shared by every page of the server. Builds hold the
#: GIL for most of their time, so more threads would not make them faster.
BUILDERS = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                                 thread_name_prefix="explorer-view")


#: Served documents whose browser has loaded them (a page is closed once it has none left).
LOADED: weakref.WeakSet[Any] = weakref.WeakSet()


def page_loaded(doc: Any) -> None:
    """Note that ``doc``'s browser has loaded it (from the page's ``onload``)."""
    LOADED.add(doc)


def page_closed(doc: Any) -> bool:
    """True when ``doc`` is a served page whose browser has loaded it and has gone since.

    Bokeh keeps a closed tab's session for a while (15 s by default). Its page still follows
    the analyst's session, and a change made on the next page (plans picked up, a new level)
    rebuilt the closed page's charts and views for nobody, on the CPU the open page needed:
    opening the strategy page after compare and trade-off rebuilt both of their charts. A
    page still loading (no connection yet) is not closed."""
    return browser_connections(doc) == 0 and doc in LOADED


def on_page_tick(doc: Any, change: Callable[[], None]) -> bool:
    """Run ``change`` on the next tick of ``doc``, a served page's document, with ``doc`` as
    Panel's current document; False (nothing scheduled) when ``doc`` is not served.

    Bokeh requires a document's lock to change its models, which a change arriving from
    elsewhere does not hold. And the current document must be the page's own: a callback
    inherits the context it was scheduled from, and a change scheduled from another page's
    callback would otherwise build its models under that page's document, with that page's
    stylesheet models, which this page's browser never received ("reference pNNNN isn't
    known": BokehJS then drops the whole patch, and whatever else it carried).
    """
    if doc is None or doc.session_context is None:
        return False
    if page_closed(doc):
        return True  # nobody sees it any more: dropped

    def run() -> None:
        with set_curdoc(doc):
            change()

    doc.add_next_tick_callback(run)
    return True


def change_page(doc: Any, change: Callable[[], None], pane: pn.viewable.Viewable | None = None
                ) -> None:
    """Make ``change`` to a page's models: on the next tick of ``doc`` when it is a served
    page's document (see :func:`on_page_tick`); otherwise at once, and then, in a notebook
    (``doc`` None), push ``pane``'s changed models to the output."""
    if on_page_tick(doc, change):
        return
    change()
    if doc is None and pane is not None:
        pane.param.trigger("object")


class BackgroundView(pn.viewable.Viewer):
    """The result of ``build(*values)``, rebuilt whenever one of ``inputs`` changes.

    Args:
        build: makes the view from the current values of ``inputs`` (in their order). It may
            return any Panel object, or a string shown as Markdown (a string updates the same
            Markdown pane in place, so text that changes often is not re-created).
        *inputs: the parameters it depends on (``session.param.selected``, ...).
        delay: seconds to wait before building, so a burst of changes (a slider being
            dragged) costs one build.
        placeholder: shown until the first build has finished (served pages only).
        **layout: parameters of the holding column (``css_classes``, ``sizing_mode``, ...).
    """

    def __init__(self, build: Callable[..., Any], *inputs: param.Parameter, delay: float = 0.0,
                 placeholder: Any = "", **layout: Any) -> None:
        super().__init__()
        self._build = build
        self._inputs = inputs
        self._delay = delay
        self._generation = 0
        self._lock = threading.Lock()
        self._markdown: pn.pane.Markdown | None = None
        self._builds: list[concurrent.futures.Future[None]] = []  # requested, maybe running
        self._doc: Any = None
        layout.setdefault("sizing_mode", "stretch_width")
        layout.setdefault("margin", 0)
        self._holder = pn.Column(**layout)
        # one watcher per owner: a change of several inputs in one update (a session's plans
        # and its selected mechanism as plans arrive) is one request, not two builds racing
        owners: dict[int, tuple[param.Parameterized, list[str]]] = {}
        for p in inputs:
            owners.setdefault(id(p.owner), (p.owner, []))[1].append(p.name)
        self._watchers = [(owner, owner.param.watch(self._changed, names))
                          for owner, names in owners.values()]
        if served():
            self._doc = pn.state.curdoc
            pn.state.on_session_destroyed(lambda context: self.close())
            self._show(placeholder)
            # The first build starts on the page's first tick, scheduled from this (the
            # building) thread: Bokeh registers a document's callbacks when its server
            # session is created, and a worker's next-tick callback added while the page is
            # still being built can be lost (the conversion line stayed empty in a CI run).
            self._doc.add_next_tick_callback(self._request)
        else:
            self._show(self._view())

    def __panel__(self) -> pn.viewable.Viewable:
        return self._holder

    @property
    def current(self) -> Any:
        """The view shown now (a Markdown pane for text)."""
        return self._holder.objects[0] if self._holder.objects else None

    def refresh(self) -> None:
        """Build again from the current values (e.g. after a change the inputs do not see)."""
        if self._doc is None:
            self._show(self._view())
        else:
            self._request()

    def wait(self, timeout: float | None = None) -> None:
        """Block until every build requested so far has finished (tests); their views reach
        the page on its next tick."""
        concurrent.futures.wait(list(self._builds), timeout)

    def close(self) -> None:
        """Stop following the inputs (the page has closed)."""
        for owner, watcher in self._watchers:
            owner.param.unwatch(watcher)
        self._watchers = []
        with self._lock:
            self._generation += 1  # builds still running are dropped

    # ----- internals ----------------------------------------------------------------------
    def _view(self) -> Any:
        """Build from the current values; a failed build shows its error instead."""
        try:
            with set_curdoc(self._doc):
                return self._build(*[getattr(p.owner, p.name) for p in self._inputs])
        except Exception as exc:  # a view must never take its page down
            LOG.exception("building a view failed")
            return pn.pane.Alert(plain(exc), alert_type="danger")

    def _changed(self, *events: param.parameterized.Event) -> None:
        self.refresh()

    def _request(self) -> None:
        if page_closed(self._doc):
            return  # the tab has gone: nobody would see the view
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._builds = [b for b in self._builds if not b.done()]
            self._builds.append(BUILDERS.submit(self._build_for, generation))

    def _current_generation(self, generation: int) -> bool:
        with self._lock:
            return generation == self._generation

    def _build_for(self, generation: int) -> None:
        if self._delay:
            time.sleep(self._delay)
        if not self._current_generation(generation):
            return  # a newer request came while this one waited
        view = self._view()
        if not self._current_generation(generation):
            return
        try:
            on_page_tick(self._doc, lambda: self._show_if_current(generation, view))
        except Exception:  # the page closed meanwhile
            return

    def _show_if_current(self, generation: int, view: Any) -> None:
        if self._current_generation(generation):
            self._show(view)

    def _show(self, view: Any) -> None:
        if isinstance(view, str):
            if self._markdown is None:
                self._markdown = pn.pane.Markdown(view, sizing_mode="stretch_width",
                                                  margin=(0, 10))
            else:
                self._markdown.object = view
            view = self._markdown
        if self.current is not view:
            self._holder.objects = [view]
