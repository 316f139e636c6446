"""``toolwire mcp serve --http`` under ``toolwire serve``'s security rules, over real HTTP on
127.0.0.1: the refusal of a non-loopback address without an API key, slow, large and numerous
clients cut off, and a conversation bound to the API key that started it. (A missing or wrong
key: ``test_mcp_serve.py::test_http_needs_the_bearer_token_when_one_is_set``.)"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from mcp_support.serving import (
    TOOLWIRE,
    McpHttpServer,
    http_session,
    launcher_env,
    post_ping,
    trip_config,
)
from server_support.sockets import (
    EXPOSURE_REFUSAL,
    connect,
    read_until_closed,
    refused_start,
    send_until_closed,
)

HEAD_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 2
MAX_BODY_BYTES = 4096
TENANT_TOKENS = {"TENANT_A_KEY": "token-of-tenant-a", "TENANT_B_KEY": "token-of-tenant-b"}


def desk_config(tmp_path: Path) -> Path:
    """One YAML-declared domain without tools: nothing to install, no model needed."""
    path = tmp_path / "desk.yaml"
    config = {
        "default_domain": "desk",
        "sessions": {"store": "memory"},
        "domains": [{"name": "desk"}],
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def serve_on_all_interfaces(config: Path, *options: str) -> list[str]:
    return [TOOLWIRE, "mcp", "serve", "--http", "--config", str(config), "--host", "0.0.0.0",
            "--port", "0", *options]  # fmt: skip


# -- exposure -----------------------------------------------------------------------------------


def test_a_public_address_without_a_key_is_refused(tmp_path: Path) -> None:
    command = serve_on_all_interfaces(desk_config(tmp_path))

    assert refused_start(command) == EXPOSURE_REFUSAL.format(path="/mcp")


def test_a_public_address_is_served_openly_only_when_asked_and_said(tmp_path: Path) -> None:
    config = desk_config(tmp_path)
    server = McpHttpServer(
        config, {"TOOLWIRE_PLUGINS": ""}, serve_on_all_interfaces(config, "--insecure-no-auth")
    )
    try:
        local = server.url.replace("//0.0.0.0:", "//127.0.0.1:")
        assert post_ping(local, {}).status_code == 200  # open, as asked
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "warning: --insecure-no-auth: /mcp on 0.0.0.0 answers anyone" in log
    (warning,) = [e for e in server.events() if e["event"] == "serving_without_authentication"]
    assert warning["path"] == "/mcp"


def test_a_public_address_with_a_key_needs_no_flag(tmp_path: Path) -> None:
    config = desk_config(tmp_path)
    env = {"TOOLWIRE_PLUGINS": "", "TOOLWIRE_API_TOKEN": "tok"}
    server = McpHttpServer(config, env, serve_on_all_interfaces(config))
    try:
        local = server.url.replace("//0.0.0.0:", "//127.0.0.1:")
        assert post_ping(local, {}).status_code == 401
        assert post_ping(local, {"Authorization": "Bearer tok"}).status_code == 200
    finally:
        server.stop()


# -- slow and numerous clients ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bounded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpHttpServer]:
    limits = {
        "header_timeout_s": HEAD_TIMEOUT_S,
        "body_timeout_s": BODY_TIMEOUT_S,
        "max_connections": MAX_CONNECTIONS,
        "max_body_bytes": MAX_BODY_BYTES,
    }
    server = McpHttpServer(trip_config(tmp_path_factory.mktemp("bounded"), limits), launcher_env())
    yield server
    server.stop()


def test_a_client_that_never_finishes_its_head_is_dropped(bounded_server: McpHttpServer) -> None:
    with connect(bounded_server.url) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
        opened = time.monotonic()
        received, closed = read_until_closed(sock)

    assert received == b""
    assert HEAD_TIMEOUT_S * 0.8 <= closed - opened < HEAD_TIMEOUT_S + 5
    dropped = [e for e in bounded_server.events() if e["event"] == "connection_dropped"]
    assert dropped and dropped[-1]["reason"] == "request_head_timeout"


def test_a_body_that_never_arrives_is_a_408_and_the_connection_closes(
    bounded_server: McpHttpServer,
) -> None:
    request = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n"
        b'{"jsonrpc": "2.0"'
    )
    closed = send_until_closed(bounded_server.url, request)

    assert closed.body_timeout() == {"timeout_s": BODY_TIMEOUT_S, "received_bytes": 17}
    assert BODY_TIMEOUT_S * 0.8 <= closed.after_s < BODY_TIMEOUT_S + 5


def test_a_body_over_the_limit_is_refused_with_a_413(bounded_server: McpHttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * MAX_BODY_BYTES}}
    response = httpx.post(
        bounded_server.url,
        json=body,
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )

    assert response.status_code == 413
    assert response.json()["error"] == "body_too_large"
    assert response.json()["details"] == {"limit_bytes": MAX_BODY_BYTES}


def test_connections_beyond_the_limit_get_503(bounded_server: McpHttpServer) -> None:
    with ExitStack() as stack:
        for _ in range(MAX_CONNECTIONS):  # idle connections, each within its head deadline
            stack.enter_context(connect(bounded_server.url))
        time.sleep(0.2)
        refused = post_ping(bounded_server.url, {})
    time.sleep(0.2)
    again = post_ping(bounded_server.url, {})

    assert refused.status_code == 503
    assert again.status_code == 200


# -- a message naming a key twice ---------------------------------------------------------------

BOOKING_CALL = (
    '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
    '"params": {"name": "trip.booking", "arguments": %s}}'
)


def post_message(url: str, raw: bytes) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(url, content=raw, headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("raw", "request_id", "key", "path"),
    [
        (BOOKING_CALL % '{"city": "Oslo", "city": "Rome"}', 7, "city", "$.params.arguments.city"),
        (BOOKING_CALL % '{"city": "Oslo", "ask": {"x": 1, "x": 2}}', 7, "x",
         "$.params.arguments.ask.x"),
        ('{"jsonrpc": "2.0", "id": 7, "id": 8, "method": "ping"}', None, "id", "$.id"),
    ],
    ids=["arguments", "nested", "id"],
)  # fmt: skip
def test_a_message_naming_a_key_twice_is_refused_naming_it(
    bounded_server: McpHttpServer, raw: str, request_id: int | None, key: str, path: str
) -> None:
    """The SDK read it with the last value winning (a table booked in Rome; the ping answered
    as request 8), where a proxy or a log that keeps the first value saw another message."""
    response = post_message(bounded_server.url, raw.encode())

    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": request_id,  # not the id when the id is what is named twice
        "error": {
            "code": -32600,
            "message": f'Invalid request: the message has a duplicate key "{key}" at {path}; '
            "send each key once (JSON parsers disagree on which value of a repeated key wins)",
        },
    }
    refused = [e for e in bounded_server.events() if e["event"] == "mcp_message_refused"]
    assert {"transport": "http", "key": key, "path": path}.items() <= refused[-1].items()


def test_a_message_naming_each_key_once_is_answered(bounded_server: McpHttpServer) -> None:
    response = post_message(bounded_server.url, (BOOKING_CALL % '{"city": "Oslo"}').encode())

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["structuredContent"]["text"].startswith("Table booked in Oslo")


# -- a conversation belongs to the key that started it ------------------------------------------


@pytest.fixture
def tenants_server(tmp_path: Path) -> Iterator[McpHttpServer]:
    keys = [
        {"name": "tenant-a", "token_env": "TENANT_A_KEY"},
        {"name": "tenant-b", "token_env": "TENANT_B_KEY"},
    ]
    server = McpHttpServer(
        trip_config(tmp_path, {"api_keys": keys}), launcher_env(**TENANT_TOKENS)
    )
    yield server
    server.stop()


async def test_another_key_cannot_continue_a_conversation_and_it_stays_intact(
    tenants_server: McpHttpServer,
) -> None:
    url = tenants_server.url
    assert post_ping(url, {"Authorization": "Bearer token-of-tenant-c"}).status_code == 401
    async with http_session(url, "token-of-tenant-a") as tenant_a:
        started = await tenant_a.call_tool("trip.ask", {"message": "Book me a table"})
        assert started.structured_content is not None
        session_id = started.structured_content["session_id"]
        async with http_session(url, "token-of-tenant-b") as tenant_b:
            stolen = await tenant_b.call_tool(
                "trip.ask", {"message": "city=Oslo", "session_id": session_id}
            )
            missing = await tenant_b.call_tool(
                "trip.ask", {"message": "city=Oslo", "session_id": "no-such-session"}
            )
        resumed = await tenant_a.call_tool(
            "trip.ask", {"message": "city=Rome", "session_id": session_id}
        )

    assert stolen.is_error and missing.is_error
    # the refusal says no more than a missing session would: nothing tells that it exists
    assert stolen.content[0].text == (  # type: ignore[union-attr]
        missing.content[0].text.replace("no-such-session", session_id)  # type: ignore[union-attr]
    )
    assert "no conversation is stored under session id" in stolen.content[0].text  # type: ignore[union-attr]
    assert resumed.structured_content is not None
    assert resumed.structured_content["text"].startswith("Table booked in Rome")
    events = tenants_server.events()
    (mismatch,) = [e for e in events if e["event"] == "session_owner_mismatch"]
    assert (mismatch["owner"], mismatch["caller"]) == ("tenant-a", "tenant-b")
    asks = [e["caller"] for e in events if e["event"] == "mcp_ask"]
    assert asks == ["tenant-a", "tenant-b", "tenant-b", "tenant-a"]
    assert all(token not in tenants_server.log_path.read_text() for token in TENANT_TOKENS.values())
