"""Stalled clients on real sockets: a head that never completes, a body that never arrives, and
more connections than the server takes. Each is dropped or refused; the server keeps answering."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from uvicorn.server import ServerState

from server_support.processes import ServerProcess, write_config
from server_support.sockets import connect, read_until_closed, send_until_closed
from toolwire.server import connections

HEAD_TIMEOUT_S = 0.6
BODY_TIMEOUT_S = 0.6
MAX_HEADER_BYTES = 4096


def start(tmp_path_factory: pytest.TempPathFactory, name: str, **server: object) -> ServerProcess:
    workdir = tmp_path_factory.mktemp(name)
    config = write_config(workdir / "toolwire.yaml", sessions={"store": "memory"}, server=server)
    return ServerProcess(config, workdir / "server.log").start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start(
        tmp_path_factory,
        "deadlines",
        header_timeout_s=HEAD_TIMEOUT_S,
        body_timeout_s=BODY_TIMEOUT_S,
        max_header_bytes=MAX_HEADER_BYTES,
    )
    yield process
    process.stop()


def test_a_client_that_sends_nothing_is_dropped(server: ServerProcess) -> None:
    with connect(server.url) as sock:
        opened = time.monotonic()
        received, closed = read_until_closed(sock)

    assert received == b""
    assert HEAD_TIMEOUT_S * 0.8 <= closed - opened < HEAD_TIMEOUT_S + 5


def test_a_head_sent_a_byte_at_a_time_is_dropped_at_its_deadline(server: ServerProcess) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 200
    with connect(server.url) as sock:
        opened = time.monotonic()
        sent = 0
        try:
            for byte in head:  # one byte every 20 ms: always "active", never finished
                sock.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.02)
        except OSError:  # the server closed the connection while the client was trickling
            pass
        received, closed = read_until_closed(sock)

    assert received == b""
    assert sent < len(head)
    assert closed - opened < HEAD_TIMEOUT_S + 5


def test_a_body_that_never_arrives_is_a_408_and_the_connection_closes(
    server: ServerProcess,
) -> None:
    request = (
        b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n" + b'{"message": "'
    )
    closed = send_until_closed(server.url, request)

    assert closed.body_timeout() == {"timeout_s": BODY_TIMEOUT_S, "received_bytes": 13}
    assert closed.after_s < BODY_TIMEOUT_S + 5


def test_a_head_over_the_size_limit_is_a_431_and_the_connection_closes(
    server: ServerProcess,
) -> None:
    """Before the limit, uvicorn's httptools protocol buffered a head of any size until the
    deadline: one client sent 90 MB of one header in 8 s and the server grew by 160 MB."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEADER_BYTES * 4)
    closed = send_until_closed(server.url, head)  # never finished: only the size can end it

    assert closed.head.startswith(b"HTTP/1.1 431 "), closed.head
    assert b"connection: close" in closed.head.lower()
    error = json.loads(closed.body)
    assert error["error"] == "headers_too_large"
    assert "server.max_header_bytes" in error["message"]
    assert error["details"] == {"limit_bytes": MAX_HEADER_BYTES}
    assert closed.after_s < HEAD_TIMEOUT_S  # refused at its size, not dropped at its deadline
    dropped = [e for e in server.events() if e.get("reason") == "request_head_too_large"]
    assert dropped and dropped[-1]["limit_bytes"] == MAX_HEADER_BYTES


def test_headers_within_the_size_limit_are_served(server: ServerProcess) -> None:
    headers = {f"X-Pad-{n}": "b" * 100 for n in range(25)}  # about 3 KB of a 4 KB limit
    assert httpx.get(f"{server.url}/healthz", headers=headers, timeout=5).status_code == 200


def test_the_server_answers_while_clients_stall(server: ServerProcess) -> None:
    with ExitStack() as stack:
        for _ in range(5):
            stack.enter_context(connect(server.url)).sendall(b"GET /healthz HTTP/1.1\r\n")
        assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
    events = [event for event in server.events() if event["event"] == "connection_dropped"]
    assert events and events[0]["reason"] == "request_head_timeout"


def test_connections_beyond_the_limit_get_503(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    limited = start(tmp_path_factory, "limit", max_connections=2, header_timeout_s=30)
    try:
        with connect(limited.url):  # one idle connection: the request makes two, within the limit
            time.sleep(0.2)
            assert httpx.get(f"{limited.url}/healthz", timeout=5).status_code == 200
        with connect(limited.url), connect(limited.url):  # two idle ones: a third is one too many
            time.sleep(0.2)
            refused = httpx.get(f"{limited.url}/healthz", timeout=5)
        time.sleep(0.2)
        again = httpx.get(f"{limited.url}/healthz", timeout=5)
    finally:
        limited.stop()

    assert refused.status_code == 503
    assert again.status_code == 200


# -- both protocol classes, in process (httptools is what uvicorn[standard] installs; h11 is the
# -- fallback without it) -----------------------------------------------------------------------


async def ok_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def listening(protocol: type[asyncio.Protocol]) -> AsyncIterator[int]:
    limit = connections.h11_event_limit(getattr(protocol, "max_header_bytes", 32_768))
    config = uvicorn.Config(
        ok_app,
        http=protocol,
        log_config=None,
        timeout_keep_alive=30,
        h11_max_incomplete_event_size=limit,
    )
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: protocol(config=config, server_state=state, app_state={}),  # type: ignore[call-arg]
        "127.0.0.1",
        0,
    )
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def h11_protocol(timeout_s: float, max_header_bytes: int = 32_768) -> type[asyncio.Protocol]:
    attributes = {"head_timeout_s": timeout_s, "max_header_bytes": max_header_bytes}
    return type("H11", (connections.H11WithHeadDeadline,), attributes)


@pytest.mark.parametrize("make", [connections.protocol_class, h11_protocol], ids=["auto", "h11"])
async def test_each_protocol_drops_a_stalled_head_also_after_a_kept_alive_request(
    make: Any,
) -> None:
    protocol = make(0.3)
    async with listening(protocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = await reader.readuntil(b"ok")
        writer.write(b"GET / HTTP/1.1\r\nHo")  # the next request's head stalls
        begin = time.monotonic()
        rest = await asyncio.wait_for(reader.read(), timeout=5)
        stalled_for = time.monotonic() - begin
        writer.close()

        fresh_reader, fresh_writer = await asyncio.open_connection("127.0.0.1", port)
        nothing = await asyncio.wait_for(fresh_reader.read(), timeout=5)  # sends nothing at all
        fresh_writer.close()

    assert answered.startswith(b"HTTP/1.1 200")
    assert rest == b"" and 0.2 < stalled_for < 3
    assert nothing == b""
    if make is connections.protocol_class:
        assert protocol.__name__ == "HttpToolsWithHeadDeadline"


@pytest.mark.parametrize("make", [connections.protocol_class, h11_protocol], ids=["auto", "h11"])
async def test_each_protocol_refuses_a_head_over_the_size_limit_after_a_kept_alive_request(
    make: Any,
) -> None:
    protocol = make(30.0, 2048)
    async with listening(protocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 1800 + b"\r\n\r\n")
        answered = await reader.readuntil(b"ok")
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        for _ in range(10):  # the next head grows in pieces, each well under the limit
            writer.write(b"X-Pad: " + b"a" * 500 + b"\r\n")
            await writer.drain()
        refused = await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()

    assert answered.startswith(b"HTTP/1.1 200")
    assert refused.startswith(b"HTTP/1.1 431 ")
    assert json.loads(refused.partition(b"\r\n\r\n")[2])["error"] == "headers_too_large"
