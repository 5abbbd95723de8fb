"""What every explorer page shares: the session it shows, links that keep it, and a header.

Each page a user opens is its own Bokeh document of the one served app (``?page=...``); the
pages share one :class:`Session` through its id in the URL (``&s=...``). Links made with
:meth:`Page.href` carry it, so a user moving between pages keeps their workload, privacy level
and finished plans.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import panel as pn
import param

from explorer.components.messages import plain
from explorer.components.notes import folded_note
from explorer.session import Session

LOG = logging.getLogger(__name__)

#: URL path, menu label and one-line purpose of the built-in pages (index first).
PAGES: tuple[tuple[str, str, str], ...] = (
    ("/", "Start", "what this workbench answers, and where to begin"),
    ("/builder", "Workload", "describe your data and the counts you need"),
    ("/compare", "Compare", "which mechanism is most accurate, and how close to the best"),
    ("/strategy", "Strategy", "what the chosen mechanism actually measures"),
    ("/tradeoff", "Privacy trade-off", "what a smaller or larger budget costs in accuracy"),
    ("/learn", "Learn", "a guided tour of the classic example"),
    ("/adaptive", "Adaptive (AIM+GReM)", "data-dependent marginals on your own data"),
    ("/census", "Census hierarchy", "noisy counts that add up across geographic levels"),
    ("/release", "Release", "publish counts from your data with a planned mechanism"),
    ("/budget", "Budget", "what each data set has spent of its privacy budget, and its releases"),
)


def page_url(path: str, sid: str = "") -> str:
    """The relative link to page ``path`` of the served app, keeping session ``sid``.

    Relative (only a query string), so it works under any ``panel serve --prefix``.
    """
    query = {"page": path.strip("/")} if path.strip("/") else {}
    if sid:
        query["s"] = sid
    return "?" + urlencode(query) if query else "?"


def workload_status(session: Session, builder_link: str = "the workload page") -> str:
    """Which workload the pages use, in one line; when the builder's draft is invalid, that it
    is *not* applied and why (the pages keep the last valid workload)."""
    workload = session.workload.describe()
    if session.draft_error:
        return (f"**Draft not applied:** {plain(session.draft_error)}. Every page still uses "
                f"the last valid workload: **{workload}**. Fix the draft on {builder_link}.")
    return f"Workload in use: **{workload}**."


class Page(pn.viewable.Viewer):
    """Base of the explorer pages: a session, its id for links, a title and a learn note."""

    session = param.ClassSelector(class_=Session, doc="The user's session (view-model).")
    sid = param.String(default="", doc="Session id carried in links between pages.")

    title: str = ""
    note: str = ""

    def __init__(self, **params) -> None:
        if params.get("session") is None:
            params["session"] = Session()
        super().__init__(**params)

    def watch(self, owner: param.Parameterized, callback, names: list[str] | str) -> None:
        """Watch ``owner``'s parameters for as long as this page is open.

        The session outlives a page (it is shared by the user's pages), so watchers a page
        puts on it are removed when the page's browser session ends.
        """
        def guarded(*events: param.parameterized.Event) -> None:
            # A page's reaction must never break the session update that triggered it (the
            # session is shared with the user's other pages).
            try:
                callback(*events)
            except Exception as exc:
                LOG.exception("page watcher failed")
                if pn.state.notifications is not None:
                    pn.state.notifications.error(plain(exc),
                                                 duration=8000)

        watcher = owner.param.watch(guarded, names)
        doc = pn.state.curdoc
        if doc is not None and doc.session_context is not None:
            pn.state.on_session_destroyed(lambda context: owner.param.unwatch(watcher))

    def _workload_status(self, scenario: object, draft_error: str) -> pn.viewable.Viewable:
        text = workload_status(self.session, self.link("/builder", "the workload page"))
        if draft_error:
            return pn.pane.Alert(text, alert_type="warning", css_classes=["draft-banner"],
                                 margin=(0, 10), sizing_mode="stretch_width")
        return pn.pane.Markdown(text, css_classes=["workload-in-use"], margin=(0, 10),
                                sizing_mode="stretch_width", styles={"color": "#444"})

    def href(self, path: str) -> str:
        """A link to another page of the app that keeps this session."""
        return page_url(path, self.sid)

    def link(self, path: str, text: str) -> str:
        """A Markdown link to another page of the app."""
        return f"[{text}]({self.href(path)})"

    def header(self, intro: str = "") -> pn.viewable.Viewable:
        """The page title with an optional intro line, which workload the page uses (or the
        "draft not applied" banner) and the folded learn note."""
        title = f"# {self.title}" + (f"\n\n{intro}" if intro else "")
        header = pn.Column(
            pn.pane.Markdown(title, css_classes=["page-title"], margin=(0, 10),
                             sizing_mode="stretch_width"),
            self._workload_status(self.session.scenario, self.session.draft_error),
            sizing_mode="stretch_width")
        if self.note:
            header.append(folded_note(self.note))
        self._keep_workload_line(header, 1)
        return header

    def _keep_workload_line(self, header: pn.Column, index: int) -> None:
        """Keep the workload status at ``header[index]`` current, by a watcher of this page
        (in place: no column of its own, a model fewer on every page open)."""
        def update(*events: param.parameterized.Event) -> None:
            shown = self._workload_status(self.session.scenario, self.session.draft_error)
            if type(shown) is type(header[index]):
                header[index].object = shown.object
            else:
                header[index] = shown

        self.watch(self.session, update, ["scenario", "draft_error"])
