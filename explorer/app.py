"""Served entry point: page factories and ``python -m explorer``.

Templates are applied here and only here; the page Viewers render inline in notebooks.

Usage::

    python -m explorer [--address 127.0.0.1] [--port 5006]
    panel serve explorer/app.py        # serves the overview page alone
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import panel as pn

from explorer.pages.overview import OverviewPage

TITLE = "DP Workbench"
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 5006


def overview_app() -> pn.template.BootstrapTemplate:
    """The overview page inside the site template (one fresh instance per session)."""
    return pn.template.BootstrapTemplate(title=TITLE, main=[OverviewPage()])


def pages() -> dict[str, Callable[[], pn.viewable.Viewable]]:
    """URL path -> page factory, as ``pn.serve`` takes them."""
    return {"/": overview_app}


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
    print(f"Serving at http://{address}:{port}/", flush=True)
    pn.serve(
        pages(),
        address=address,
        port=port,
        show=False,
        title=TITLE,
        websocket_origin=[f"{address}:{port}", f"localhost:{port}"],
    )
    return 0


if __name__.startswith("bokeh"):  # `panel serve explorer/app.py`
    overview_app().servable()
