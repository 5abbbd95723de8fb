"""What one eps-slider release costs the server: CPU, messages and bytes per move.

One served explorer (``panel serve``, one process), one protocol-level client
(:class:`protocol_client.PageClient`) on the trade-off page, ``--moves`` releases one after
another, each waiting for the readout that names the new level. Printed: web-process CPU per
move (the figure to compare between versions; wall-clock times depend on the machine's load),
the messages and kilobytes the server sent back per move, the median and largest time to the
new readout, and the load average. Nothing else runs on the server meanwhile, so this is the
cost of a move, not its wait behind other sessions' page builds (``protocol_load.py``).

Usage::

    python benchmarks/slider_cost.py --moves 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
from pathlib import Path

import psutil
from protocol_client import PageClient, ProtocolError
from protocol_load import START_S, analyst, cpu_seconds, new_position

from explorer.components.privacy import EXPONENT_BOUNDS
from explorer.server.served import serving

#: Seconds the page may finish its own loading work (views built on load) before the moves.
SETTLE_S = 5.0


async def measure(ws_url: str, root: psutil.Process, moves: int, timeout: float) -> str:
    """Warm up, then ``moves`` releases on one trade-off page; one line of results."""
    rng = random.Random(0)  # the slider positions (not noise)
    await analyst(ws_url, 1, timeout, None, rng)
    page = await PageClient.open(ws_url, {"page": "tradeoff"}, timeout=timeout)
    try:
        await page.wait_for(lambda: bool(page.text_of("tradeoff-level")), timeout)
        with contextlib.suppress(ProtocolError):  # the page's own loading work ends first
            await page.wait_for(lambda: False, SETTLE_S)
        slider = page.models[page.find("eps-slider")]["data"]["id"]
        received: list[int] = []
        consume = page.receiver.consume

        async def counted(fragment: str | bytes) -> object:
            received.append(len(fragment))
            return await consume(fragment)

        page.receiver.consume = counted
        low, high = EXPONENT_BOUNDS["epsilon"]
        took = []
        cpu, patches = cpu_seconds(root), page.patches
        for _ in range(moves):
            before = page.text_of("tradeoff-level")
            await page.change(slider, value=new_position(
                rng, low, high, page.models[slider].get("value", 0.0)))
            took.append(await page.wait_for(
                lambda before=before: page.text_of("tradeoff-level") != before, timeout))
        await asyncio.sleep(1.0)  # what the last move sends after its readout
        cpu = cpu_seconds(root) - cpu
        patches = page.patches - patches
    finally:
        page.close()
    took.sort()
    return (f"{moves} moves: web CPU per move {cpu / moves * 1e3:.1f} ms; "
            f"{patches / moves:.1f} messages and {sum(received) / moves / 1e3:.1f} kB per move; "
            f"new readout after median {took[len(took) // 2] * 1e3:.0f} ms, largest "
            f"{took[-1] * 1e3:.0f} ms; load average {psutil.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds any one step may take")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs, serving(Path(logs) / "server.log",
                                                         timeout_s=START_S) as app:
        ws_url = app.url.replace("http://", "ws://") + "/app/ws"
        try:
            print(asyncio.run(measure(ws_url, psutil.Process(app.process.pid), args.moves,
                                      args.timeout)))
        except ProtocolError as exc:
            raise SystemExit(f"the client failed: {exc}") from None


if __name__ == "__main__":
    main()
