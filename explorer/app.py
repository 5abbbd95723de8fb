"""Served entry point: ``panel serve explorer/app.py`` serves every page.

``panel serve`` gives one file one URL (``/app``; ``/`` redirects there), so the page is chosen
by the ``page`` query parameter: ``/app?page=compare&s=<session id>``. Links are relative
(``?page=...``), so the app works unchanged behind ``--prefix`` and a reverse proxy, and every
``panel serve`` option (``--num-threads``, ``--basic-auth``, ``--oauth-provider``,
``--allow-websocket-origin``, ``--admin``...) applies. Templates are applied here and only here;
the page Viewers render inline in notebooks.

The pages of one user share a :class:`~explorer.session.Session` through its server-issued id
(see :mod:`explorer.server.sessions`), so the workload, privacy level and finished plans follow them
from page to page. ``python -m explorer`` is a thin wrapper around ``panel serve``
(:mod:`explorer.server.command`).

Usage::

    panel serve explorer/app.py --address 127.0.0.1 --port 5006 [panel serve options]
    python -m explorer [--address 127.0.0.1] [--port 5006] [panel serve options]
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import panel as pn

from engine import one_line
from explorer.components.background import page_loaded
from explorer.components.design import ReadableBootstrap
from explorer.components.site_template import SiteTemplate
from explorer.pages.adaptive import AdaptivePage
from explorer.pages.base import PAGES, page_url
from explorer.pages.budget import BudgetPage
from explorer.pages.builder import BuilderPage
from explorer.pages.census import CensusPage
from explorer.pages.compare import ComparePage
from explorer.pages.learn import LearnPage
from explorer.pages.overview import OverviewPage
from explorer.pages.release import ReleasePage
from explorer.pages.strategy import StrategyPage
from explorer.pages.tradeoff import TradeoffPage
from explorer.planning.store import STORE
from explorer.server import process as serverprocess
from explorer.server.latency import answer_moves_first
from explorer.server.sessions import REGISTRY, watchers_added
from explorer.session import Session

TITLE = "DP Workbench"

#: URL path -> the page's view for a session and its id. The adaptive and census pages work on
#: data of their own, not on the session's workload.
VIEWS: dict[str, Callable[[Session, str], pn.viewable.Viewable]] = {
    "/": lambda session, sid: OverviewPage(session=session, sid=sid),
    "/builder": lambda session, sid: BuilderPage(session=session, sid=sid),
    "/compare": lambda session, sid: ComparePage(session=session, sid=sid),
    "/strategy": lambda session, sid: StrategyPage(session=session, sid=sid),
    "/tradeoff": lambda session, sid: TradeoffPage(session=session, sid=sid),
    "/learn": lambda session, sid: LearnPage(session=session, sid=sid),
    "/adaptive": lambda session, sid: AdaptivePage(),
    "/census": lambda session, sid: CensusPage(),
    "/release": lambda session, sid: ReleasePage(session=session, sid=sid),
    "/budget": lambda session, sid: BudgetPage(),
}

#: Panel extensions (browser code) each page needs beyond the default ones; a page loads only
#: its own, so the others do not download the code editor (0.5 MB). Tables are plain HTML
#: (explorer.components.table), so no page loads Tabulator.
EXTENSIONS: dict[str, tuple[str, ...]] = {"/builder": ("codeeditor",)}
PAGE_EXTENSIONS: tuple[str, ...] = ()


def menu() -> list[tuple[str, str]]:
    """(path, label) of every page in the navigation."""
    return [(path, label) for path, label, _ in PAGES]


def build_page(path: str, session: Session, sid: str) -> pn.viewable.Viewable:
    """The page for ``path`` (an alert with the problem when it cannot be built)."""
    view = VIEWS.get(path)
    if view is None:
        return pn.pane.Alert(
            f"page: no page {path.strip('/')!r} (allowed: "
            f"{', '.join(p.strip('/') or 'start' for p in VIEWS)})",
            alert_type="danger",
            css_classes=["page-error"],
        )
    try:
        return view(session, sid)
    except Exception as exc:  # a broken page shows its error; the app keeps serving
        return pn.pane.Alert(
            f"This page could not be built: {one_line(exc)}",
            alert_type="danger",
            css_classes=["page-error"],
        )


def navigation(current: str, sid: str) -> pn.pane.Markdown:
    """The sidebar menu; links keep the session id."""
    lines = []
    for path, label in menu():
        link = f"[{label}]({page_url(path, sid)})"
        lines.append(f"- **{link}**" if path == current else f"- {link}")
    return pn.pane.Markdown("\n".join(lines), css_classes=["site-nav"])


def share_control(sid: str, holder: pn.Column) -> pn.widgets.Button:
    """A button that makes a read-only link to a copy of this session's scenario; the link's
    box goes into ``holder`` (the sidebar), under the button."""
    button = pn.widgets.Button(
        label="Share read-only link", css_classes=["share-session"], width=200
    )
    shown: list[pn.widgets.TextInput] = []

    def share(event) -> None:
        token = REGISTRY.share(sid)
        location = pn.state.location
        base = location.href.split("?")[0].split("#")[0] if location is not None else ""
        value = f"{base}?{urlencode({'view': token})}"
        if shown:
            shown[0].value = value
            return
        # The link's box is made on the first click, not on every page open (few share).
        shown.append(pn.widgets.TextInput(
            label="Read-only link (a copy; your session stays yours)",
            value=value,
            css_classes=["share-link"],
            width=200,
        ))
        holder.insert(holder.index(button) + 1, shown[0])

    button.on_click(share)
    return button


def sidebar(path: str, sid: str) -> pn.Column:
    """The sidebar's content as one template root (each root costs the template a model and
    a pass of its design): the menu, the share button (no column of its own: a model fewer on
    every page) and, only while there is one, the store's problem."""
    problem = store_problem()
    column = pn.Column(navigation(path, sid))
    column.append(share_control(sid, column))
    if problem.visible:
        column.append(problem)
    return column


