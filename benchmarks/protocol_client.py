"""A light client of the served explorer that speaks Bokeh's websocket protocol directly.

A browser tab spends about a second of CPU building each page's views; on this 2-core machine
twenty tabs leave the server nothing to run on, so a load test with browsers measures the
browsers. This client does what a tab does on the wire and nothing more: it opens a session
(``PULL-DOC-REQ``), says the document is ready (Panel then runs the page's ``onload`` work),
changes a widget's value (``PATCH-DOC`` with ``ModelChanged``) and reads the server's patches
back, keeping only the JSON attributes of the models it is asked about. No model is
instantiated and nothing is rendered, so a simulated analyst costs the client a few
milliseconds of CPU per page.

Bokeh's own ``bokeh.client.ClientSession`` cannot serve here: while it waits for the reply to a
request it drops every other message, so the patches a change triggers are lost.

Example (against a running server)::

    client = await PageClient.open("ws://127.0.0.1:5006/app/ws", {"page": "tradeoff"})
    slider = client.models[client.find("eps-slider")]["data"]["id"]  # the slider's values
    await client.change(slider, value=-0.4)
    await client.wait_for(lambda: client.text_of("tradeoff-level") != before, timeout=30)
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from bokeh.core.serialization import Serializer
from bokeh.events import DocumentReady
from bokeh.protocol import Protocol
from bokeh.protocol.receiver import Receiver
from bokeh.util.token import generate_jwt_token, generate_session_id
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

#: The ``document_ready`` event a browser sends once it has rendered the page.
DOCUMENT_READY = Serializer().encode(DocumentReady())


class ProtocolError(RuntimeError):
    """The server closed the connection or did not answer in time."""


class PageClient:
    """One open page (a Bokeh session) of the served app, seen as model attributes.

    ``models`` maps a model id to its attributes (JSON values) for every object that the
    document or a later patch carried; ``find`` and ``text_of`` look models up by one of their
    CSS classes (the newest model with that class wins: a re-rendered pane is a new model).
    """

    def __init__(self, socket: WebSocketClientConnection) -> None:
        self.socket = socket
        self.receiver = Receiver(Protocol())
        self.models: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.patches = 0

    # ------------------------------------------------------------------- connection
    @classmethod
    async def open(cls, ws_url: str, arguments: Mapping[str, str], *,
                   timeout: float = 60.0) -> PageClient:
        """Connect to ``ws_url`` (``ws://host:port/app/ws``) with the page's URL ``arguments``,
        pull the document and send ``document_ready``; returns once the document is here."""
        session_id = generate_session_id()
        token = generate_jwt_token(session_id)
        query = f"?{urlencode(dict(arguments))}" if arguments else ""
        request = HTTPRequest(ws_url + query, connect_timeout=timeout, request_timeout=timeout)
        socket = await asyncio.wait_for(
            websocket_connect(request, subprotocols=["bokeh", token]), timeout)
        # As a browser: Chromium turns Nagle's algorithm off on its sockets. With it on, the
        # second and third frames of each message waited for the server's delayed
        # acknowledgement of the first (about 40 ms per message).
        socket.protocol.set_nodelay(True)
        client = cls(socket)
        ack = await client.receive(timeout)
        if ack.msgtype != "ACK":
            raise ProtocolError(f"expected ACK, got {ack.msgtype}")
        await client.send("PULL-DOC-REQ", {})
        while True:
            reply = await client.receive(timeout)
            if reply.msgtype == "PULL-DOC-REPLY":
                break
            client.absorb(reply)
        client.index(reply.content["doc"])
        await client.send("PATCH-DOC", {"events": [
            {"kind": "MessageSent", "msg_type": "bokeh_event", "msg_data": DOCUMENT_READY}]})
        return client

    def close(self) -> None:
        """Close the websocket (the server then discards the session after its lifetime)."""
        self.socket.close()

    async def send(self, msgtype: str, content: dict[str, Any]) -> None:
        """Send one protocol message: header, metadata and content frames."""
        header = {"msgid": uuid.uuid4().hex, "msgtype": msgtype}
        # all three frames written before any is awaited, as a browser sends them
        writes = [self.socket.write_message(json.dumps(part)) for part in (header, {}, content)]
        for write in writes:
            await write

    async def receive(self, timeout: float) -> Any:
        """The next whole message from the server (a ``bokeh.protocol`` Message)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"no message within {timeout:g} s")
            try:
                fragment = await asyncio.wait_for(self.socket.read_message(), left)
            except TimeoutError:
                raise ProtocolError(f"no message within {timeout:g} s") from None
            if fragment is None:
                raise ProtocolError("the server closed the connection")
            message = await self.receiver.consume(fragment)
            if message is not None:
                return message

    # ---------------------------------------------------------------------- models
    def index(self, value: Any) -> None:
        """Record every model object found in a JSON value (a document or a patch)."""
        if isinstance(value, dict):
            if value.get("type") == "object" and "id" in value:
                attributes = value.get("attributes", {})
                self.models.setdefault(value["id"], {}).update(attributes)
                self.order.append(value["id"])
            for item in value.values():
                self.index(item)
        elif isinstance(value, list):
            for item in value:
                self.index(item)

    def absorb(self, message: Any) -> None:
        """Apply a server message: the models a patch carries and the attributes it changes."""
        if message.msgtype != "PATCH-DOC":
            return
        self.patches += 1
        for event in message.content.get("events", []):
            self.index(event)
            if event.get("kind") == "ModelChanged":
                model = event["model"]["id"]
                self.models.setdefault(model, {})[event["attr"]] = event.get("new")

    def find(self, css_class: str) -> str | None:
        """The id of the newest model carrying ``css_class`` (None when there is none)."""
        for model in reversed(self.order):
            classes = self.models[model].get("css_classes") or []
            if css_class in classes:
                return model
        return None

    def text_of(self, css_class: str) -> str | None:
        """The ``text`` of the newest model with ``css_class``."""
        model = self.find(css_class)
        return None if model is None else self.models[model].get("text")

    async def change(self, model: str, **attributes: Any) -> None:
        """Set attributes of a model as the browser does when a user moves a widget."""
        events = [{"kind": "ModelChanged", "model": {"id": model}, "attr": name, "new": value}
                  for name, value in attributes.items()]
        self.models[model].update(attributes)
        await self.send("PATCH-DOC", {"events": events})

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> float:
        """Read the server's messages until ``predicate()`` holds; the seconds it took.

        Raises:
            ProtocolError: not within ``timeout`` seconds, or the connection closed.
        """
        start = time.perf_counter()
        while not predicate():
            left = timeout - (time.perf_counter() - start)
            self.absorb(await self.receive(left))
        return time.perf_counter() - start
