"""What keeps a move's answer quick: page builds wait for a quiet event loop, sockets send at once.

No server: the gate runs on an asyncio loop of its own, a page build is a blocking call made
right after the gate let it through (as Bokeh builds the document right after the session
hooks), and the socket is a stand-in that records ``set_nodelay``.
"""

from __future__ import annotations

import asyncio
import threading
import time

from explorer.server.latency import PageBuildGate, quiet_loop, send_small_messages_at_once


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