def store_problem() -> pn.pane.Alert:
    """One line on the page while the shared session store or plan cache cannot be written (a
    read-only or full data directory, an unreachable database): the page works, from this
    process only."""
    cache = STORE.cache.error if STORE.cache is not None else ""
    text = "\n\n".join(line for line in (REGISTRY.store_error, cache) if line)
    return pn.pane.Alert(
        text, alert_type="warning", visible=bool(text), css_classes=["store-error"]
    )


def query_arg(name: str) -> str:
    """The first value of the URL query parameter ``name`` ('' when absent)."""
    values = (pn.state.session_args or {}).get(name) or [b""]
    value = values[0]
    return value.decode(errors="ignore") if isinstance(value, bytes) else str(value)


def page_app(path: str | None = None) -> pn.template.BaseTemplate:
    """The requested page inside the site template, for the current browser session.

    ``path`` defaults to the ``page`` query parameter. The session is the one named by ``s``
    when this server issued it to this user; otherwise a fresh one (started from the
    read-only link ``view`` when there is one) whose id goes into the address bar.
    """
    path = path if path is not None else "/" + query_arg("page").strip("/")
    # No BrowserInfo root (the browser's time zone, dark mode...): nothing here reads it, and
    # each template root costs a model and a pass of the design on every page open.
    pn.extension(*EXTENSIONS.get(path, PAGE_EXTENSIONS), notifications=True, browser_info=False)
    requested = query_arg("s")
    sid, session = REGISTRY.open(requested, pn.state.user, shared=query_arg("view"))
    label = dict(menu()).get(path, "")
    doc = pn.state.curdoc
    served = doc is not None and doc.session_context is not None
    if served:
        # Registered before the page's own onload callbacks, so they find it loaded.
        session.page_loading(doc)
        pn.state.onload(lambda: session.page_loaded(doc))
        pn.state.onload(lambda: page_loaded(doc))
    with watchers_added(session, session.privacy) as page_watchers:
        template = SiteTemplate(  # Bootstrap, with a valid sidebar list (issue 29)
            title=f"{TITLE} · {label}" if path != "/" else TITLE,
            sidebar=[sidebar(path, sid)],
            main=[build_page(path, session, sid)],
            sidebar_width=230,
            design=ReadableBootstrap,  # text colours with 4.5:1 contrast (issue 29)
        )
    if served:
        REGISTRY.connect(sid)
        pn.state.on_session_destroyed(REGISTRY.tab_closed(sid, page_watchers))
        pn.state.on_session_destroyed(lambda context: session.page_loaded(doc))
        if sid != requested:
            # Put the session id into the address bar (once the browser has synced its URL),
            # so a reload or a bookmark comes back to the same session.
            pn.state.onload(lambda: setattr(pn.state.location, "search", page_url(path, sid)))
    return template


def serve_page() -> None:
    """Build the requested page into the current document in one go: the document's model
    index is recomputed once, not once per template root (each root added to an unfrozen
    document walks every model already in it; a quarter of a page's CPU)."""
    doc = pn.state.curdoc
    if doc is None:
        page_app().servable(title=TITLE)
        return
    with doc.models.freeze():
        page_app().servable(title=TITLE)


if __name__.startswith("bokeh"):  # `panel serve explorer/app.py`
    serverprocess.prepare()
    answer_moves_first(pn.state.curdoc)
    serve_page()
