"""What keeps a move's answer quick: page builds (and Panel's collection after closed sessions)
wait for their turn and a quiet event loop, sockets send at once, a message's frames together.

No server: the gate runs on an asyncio loop of its own, a page build is a blocking call made
right after the gate let it through (as Bokeh builds the document right after the session
hooks), and the sockets are stand-ins that record ``set_nodelay`` and the frames written.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import threading
import time

import panel as pn
from bokeh.core.types import ID
from bokeh.protocol import Protocol
from bokeh.protocol.message import Buffer
from tornado.ioloop import IOLoop
from tornado.locks import Lock
from tornado.netutil import add_accept_handler

from explorer.server.latency import (
    COLLECTION,
    PAGE,
    AcceptingWhileShort,
    BuildTurns,
    PageBuildGate,
    build_turn,
    listening_sockets,
    queue_watcher,
    quiet_loop,
    send_small_messages_at_once,
    send_whole,
)


def run_alone(scenario):
    """``asyncio.run(scenario())`` on a thread of its own: when a browser test ran earlier in
    the same worker, Playwright's synchronous API keeps its event loop running on the main
    thread, and ``asyncio.run`` refuses to start inside one."""
    results = []
    thread = threading.Thread(target=lambda: results.append(asyncio.run(scenario())))
    thread.start()
    thread.join(60)
    assert results, "the scenario did not finish"
    return results[0]


def test_quiet_loop_returns_only_after_the_work_already_queued_has_run():
    order: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def busy(n: int) -> None:
            time.sleep(0.005)  # a callback that holds the loop, as a move's answer does
            order.append(f"move {n}")
            if n < 3:
                loop.call_soon(busy, n + 1)  # a chain of work, one callback after another

        loop.call_soon(busy, 1)
        await quiet_loop()
        order.append("build")

    run_alone(scenario)
    assert order == ["move 1", "move 2", "move 3", "build"]


def test_the_gate_lets_a_move_that_arrived_during_one_build_go_before_the_next_build():
    order: list[str] = []

    async def scenario() -> None:
        gate = PageBuildGate()
        loop = asyncio.get_running_loop()

        async def page(name: str, move_arrives: bool) -> None:
            await gate.on_session_created(None)
            order.append(f"build {name}")  # the document is built here, holding the loop
            if move_arrives:
                loop.call_soon(lambda: order.append("move"))
            time.sleep(0.005)

        await asyncio.gather(page("A", True), page("B", False), page("C", False))

    run_alone(scenario)
    assert order == ["build A", "move", "build B", "build C"]


def test_a_move_still_on_its_way_through_quick_turns_goes_before_the_next_build():
    order: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def hop(left: int) -> None:  # frames read, the patch applied: quick turns
            if left:
                loop.call_soon(hop, left - 1)
            else:
                time.sleep(0.005)  # then the move's work
                order.append("move")

        async def page(name: str, move_arrives: bool) -> None:
            await build_turn(PAGE)
            order.append(f"build {name}")
            if move_arrives:
                loop.call_soon(hop, 9)  # a move's first frame came in during this build
            time.sleep(0.005)

        await asyncio.gather(page("A", True), page("B", False))

    run_alone(scenario)
    assert order == ["build A", "move", "build B"]


def test_a_gate_never_holds_a_build_for_ever():
    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        stop = loop.time() + 30.0

        def forever() -> None:  # a loop that is never quiet
            time.sleep(0.003)
            if loop.time() < stop:
                loop.call_soon(forever)

        loop.call_soon(forever)
        await quiet_loop(longest_s=0.1)
        return loop.time() < stop  # the build went ahead while the loop was still busy

    assert run_alone(scenario)


def test_build_turns_say_how_many_pages_wait_as_the_queue_moves():
    told: list[int] = []

    async def scenario() -> None:
        turns = BuildTurns(told.append)
        await turns.take(PAGE)  # built at once: nobody waits
        second = asyncio.ensure_future(turns.take(PAGE))
        third = asyncio.ensure_future(turns.take(PAGE))
        collection = asyncio.ensure_future(turns.take(COLLECTION))
        await asyncio.sleep(0)
        third.cancel()  # its tab closed before its turn
        await asyncio.sleep(0)
        turns.give_back()  # the second page's turn
        await second
        turns.give_back()  # the collection's turn
        await collection
        turns.give_back()

    run_alone(scenario)
    # two pages waiting, then one (the third left), none once the second got its turn; the
    # collection never counts as a page
    assert told == [1, 2, 2, 1, 0, 0, 0]


def test_a_process_with_pages_waiting_leaves_new_connections_to_its_siblings():
    accepted: list[socket.socket] = []

    async def scenario() -> list[str]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        io_loop = IOLoop.current()
        add_accept_handler(listener, lambda connection, _: accepted.append(connection))
        assert listening_sockets(io_loop) == [listener.fileno()]
        switch = AcceptingWhileShort(io_loop, pause_at=1, longest_pause_s=0.6)
        seen = []
        switch(1)  # a page waits: new connections are left in the kernel's queue
        client = socket.create_connection(listener.getsockname())
        await asyncio.sleep(0.2)
        seen.append(f"while paused: {len(accepted)}")
        switch(0)  # caught up: take them again
        await asyncio.sleep(0.2)
        seen.append(f"after: {len(accepted)}")
        switch(2)  # behind again, and for longer than the longest pause
        late = socket.create_connection(listener.getsockname())
        await asyncio.sleep(0.2)
        seen.append(f"while paused: {len(accepted)}")
        await asyncio.sleep(0.6)
        seen.append(f"after the longest pause: {len(accepted)}")
        for connection in [client, late, *accepted]:
            connection.close()
        listener.close()
        return seen

    assert run_alone(scenario) == ["while paused: 0", "after: 1", "while paused: 1",
                                   "after the longest pause: 2"]


def test_a_single_serving_process_always_accepts():
    assert queue_watcher() is None  # not forked by --num-procs: no switch


def test_every_socket_opened_afterwards_sends_without_nagles_delay():
    class Socket:
        def __init__(self) -> None:
            self.nodelay: bool | None = None
            self.opened = 0

        def set_nodelay(self, value: bool) -> None:
            self.nodelay = value

        def open(self, *args: object) -> None:
            self.opened += 1

    send_small_messages_at_once(Socket)
    send_small_messages_at_once(Socket)  # a second install changes nothing
    socket = Socket()
    socket.open("/ws")
    assert socket.nodelay is True and socket.opened == 1


class Connection:
    """A stand-in for tornado's websocket protocol: records each frame written (its start) and
    finishes the write a loop turn later, as a socket write's future does; ``closed``: the
    connection has closed."""

    def __init__(self, log: list[str], closed: bool = False) -> None:
        self.log = log
        self.closed = closed

    def is_closing(self) -> bool:
        return self.closed

    def write_message(self, frame: str | bytes, binary: bool = False) -> asyncio.Future[None]:
        self.log.append(("binary " if binary else "") + str(frame)[:12])
        written = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(written.set_result, None)
        return written


class Socket:
    """What :func:`send_whole` uses of a websocket handler."""

    def __init__(self, connection: Connection) -> None:
        self.ws_connection = connection
        self.write_lock = Lock()


def test_a_messages_frames_are_all_written_before_anything_else_runs():
    message = Protocol().create("OK", ID("request"))
    message.add_buffer(Buffer(ID("b1"), b"bytes"))
    log: list[str] = []

    async def scenario() -> None:
        asyncio.get_running_loop().call_soon(log.append, "other work")  # queued first
        await send_whole(Socket(Connection(log)), message)

    run_alone(scenario)
    # Bokeh's own send awaits each frame: "other work" would come right after the header
    assert log == [message.header_json[:12], message.metadata_json[:12],
                   message.content_json[:12], '{"id": "b1"}', "binary b'bytes'", "other work"]


def test_a_message_to_a_closed_connection_is_logged_not_raised(caplog):
    message = Protocol().create("OK", ID("request"))
    run_alone(lambda: send_whole(Socket(Connection([], closed=True)), message))
    assert "connection was closed" in caplog.text


def test_bokehs_developer_checks_are_skipped_unless_the_operator_set_them():
    from explorer.server.process import CHECKS, skip_bokeh_checks

    try:
        for setting in CHECKS.values():
            setting.unset_value()
        assert skip_bokeh_checks({"BOKEH_VALIDATE_DOC": "true"}) == [
            "BOKEH_PERFORM_ERROR_DIAGNOSTICS"]
        assert CHECKS["BOKEH_VALIDATE_DOC"]() is True  # the operator's choice stands
        assert CHECKS["BOKEH_PERFORM_ERROR_DIAGNOSTICS"]() is False
    finally:
        for setting in CHECKS.values():
            setting.unset_value()


def test_a_collection_goes_after_the_pages_waiting():
    order: list[str] = []

    async def scenario() -> None:
        async def build(name: str, rank: int) -> None:
            await build_turn(rank)
            order.append(name)
            time.sleep(0.003)  # the build holds the loop

        first = asyncio.ensure_future(build("page A", PAGE))
        await asyncio.sleep(0)  # page A has its turn; the others queue behind it
        waiting = [asyncio.ensure_future(build(name, rank)) for name, rank in (
            ("collection", COLLECTION), ("page B", PAGE), ("page C", PAGE))]
        await asyncio.gather(first, *waiting)

    run_alone(scenario)
    assert order == ["page A", "page B", "page C", "collection"]


def test_a_turn_given_up_while_waiting_holds_nobody_back():
    order: list[str] = []

    async def scenario() -> None:
        async def build(name: str) -> None:
            await build_turn(PAGE)
            order.append(name)

        first = asyncio.ensure_future(build("A"))
        await asyncio.sleep(0)
        gone = asyncio.ensure_future(build("closed tab"))
        last = asyncio.ensure_future(build("B"))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.wait_for(asyncio.gather(first, last), 5)

    run_alone(scenario)
    assert order == ["A", "B"]


def test_panels_collection_after_closed_sessions_runs_in_a_turn_once_they_stop_closing(
        monkeypatch):
    collections: list[float] = []
    monkeypatch.setattr("explorer.server.latency.gc.collect", lambda: collections.append(
        time.perf_counter()))

    async def scenario() -> tuple[float, float]:
        # Panel's own collection, as Panel schedules it when a session's document goes
        pn.state.schedule_task("gc.collect", lambda: collections.append(-1.0),
                               at=dt.datetime.now() + dt.timedelta(seconds=0.1))
        gate = PageBuildGate(collection_debounce_s=0.05)
        await gate.on_session_destroyed(None)
        await asyncio.sleep(0.02)
        last = time.perf_counter()
        await gate.on_session_destroyed(None)  # a second close restarts the debounce
        await asyncio.sleep(0.3)
        return last, gate.collection.done()

    last, done = run_alone(scenario)
    assert done and len(collections) == 1  # one collection for both closes, not Panel's
    assert 0.05 <= collections[0] - last < 0.3

