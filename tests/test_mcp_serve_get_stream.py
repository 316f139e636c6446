"""``GET /mcp`` on ``toolwire mcp serve --http`` (issue 34, section 5): the endpoint is stateless,
so a stream of server-initiated messages could never carry one; it is refused with 405 and
``Allow: POST`` at once, as the MCP specification lets such a server answer. Before, the stream
stayed open forever with pings alone, and 20 of them took every connection of
``server.max_connections`` (a client's ping then got 503)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from mcp_support.serving import McpHttpServer, http_session, launcher_env, post_ping, trip_config
from orchestration_kit import plugin_of
from server_support.gated import Gated
from server_support.live import serving_asgi
from server_support.sockets import connect, read_until_closed
from toolwire import App
from toolwire.mcp.server import DomainMcpServer
from toolwire.mcp.transports import MCP_PATH, http_app
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel

EVENT_STREAM = {"Accept": "text/event-stream"}
REFUSAL = (
    "this MCP endpoint is stateless and sends no messages of its own, so it offers no event "
    "stream to GET; send each JSON-RPC message with POST /mcp"
)


@pytest.fixture
async def mcp_url(tmp_path: Path) -> AsyncIterator[str]:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    spec = DomainSpec(name="demo", description="One tool (test domain).")
    plugin = plugin_of(spec, Gated)
    app = App.load(config, llm=ScriptedModel(), plugins=[plugin], load_entry_points=False)
    settings = app.config.server
    async with serving_asgi(http_app(DomainMcpServer(app, "demo"), settings, []), settings) as url:
        yield f"{url}{MCP_PATH}"
    await app.aclose()


async def test_get_is_405_at_once_and_the_sdks_client_still_works(mcp_url: str) -> None:
    async with httpx.AsyncClient(timeout=3) as client:  # an open stream would time out
        started = time.monotonic()
        refused = await client.get(mcp_url, headers=EVENT_STREAM)
        took = time.monotonic() - started

    assert refused.status_code == 405
    assert refused.headers["allow"] == "POST"
    assert refused.headers["connection"] == "close"
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["error"] == "method_not_allowed"
    assert refused.json()["message"] == REFUSAL
    assert took < 1

    async with http_session(mcp_url) as session:  # initialises, lists, calls over POST
        listed = await session.list_tools()
        assert [tool.name for tool in listed.tools][:1] == ["demo.ask"]


def test_idle_get_streams_no_longer_take_every_connection(tmp_path: Path) -> None:
    config = trip_config(tmp_path, {"max_connections": 3})
    server = McpHttpServer(config, launcher_env())
    host = urlsplit(server.url).netloc  # the SDK's DNS-rebinding check wants host and port
    request = (f"GET /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n").encode()
    try:
        with ExitStack() as stack:
            streams = [stack.enter_context(connect(server.url)) for _ in range(3)]
            for sock in streams:
                sock.sendall(request)
            opened = time.monotonic()
            answers = [read_until_closed(sock) for sock in streams]
            ping = post_ping(server.url, {})  # the idle clients still hold their sockets
    finally:
        server.stop()

    for received, closed in answers:
        assert received.startswith(b"HTTP/1.1 405 "), received[:200]
        assert b"connection: close" in received.lower()
        assert closed - opened < 1  # closed with the answer, not at the idle timeout
    assert ping.status_code == 200, ping.text
    assert [e for e in server.events() if e["event"] == "mcp_event_stream_refused"]
