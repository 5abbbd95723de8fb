"""The served explorer's log: what the operator sees, without noise from closed tabs.

``panel serve`` configures Bokeh's loggers only; :func:`configure` adds the explorer's own
lines (planning jobs starting, stopping and why) at INFO in the same format.

A browser tab that closes while the server is sending it an update makes Tornado's write
task fail with ``WebSocketClosedError``. Panel collects those tasks but can drop a document
before awaiting them, and asyncio then logs "Task exception was never retrieved" with a
traceback. Nothing is wrong (the reader has gone), and Bokeh already logs "Failed sending
message as connection was closed" for the same event, so :class:`ClosedTabFilter` drops these
records and nothing else.

A tab that closes while its page is still being built makes Bokeh's websocket ``on_close``
fail an ``assert`` (its connection has no session yet), which Tornado logs as an "Uncaught
exception" with a traceback; a message still in flight from a tab whose session has just
been discarded fails the same ``assert`` in Bokeh's protocol handler. The browser is gone and
there is nothing to clean up, so :class:`ClosedTabFilter` drops those records too, recognised
by where the assertion failed.
"""

from __future__ import annotations

import logging
import traceback

from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError

FORMAT = "%(asctime)s %(name)s %(message)s"
#: Where Bokeh asserts that a closing websocket connection has a session.
BOKEH_SESSION_ASSERT = "bokeh/server/connection.py"


class ClosedTabFilter(logging.Filter):
    """Drops the tracebacks logged when a browser tab closes (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, WebSocketClosedError | StreamClosedError):
            return False
        if isinstance(error, AssertionError) and error.__traceback__ is not None:
            innermost = traceback.extract_tb(error.__traceback__)[-1]
            return not innermost.filename.endswith(BOKEH_SESSION_ASSERT)
        return True


def configure() -> None:
    """Log the explorer's INFO lines and silence closed-tab write failures (idempotent)."""
    explorer = logging.getLogger("explorer")
    if not explorer.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        explorer.addHandler(handler)
        explorer.setLevel(logging.INFO)
        explorer.propagate = False
    for name in ("asyncio", "tornado.application", "bokeh.server.protocol_handler"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClosedTabFilter) for f in logger.filters):
            logger.addFilter(ClosedTabFilter())
