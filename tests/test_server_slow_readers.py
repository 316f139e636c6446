"""Clients that stop reading their answer (issue 34, section 5), over real sockets on 127.0.0.1:
a question's place under ``server.max_concurrent_questions`` comes back when its time
(``server.request_timeout_s`` plus ``RESPONSE_GRACE_S``) is up, whether or not the client reads,
and the connection of a response nobody reads is dropped. Before, a client that stopped reading
a 13 MB stream kept its place (503 ``busy`` for everyone else) for as long as it kept the
connection open."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from structlog.testing import capture_logs

from orchestration_kit import plugin_of
from server_support.gated import Slow
from server_support.live import serving
from toolwire import App
from toolwire.registry import DomainSpec
from toolwire.server.admission import RESPONSE_GRACE_S
from toolwire.server.schemas import AskRequest
from toolwire.server.streaming import answer_events
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel

REQUEST_TIMEOUT_S = 1.0
HUGE = "x" * 13_000_000
"""An answer far larger than what the sockets between server and client buffer."""


@pytest.fixture
async def live(tmp_path: Path, info_logs: None) -> AsyncIterator[str]:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    model = ScriptedModel().on_answer(
        lambda question, contexts: HUGE if "huge" in question else "ok"
    )
    spec = DomainSpec(name="demo", description="Answers of any size (test domain).")
    app = App.load(config, llm=model, plugins=[plugin_of(spec)], load_entry_points=False)
    settings = ServerSettings(
        max_concurrent_questions=1, request_timeout_s=REQUEST_TIMEOUT_S, keep_alive_s=1
    )
    async with serving(app, settings) as url:
        yield url
    await app.aclose()


async def stalled_client(url: str, body: dict[str, object]) -> socket.socket:
    """A client that sends the question, reads the first bytes of its answer, and stops."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(payload) + payload
    )
    sock.setblocking(False)
    first = b""
    async with asyncio.timeout(5):
        while not first:
            try:
                first = sock.recv(1024)
            except BlockingIOError:
                await asyncio.sleep(0.02)
    assert first.startswith(b"HTTP/1.1 200 "), first
    return sock


async def admitted_after(client: httpx.AsyncClient, began: float) -> float:
    """Seconds from ``began`` until a small question is admitted (no longer 503 busy)."""
    async with asyncio.timeout(REQUEST_TIMEOUT_S + RESPONSE_GRACE_S + 5):
        while True:
            response = await client.post("/v1/ask", json={"message": "a small one"})
            if response.status_code != 503:
                assert response.status_code == 200, response.text
                return time.monotonic() - began
            assert response.json()["error"] == "busy"
            await asyncio.sleep(0.1)


async def closed_after(sock: socket.socket, began: float) -> float:
    """Seconds from ``began`` until the server has dropped the connection (what the kernel
    buffered is read first, as the stalled client would once it reads again)."""
    async with asyncio.timeout(10):
        while True:
            try:
                if sock.recv(1 << 20) == b"":
                    break
            except BlockingIOError:
                await asyncio.sleep(0.05)
            except ConnectionResetError:  # dropped with bytes still unsent: a reset
                break
    return time.monotonic() - began


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
async def test_a_client_that_stops_reading_gives_its_place_back_when_its_time_is_up(
    live: str, stream: bool
) -> None:
    async with httpx.AsyncClient(base_url=live, timeout=10) as client:
        with capture_logs() as logs:
            began = time.monotonic()
            sock = await stalled_client(live, {"message": "a huge answer", "stream": stream})
            admitted = await admitted_after(client, began)
            # still not reading, past the grace and the idle timeout (keep_alive_s, 1 s)
            await asyncio.sleep(
                began + REQUEST_TIMEOUT_S + RESPONSE_GRACE_S + 0.5 - time.monotonic()
            )
            closed = await closed_after(sock, began)
            sock.close()
            again = await client.post("/v1/ask", json={"message": "and another"})

    assert again.status_code == 200
    assert admitted < REQUEST_TIMEOUT_S + 1  # the place comes back when the time is up
    assert closed < REQUEST_TIMEOUT_S + RESPONSE_GRACE_S + 2
    dropped = [e for e in logs if e.get("reason") == "response_not_read"]
    assert dropped and dropped[0]["event"] == "connection_dropped"
    if stream:  # the stream's last message waited for the client: its time ran out
        (overran,) = [e for e in logs if e["event"] == "request_overran"]
        assert overran["response_started"] is True
        assert overran["reason"] == "the client did not read the response"
        assert overran["action"] == "connection dropped"


async def test_a_client_that_reads_gets_its_whole_answer(live: str) -> None:
    async with httpx.AsyncClient(base_url=live, timeout=10) as client:
        response = await client.post("/v1/ask", json={"message": "a huge answer"})

    assert response.status_code == 200
    assert response.json()["text"] == HUGE


async def test_a_stream_nobody_reads_stops_its_question_when_its_time_is_up(
    tmp_path: Path,
) -> None:
    """The stream's generator waits in a send while its client does not read, so it cannot stop
    the question itself: a timer of the question's own does, at ``request_timeout_s``; a client
    that reads again then gets the timeout's ``error`` event."""
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    model = ScriptedModel().on_suitability(["slow"]).on_gatekeeper(True).on_answer("late")
    spec = DomainSpec(name="demo", description="A slow tool (test domain).")
    app = App.load(config, llm=model, plugins=[plugin_of(spec, Slow)], load_entry_points=False)
    slow = app.tool("slow")
    assert isinstance(slow, Slow)
    settings = ServerSettings(request_timeout_s=0.5)
    stream = answer_events(app, AskRequest(message="something slow"), None, settings)

    first = await anext(stream)  # then the client reads nothing for a while
    await asyncio.wait_for(slow.gate.reached.wait(), 5)
    await asyncio.sleep(0.8)
    stopped = slow.gate.cancelled
    rest = [message async for message in stream]
    await app.aclose()

    assert first.startswith(b"event: round_started")
    assert stopped and not slow.gate.finished
    assert rest[-1].startswith(b"event: error") and b'"status":504' in rest[-1]


@pytest.mark.parametrize("make", ["auto", "h11"])
async def test_each_protocol_offers_the_abort_and_drops_an_unread_response_when_idle(
    make: str,
) -> None:
    """httptools (what uvicorn[standard] installs) and h11 (the fallback without it) alike."""
    import uvicorn
    from uvicorn.server import ServerState

    from toolwire.server import connections

    seen: list[object] = []

    async def huge_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope.get("extensions", {}).get(connections.ABORT_EXTENSION))
        body = HUGE.encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    protocol: type[asyncio.Protocol] = connections.protocol_class(30.0)
    if make == "h11":
        protocol = type("H11", (connections.H11WithHeadDeadline,), {"head_timeout_s": 30.0})
    config = uvicorn.Config(huge_app, http=protocol, log_config=None, timeout_keep_alive=1)
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: protocol(config=config, server_state=state, app_state={}),  # type: ignore[call-arg]
        "127.0.0.1",
        0,
    )
    try:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        began = time.monotonic()
        await asyncio.sleep(2)  # not reading, past the idle timeout
        got = 0
        with pytest.raises(ConnectionResetError):
            async with asyncio.timeout(5):
                while chunk := await reader.read(1 << 20):
                    got += len(chunk)
                raise ConnectionResetError("closed without a reset")  # pragma: no cover
        writer.close()
    finally:
        server.close()

    assert len(seen) == 1 and callable(seen[0])
    assert got < len(HUGE)  # dropped, not delivered
    assert time.monotonic() - began < 5
