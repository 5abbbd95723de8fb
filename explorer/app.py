"""Served entry point: the multi-page app and ``python -m explorer``.

Templates are applied here and only here; the page Viewers render inline in notebooks.
Every URL path is its own Bokeh document. The pages of one user share a
:class:`~explorer.state.Session` through its id in the URL (``?s=...``), so the workload,
privacy level and finished plans follow them from page to page.

The adaptive (AIM+GReM) and census pages are written separately: they are mounted when
their modules exist, and a page whose module fails to import shows the error instead of
taking the app down.

Usage::

    python -m explorer [--address 127.0.0.1] [--port 5006]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Callable, Sequence

import panel as pn

from explorer.pages.base import PAGES, Page
from explorer.state import one_line, session_for

TITLE = "DP Workbench"
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 5006

#: Pages written by other modules: URL path -> (module, class name, menu label).
OPTIONAL_PAGES: dict[str, tuple[str, str, str]] = {
    "/adaptive": ("explorer.pages.adaptive", "AdaptivePage", "Adaptive (AIM+GReM)"),
    "/census": ("explorer.pages.census", "CensusPage", "Census hierarchy"),
}

pn.extension("tabulator", "codeeditor", notifications=True)


def _builtin(path: str) -> type[Page]:
    """The page class of a built-in path (imported on demand)."""
    from explorer.pages.builder import BuilderPage
    from explorer.pages.compare import ComparePage
    from explorer.pages.learn import LearnPage
    from explorer.pages.overview import OverviewPage
    from explorer.pages.strategy import StrategyPage
    from explorer.pages.tradeoff import TradeoffPage

    return {"/": OverviewPage, "/builder": BuilderPage, "/compare": ComparePage,
            "/strategy": StrategyPage, "/tradeoff": TradeoffPage, "/learn": LearnPage}[path]


def optional_paths() -> list[str]:
    """The optional pages whose modules exist in this checkout."""
    paths = []
    for path, (module, _, _) in OPTIONAL_PAGES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            paths.append(path)
    return paths


def menu() -> list[tuple[str, str]]:
    """(path, label) of every page in the navigation, built-in first."""
    items = [(path, label) for path, label, _ in PAGES]
    items += [(path, OPTIONAL_PAGES[path][2]) for path in optional_paths()]
    return items


def _current_sid() -> str | None:
    args = pn.state.session_args or {}
    values = args.get("s") or [b""]
    value = values[0]
    return value.decode(errors="ignore") if isinstance(value, bytes) else str(value)


def build_page(path: str, session, sid: str) -> pn.viewable.Viewable:
    """The page for ``path`` (an alert with the problem when it cannot be built)."""
    try:
        if path in OPTIONAL_PAGES:
            module_name, class_name, label = OPTIONAL_PAGES[path]
            cls = getattr(importlib.import_module(module_name), class_name)
            kwargs = {}
            if hasattr(cls, "param") and "session" in cls.param:
                kwargs["session"] = session
            if hasattr(cls, "param") and "sid" in cls.param:
                kwargs["sid"] = sid
            return cls(**kwargs)
        return _builtin(path)(session=session, sid=sid)
    except Exception as exc:  # a broken page shows its error; the app keeps serving
        return pn.pane.Alert(f"This page could not be built: {one_line(exc)}",
                             alert_type="danger", css_classes=["page-error"])


def navigation(current: str, sid: str) -> pn.pane.Markdown:
    """The sidebar menu; links keep the session id."""
    lines = []
    for path, label in menu():
        link = f"[{label}]({path}?s={sid})"
        lines.append(f"- **{link}**" if path == current else f"- {link}")
    return pn.pane.Markdown("\n".join(lines), css_classes=["site-nav"])


def page_app(path: str) -> pn.template.BootstrapTemplate:
    """The page at ``path`` inside the site template, for the current browser session."""
    requested = _current_sid()
    sid, session = session_for(requested)
    if sid != requested and pn.state.curdoc is not None:
        # Put the session id into the address bar (once the browser has synced its URL), so a
        # reload or a bookmark comes back to the same session.
        pn.state.onload(lambda: pn.state.location.update_query(s=sid))
    page = build_page(path, session, sid)
    label = dict(menu()).get(path, "")
    return pn.template.BootstrapTemplate(
        title=f"{TITLE} · {label}" if path != "/" else TITLE,
        sidebar=[navigation(path, sid)],
        main=[page],
        sidebar_width=230,
    )


def pages() -> dict[str, Callable[[], pn.viewable.Viewable]]:
    """URL path -> page factory, as ``pn.serve`` takes them."""
    return {path: (lambda p=path: page_app(p)) for path, _ in menu()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m explorer", description="Serve the DP workbench explorer."
    )
    parser.add_argument(
        "--address", default=DEFAULT_ADDRESS, help=f"address to bind (default {DEFAULT_ADDRESS})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--address`` / ``--port`` and serve every page until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port: {args.port} is not a port number (allowed 1..65535)")
    address, port = args.address, args.port
    print(f"Serving the explorer at http://{address}:{port}/", flush=True)
    pn.serve(
        pages(),
        address=address,
        port=port,
        show=False,
        title=TITLE,
        websocket_origin=[f"{address}:{port}", f"localhost:{port}"],
    )
    return 0


if __name__.startswith("bokeh"):  # `panel serve explorer/app.py`: the start page alone
    page_app("/").servable()
