"""What keeps the answer to a slider move quick on a busy server.

What :func:`answer_moves_first` installs, once per served process:

* **Small messages leave at once.** Bokeh sends every message as three websocket frames
  (header, metadata, content). With Nagle's algorithm on (tornado's default), the second frame
  waits until the browser acknowledges the first, and the browser delays that acknowledgement
  by up to 40 ms: every answer to a move arrived about 40 ms late. Tornado's documentation
  says to call ``set_nodelay(True)`` in a websocket handler's ``open`` for this traffic; Bokeh
  and Panel do not, so :func:`send_small_messages_at_once` does it for every connection.
* **A message's frames leave together.** Bokeh's ``Message.send`` awaits each frame's write
  before it writes the next, and tornado wraps each write's completion in a task of its own,
  so the frames of one message go out over several turns of the event loop. A page build
  admitted in between (the gate below sees those turns as quiet) held the rest of an answer to
  a move back until it ended: the browser can read a message only once all its frames are in.
  Tornado writes a frame to the socket when ``write_message`` is called ("awaiting the Future
  they return is optional"), so :func:`send_whole_messages` writes all of a message's frames
  first and then waits for them.
* **Page builds wait their turn behind what people are doing on pages already open.**
* **Panel's garbage collection after closed sessions waits for a quiet loop too.**
* **A process with pages waiting leaves new connections to its siblings** (``--num-procs``).

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

When the server runs several processes (``--num-procs``), they share one listening socket and
the kernel hands a new connection to whichever process is waiting on it: one between two builds
took it even when many builds were waiting in it and none in its sibling (in a burst of 20
analysts, four waiting against one). A process whose queue of builds has
:data:`PAUSE_ACCEPTING_AT` pages waiting stops taking new connections until its queue is
shorter again (:class:`AcceptingWhileShort`); the kernel keeps them for a sibling, or for this
process once it caught up, and at most :data:`LONGEST_PAUSE_S` (when every process is behind,
a page would otherwise wait in the kernel's queue for its address and again for its
websocket: unbounded, page p95 at 100 analysts went from 17 to 23-25 s). A single process
always accepts.

Panel runs a full ``gc.collect()`` a few seconds after sessions close (0.1-0.17 CPU s during a
burst of 20 analysts, one uninterruptible callback like a page build). The gate's
``on_session_destroyed`` hook cancels that task and runs the same collection in a build turn of
its own (:func:`collect_garbage_in_turn`), debounced as Panel's is, after the builds already
waiting (a burst's pages first); nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import heapq
import itertools
import json
import logging
import socket
import time
import weakref
from collections.abc import Callable

import panel as pn
from bokeh.application.handlers.handler import Handler
from bokeh.document import Document
from bokeh.protocol.message import Message
from panel.io.server import WSHandler
from tornado.ioloop import IOLoop
from tornado.process import task_id
from tornado.websocket import WebSocketClosedError, WebSocketHandler

log = logging.getLogger(__name__)

#: A turn of the event loop shorter than this (seconds) ran nothing else of note.
QUIET_TURN_S = 0.002
#: How many quiet turns in a row mean that the loop has nothing waiting. A move reaches its
#: work about nine turns after its first frame was read (three websocket frames, three turns
#: each, then Bokeh's patch and Panel's change callback two turns later, all of them quick):
#: with fewer, a build went in between and the move waited for it. An idle turn costs tens of
#: microseconds.
QUIET_TURNS = 12
#: Longest time a page build waits for a quiet loop (seconds).
LONGEST_WAIT_S = 1.0
#: Panel's name of its garbage collection task after closed sessions.
PANEL_COLLECTION_TASK = "gc.collect"
#: Seconds after the last closed session before the collection runs (Panel's own debounce).
COLLECTION_DEBOUNCE_S = 5.0

#: Ranks of build turns (:func:`build_turn`): new pages first, then the garbage collection
#: after closed sessions.
PAGE, COLLECTION = 0, 1
#: A serving process among several stops taking new connections while this many page builds
#: wait in it for their turn (besides the one being built).
PAUSE_ACCEPTING_AT = 1
#: Longest time (seconds) a serving process leaves new connections to its siblings in one go:
#: a page's address and its websocket are two connections, so when every process is behind,
#: a page would otherwise wait in the kernel's queue twice for a whole queue of builds.
LONGEST_PAUSE_S = 0.25


def listening_sockets(io_loop: IOLoop) -> list[int]:
    """The file descriptors of the listening sockets that ``io_loop`` accepts connections on."""
    found = []
    for fd, (fileobj, _) in list(getattr(io_loop, "handlers", {}).items()):
        if isinstance(fileobj, socket.socket):
            with contextlib.suppress(OSError):
                if fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    found.append(fd)
    return found


class AcceptingWhileShort:
    """Takes new connections on this process's listening sockets only while fewer than
    ``pause_at`` page builds wait in it, or at least every ``longest_pause_s`` seconds (module
    docstring)."""

    def __init__(self, io_loop: IOLoop, pause_at: int = PAUSE_ACCEPTING_AT,
                 longest_pause_s: float = LONGEST_PAUSE_S) -> None:
        self.io_loop = io_loop
        self.pause_at = pause_at
        self.longest_pause_s = longest_pause_s
        self.paused: list[int] = []
        self.timer: object | None = None

    def __call__(self, waiting: int) -> None:
        """Pause or resume accepting for ``waiting`` page builds waiting."""
        if waiting >= self.pause_at and not self.paused:
            self.paused = listening_sockets(self.io_loop)
            for fd in self.paused:
                self.io_loop.update_handler(fd, 0)
            if self.paused:
                self.timer = self.io_loop.call_later(self.longest_pause_s, self.resume)
        elif waiting < self.pause_at and self.paused:
            self.resume()

    def resume(self) -> None:
        """Take new connections again."""
        if self.timer is not None:
            self.io_loop.remove_timeout(self.timer)
            self.timer = None
        for fd in self.paused:
            with contextlib.suppress(KeyError, ValueError, OSError):  # closed meanwhile
                self.io_loop.update_handler(fd, IOLoop.READ)
        self.paused = []


def queue_watcher() -> Callable[[int], None] | None:
    """An :class:`AcceptingWhileShort` for this process when it is one of several forked
    serving processes (``--num-procs``), else None."""
    return AcceptingWhileShort(IOLoop.current()) if task_id() is not None else None


class BuildTurns:
    """Turns of one event loop's builds: one at a time; when one ends, the waiting turn of
    lowest rank goes next (the earliest asked among equals). ``queue_changed`` is told how many
    page builds wait whenever that may have changed."""

    def __init__(self, queue_changed: Callable[[int], None] | None = None) -> None:
        self.busy = False
        self.waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self.asked = itertools.count()
        self.queue_changed = queue_changed

    def pages_waiting(self) -> int:
        """Page builds waiting for their turn (not the one being built)."""
        return sum(1 for rank, _, turn in self.waiting if rank == PAGE and not turn.done())

    def _tell(self) -> None:
        if self.queue_changed is not None:
            self.queue_changed(self.pages_waiting())

    async def take(self, rank: int) -> None:
        """Wait for a turn of ``rank`` (:data:`PAGE`, :data:`COLLECTION`)."""
        if not self.busy and not self.waiting:
            self.busy = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiting, (rank, next(self.asked), turn))
        self._tell()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed over, then cancelled
                self.give_back()
            else:
                self._tell()
            raise

    def give_back(self) -> None:
        """End the current turn: the next waiting one begins (see the class docstring)."""
        while self.waiting:
            _, _, turn = heapq.heappop(self.waiting)
            if not turn.done():  # a waiter cancelled meanwhile has a done future
                turn.set_result(None)
                self._tell()
                return
        self.busy = False
        self._tell()


#: The build turns of each event loop (:func:`build_turn`).
TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BuildTurns] = (
    weakref.WeakKeyDictionary())


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


async def build_turn(rank: int = PAGE, longest_s: float = LONGEST_WAIT_S) -> float:
    """Wait for this event loop's next build turn of ``rank`` (:class:`BuildTurns`: one at a
    time, pages before the collection), then for :func:`quiet_loop` (``longest_s``
    bounds that wait); returns the seconds waited.

    The caller builds at once after it returns, without awaiting anything in between: the
    next turn's quiet loop starts only once the caller's step (the build) has ended."""
    start = time.perf_counter()
    loop = asyncio.get_running_loop()
    turns = TURNS.get(loop)
    if turns is None:
        turns = TURNS[loop] = BuildTurns(queue_watcher())
    await turns.take(rank)
    try:
        await quiet_loop(longest_s=longest_s)
    finally:
        turns.give_back()
    return time.perf_counter() - start


async def collect_garbage_in_turn(debounce_s: float = COLLECTION_DEBOUNCE_S) -> None:
    """Panel's collection after closed sessions (module docstring), ``debounce_s`` after the
    last session closed, in a build turn of its own."""
    await asyncio.sleep(debounce_s)
    await build_turn(COLLECTION)
    gc.collect()


class PageBuildGate(Handler):
    """An application handler that admits page builds one at a time, each after a quiet turn
    of the event loop, and runs Panel's garbage collection after closed sessions in such a
    turn too (module docstring); it adds nothing to a document."""

    def __init__(self, collection_debounce_s: float = COLLECTION_DEBOUNCE_S) -> None:
        super().__init__()
        self.collection_debounce_s = collection_debounce_s
        self.collection: asyncio.Task[None] | None = None

    def modify_document(self, doc: Document) -> None:
        """Nothing: the page is built by the app script's handler."""

    async def on_session_created(self, session_context: object) -> None:
        """Wait for this build's turn (see the module docstring)."""
        await build_turn()

    async def on_session_destroyed(self, session_context: object) -> None:
        """Replace Panel's collection after this closed session by one in a build turn,
        restarting its debounce (module docstring)."""
        with contextlib.suppress(KeyError):  # Panel schedules it once per debounce
            pn.state.cancel_task(PANEL_COLLECTION_TASK)
        if self.collection is not None:
            self.collection.cancel()
        self.collection = asyncio.ensure_future(
            collect_garbage_in_turn(self.collection_debounce_s))


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


