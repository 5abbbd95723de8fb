"""The served explorer's log: what the operator sees, without noise from closed tabs.

``panel serve`` configures Bokeh's loggers only; :func:`configure` adds the explorer's own
lines (planning jobs starting, stopping and why) at INFO in the same format.

A browser tab that closes while the server is sending it an update makes Tornado's write
task fail with ``WebSocketClosedError``. Panel collects those tasks but can drop a document
before awaiting them, and asyncio then logs "Task exception was never retrieved" with a
traceback. Nothing is wrong (the reader has gone), and Bokeh already logs "Failed sending
message as connection was closed" for the same event, so :class:`ClosedTabFilter` drops these
records and nothing else.
"""

from __future__ import annotations

import logging

from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError

FORMAT = "%(asctime)s %(name)s %(message)s"


class ClosedTabFilter(logging.Filter):
    """Drops asyncio's reports of writes to a browser tab that has closed."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, WebSocketClosedError | StreamClosedError)


def configure() -> None:
    """Log the explorer's INFO lines and silence closed-tab write failures (idempotent)."""
    explorer = logging.getLogger("explorer")
    if not explorer.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        explorer.addHandler(handler)
        explorer.setLevel(logging.INFO)
        explorer.propagate = False
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, ClosedTabFilter) for f in asyncio_log.filters):
        asyncio_log.addFilter(ClosedTabFilter())
