"""An upload over the limit is refused before it is read whole, and the server goes on.

A served explorer with ``EXPLORER_MAX_UPLOAD_MB=0.5``; a protocol-level client (a websocket
speaking Bokeh's handshake, no browser) sends a message as large as a 2 MB file's upload. The
server closes that connection with 1009 ("message too big") and keeps serving pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from bokeh.util.token import generate_jwt_token, generate_session_id
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClosedError, websocket_connect

from explorer.server.served import serving

pytestmark = pytest.mark.slow


async def send_upload(ws_url: str, size: int) -> str:
    """Open a session's websocket and send one message of about ``size`` bytes (a bogus
    document patch); "ERROR" when the server read it and answered that it is no patch, "closed"
    when it closed the connection instead."""
    token = generate_jwt_token(generate_session_id())
    request = HTTPRequest(ws_url + "?page=release", connect_timeout=60, request_timeout=60)
    socket = await websocket_connect(request, subprotocols=["bokeh", token])
    try:
        assert await asyncio.wait_for(socket.read_message(), 60) is not None  # ACK
        await socket.write_message(json.dumps({"msgid": "1", "msgtype": "PATCH-DOC"}))
        await socket.write_message("{}")
        try:
            await socket.write_message(json.dumps({"value": "A" * size}))
        except WebSocketClosedError:
            return "closed"
        while True:  # the server's own messages may come first: wait for the reply
            frame = await asyncio.wait_for(socket.read_message(), 120)
            if frame is None:
                return "closed"
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                if json.loads(frame).get("msgtype") == "ERROR":
                    return "ERROR"
    finally:
        socket.close()
        with contextlib.suppress(Exception):  # let the close handshake end: no open socket
            while await asyncio.wait_for(socket.read_message(), 10) is not None:
                pass


def upload_outcome(ws_url: str, size: int) -> str:
    """:func:`send_upload` on an event loop of its own thread: a test worker that has run
    browser tests already has Playwright's loop running in this thread."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, send_upload(ws_url, size)).result()


def test_an_oversized_upload_is_refused_and_the_server_keeps_serving(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "0.5")  # read by the command line made here
    with serving(tmp_path / "server.log") as app:
        ws_url = app.url.replace("http://", "ws://") + "/app/ws"
        # a 0.3 MB file's message is read (and refused by Bokeh as a bad patch: an ERROR
        # reply on an open connection); a 2 MB file's is not read at all: the connection closes
        assert upload_outcome(ws_url, 400_000) == "ERROR"
        assert upload_outcome(ws_url, 2_700_000) == "closed"
        with urllib.request.urlopen(app.url + "/app", timeout=60) as response:
            assert response.status == 200
        assert app.process.poll() is None
