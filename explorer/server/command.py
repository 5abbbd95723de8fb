"""The one ``panel serve explorer/app.py`` command line, for ``python -m explorer`` and for the
throw-away servers of the browser tests and benchmarks (:mod:`explorer.server.served`).

``python -m explorer [--address A] [--port P] [panel serve options]`` replaces itself with
``panel serve explorer/app.py --address A --port P [options]``, so every ``panel serve`` option
(``--num-threads``, ``--basic-auth``, ``--prefix``...) applies. Nothing here imports Panel.

Uploads are bounded: a browser sends a file whole, base64 in one websocket message, so the
command sets ``--websocket-max-message-size`` from ``EXPLORER_MAX_UPLOAD_MB`` (default
:data:`DEFAULT_UPLOAD_MB`). Tornado reads a message's declared length first and closes the
connection (code 1009, "message too big") without reading the rest, so an oversized upload is
refused before it is read whole; the server goes on serving everyone else.

Memory goes back to the operating system once sessions close: the served process runs with
``PYTHONMALLOC=malloc`` (:func:`server_environment`) unless the operator set ``PYTHONMALLOC``
(``PYTHONMALLOC=pymalloc python -m explorer`` keeps Python's own allocator). With Python's
small-object allocator, a few long-lived objects made while sessions ran (cache entries,
database connections) keep whole 1 MiB arenas alive: 20 analysts left the two web processes
132 MB above idle, with the C allocator (and ``malloc_trim`` after the sessions expire,
:mod:`explorer.server.process`) 10 MB, for 7-17 % more CPU per page (docs/serving.md, Memory).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

#: The checkout (or installed tree) that holds the ``engine`` and ``explorer`` packages.
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The served entry point.
APP_FILE = REPO_ROOT / "explorer" / "app.py"
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 5006
#: The largest upload (MB of file) by default (``EXPLORER_MAX_UPLOAD_MB``).
DEFAULT_UPLOAD_MB = 20.0
#: Room in a websocket message beyond the base64 file (the message's JSON around it).
MESSAGE_OVERHEAD = 64 * 1024
MESSAGE_SIZE_OPTION = "--websocket-max-message-size"


#: The allocator of the served process unless ``PYTHONMALLOC`` says otherwise (module docstring).
DEFAULT_ALLOCATOR = "malloc"


def server_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` with ``PYTHONMALLOC`` set to :data:`DEFAULT_ALLOCATOR` unless it is set
    already (to anything: ``pymalloc`` is Python's own allocator)."""
    return {"PYTHONMALLOC": DEFAULT_ALLOCATOR, **environment}


def max_upload_bytes() -> int:
    """``EXPLORER_MAX_UPLOAD_MB`` in bytes (default :data:`DEFAULT_UPLOAD_MB` MB)."""
    text = os.environ.get("EXPLORER_MAX_UPLOAD_MB", "").strip()
    try:
        value = float(text) if text else DEFAULT_UPLOAD_MB
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SystemExit(f"EXPLORER_MAX_UPLOAD_MB: {text!r} is not a size in MB (allowed: more "
                         "than 0)")
    return int(value * 1e6)


def max_message_bytes(upload_bytes: int) -> int:
    """The websocket message that carries an upload of ``upload_bytes`` (base64: 4 bytes per
    3, plus :data:`MESSAGE_OVERHEAD`)."""
    return 4 * math.ceil(upload_bytes / 3) + MESSAGE_OVERHEAD


def serve_command(
    port: int,
    *options: str,
    address: str = DEFAULT_ADDRESS,
    unused_session_ms: int | None = None,
) -> list[str]:
    """``panel serve explorer/app.py`` on ``address:port`` with extra ``panel serve`` options.

    ``unused_session_ms``: discard a session this many milliseconds after its last browser
    connection closed (checked five times as often); ``None`` keeps Bokeh's default (15 s,
    checked every 17 s). Messages are bounded by :func:`max_upload_bytes` unless ``options``
    set ``--websocket-max-message-size`` themselves.
    """
    command = [
        sys.executable,
        "-m",
        "panel",
        "serve",
        str(APP_FILE),
        "--address",
        address,
        "--port",
        str(port),
    ]
    if unused_session_ms is not None:
        command += [
            "--check-unused-sessions",
            str(max(unused_session_ms // 5, 100)),
            "--unused-session-lifetime",
            str(unused_session_ms),
        ]
    if not any(o.startswith(MESSAGE_SIZE_OPTION) for o in options):
        command += [MESSAGE_SIZE_OPTION, str(max_message_bytes(max_upload_bytes()))]
    return [*command, *options]


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m explorer`` (any other is passed to ``panel serve``)."""
    parser = argparse.ArgumentParser(
        prog="python -m explorer",
        description="Serve the DP workbench explorer (panel serve explorer/app.py); any other "
        "option is passed to panel serve.",
    )
    parser.add_argument(
        "--address", default=DEFAULT_ADDRESS, help=f"address to bind (default {DEFAULT_ADDRESS})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})"
    )
    return parser


def command_line(argv: Sequence[str] | None = None) -> list[str]:
    """The command that ``python -m explorer argv`` runs; a bad ``--port`` exits with status 2
    and one line naming it."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port: {args.port} is not a port number (allowed 1..65535)")
    return serve_command(args.port, *rest, address=args.address)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Replace this process with ``panel serve explorer/app.py`` and the given options."""
    command = command_line(argv)
    os.execve(command[0], command, server_environment(os.environ))
