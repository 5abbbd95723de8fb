"""What keeps the answer to a slider move quick on a busy server.

Two things, installed once per served process by :func:`answer_moves_first`:

* **Small messages leave at once.** Bokeh sends every message as three websocket frames
  (header, metadata, content). With Nagle's algorithm on (tornado's default), the second frame
  waits until the browser acknowledges the first, and the browser delays that acknowledgement
  by up to 40 ms: every answer to a move arrived about 40 ms late. Tornado's documentation
  says to call ``set_nodelay(True)`` in a websocket handler's ``open`` for this traffic; Bokeh
  and Panel do not, so :func:`send_small_messages_at_once` does it for every connection.
* **Page builds wait their turn behind what people are doing on pages already open.**

A served process runs everything on one event loop: building a new page (0.1-0.3 s of CPU,
longer when the cores are shared) holds it, and a slider move that arrives meanwhile waits
for every page build queued before it. Under a burst of arrivals that wait, not the move's own
27 ms, was the slider's latency (benchmarks/README.md, issue 30).

:class:`PageBuildGate` is a Bokeh application handler whose ``on_session_created`` (which
Bokeh awaits before it builds a session's document, a hook documented as "may return a Future
which will delay session creation") lets one page build through at a time, and only once the
event loop has gone round without finding other work: the messages of open pages that arrived
during the previous build are handled first. The wait is bounded (:data:`LONGEST_WAIT_S`), so
a steady stream of moves cannot hold a page back for long.
"""

from __future__ import annotations

import asyncio
import functools
import time

from bokeh.application.handlers.handler import Handler
from bokeh.document import Document
from panel.io.server import WSHandler
from tornado.websocket import WebSocketHandler

#: A turn of the event loop shorter than this (seconds) ran nothing else of note.
QUIET_TURN_S = 0.002
#: How many quiet turns in a row mean that the loop has nothing waiting.
QUIET_TURNS = 2
#: Longest time a page build waits for a quiet loop (seconds).
LONGEST_WAIT_S = 1.0


async def quiet_loop(
    quiet_turn_s: float = QUIET_TURN_S, turns: int = QUIET_TURNS, longest_s: float = LONGEST_WAIT_S
) -> float:
    """Yield to the event loop until ``turns`` turns in a row each took under ``quiet_turn_s``
    (or ``longest_s`` passed); returns the seconds waited."""
    start = time.perf_counter()
    calm = 0
    while calm < turns and time.perf_counter() - start < longest_s:
        before = time.perf_counter()
        await asyncio.sleep(0)
        calm = calm + 1 if time.perf_counter() - before < quiet_turn_s else 0
    return time.perf_counter() - start


class PageBuildGate(Handler):
    """An application handler that admits page builds one at a time, each after a quiet turn
    of the event loop (module docstring); it adds nothing to a document."""

    def __init__(self) -> None:
        super().__init__()
        self._turn = asyncio.Lock()  # bound to the serving loop at its first use

    def modify_document(self, doc: Document) -> None:
        """Nothing: the page is built by the app script's handler."""

    async def on_session_created(self, session_context: object) -> None:
        """Wait for this build's turn (see the module docstring)."""
        async with self._turn:
            await quiet_loop()


def gate_page_builds(doc: Document | None) -> None:
    """Add a :class:`PageBuildGate` to the application serving ``doc``, once per process
    (nothing outside a server)."""
    context = doc.session_context if doc is not None else None
    server = getattr(context, "server_context", None)
    application_context = getattr(server, "application_context", None)
    application = getattr(application_context, "application", None)
    if application is not None and not any(
            isinstance(h, PageBuildGate) for h in application.handlers):
        application.add(PageBuildGate())


def send_small_messages_at_once(handler: type[WebSocketHandler] = WSHandler) -> None:
    """Make every websocket that ``handler`` (Panel's, by default) opens from now on send
    without Nagle's delay (module docstring); once per process, later calls change nothing."""
    if getattr(handler.open, "sends_at_once", False):
        return
    opened = handler.open

    @functools.wraps(opened)
    def open_at_once(self: WebSocketHandler, *args: object, **kwargs: object) -> object:
        self.set_nodelay(True)
        return opened(self, *args, **kwargs)

    open_at_once.sends_at_once = True  # type: ignore[attr-defined]
    handler.open = open_at_once  # type: ignore[method-assign]


def answer_moves_first(doc: Document | None) -> None:
    """Install both measures of the module docstring for the process serving ``doc``."""
    send_small_messages_at_once()
    gate_page_builds(doc)