def frames_of(message: Message[object]) -> list[tuple[str | bytes, bool]]:
    """The websocket frames Bokeh sends for ``message``, in order: header, metadata, content,
    then each buffer's header and its bytes; each with whether it is binary."""
    frames: list[tuple[str | bytes, bool]] = [
        (message.header_json, False), (message.metadata_json, False),
        (message.content_json, False)]
    for buffer in message.buffers:
        frames += [(json.dumps(buffer.ref), False), (buffer.to_bytes(), True)]
    return frames


async def send_whole(connection: WebSocketHandler, message: Message[object]) -> None:
    """Send ``message`` on ``connection`` with all its frames written in one turn of the event
    loop (module docstring); a closed connection is logged, as Bokeh's ``send_message`` does."""
    try:
        with await connection.write_lock.acquire():
            writes = [WebSocketHandler.write_message(connection, frame, binary=binary)
                      for frame, binary in frames_of(message)]
            for write in writes:
                await write
    except WebSocketClosedError:
        log.warning("Failed sending message as connection was closed")


def send_whole_messages(handler: type[WebSocketHandler] = WSHandler) -> None:
    """Make ``handler`` (Panel's websocket handler, by default) send every message with
    :func:`send_whole`; once per process, later calls change nothing."""
    handler.send_message = send_whole  # type: ignore[method-assign]


def answer_moves_first(doc: Document | None) -> None:
    """Install the measures of the module docstring for the process serving ``doc``."""
    send_small_messages_at_once()
    send_whole_messages()
    gate_page_builds(doc)
