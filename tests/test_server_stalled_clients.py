"""Clients that send half a request and stop (issue 34, section 6), over real sockets on
127.0.0.1: each is dropped at its deadline (``server.header_timeout_s`` for the head,
``server.body_timeout_s`` for the body), and none holds a question's place meanwhile, so a
normal question is answered. Before, a place was taken before the body was read: of 60 such
clients, the 8 with half a body held every place of ``server.max_concurrent_questions`` until
their body's deadline (30 s then) and every other question got 503 ``busy``."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from orchestration_kit import plugin_of
from server_support.live import serving
from toolwire import App
from toolwire.registry import DomainSpec
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel

DEADLINE_S = 0.5
BODY = json.dumps({"message": "a question"}).encode()
REQUEST = (
    b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
)
HALF_HEAD = REQUEST[:30]
HALF_BODY = REQUEST[: len(REQUEST) - len(BODY) // 2]


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[str]:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    spec = DomainSpec(name="demo", description="Nothing but the model (test domain).")
    model = ScriptedModel().on_answer("answered")
    app = App.load(config, llm=model, plugins=[plugin_of(spec)], load_entry_points=False)
    settings = ServerSettings(
        max_concurrent_questions=2, header_timeout_s=DEADLINE_S, body_timeout_s=DEADLINE_S
    )
    async with serving(app, settings) as url:
        yield url
    await app.aclose()


def still_open(sock: socket.socket) -> bool:
    """Whether the server keeps the connection (what it sent before closing is read away)."""
    try:
        while sock.recv(65_536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


async def test_half_requests_hold_no_place_and_are_dropped_at_their_deadlines(live: str) -> None:
    parts = urlsplit(live)
    with ExitStack() as stack:
        stalled = []
        for n in range(20):
            sock = stack.enter_context(socket.create_connection((parts.hostname, parts.port)))
            sock.sendall(HALF_BODY if n % 2 else HALF_HEAD)
            sock.setblocking(False)
            stalled.append(sock)
        began = time.monotonic()
        await asyncio.sleep(0.1)  # every head with half a body is in the server's hands

        async with httpx.AsyncClient(base_url=live, timeout=5) as client:
            answered = await client.post("/v1/ask", json={"message": "a normal one"})
        during = time.monotonic() - began
        assert answered.status_code == 200, answered.text  # before: 503 busy

        async with asyncio.timeout(DEADLINE_S + 3):
            while open_ := [sock for sock in stalled if still_open(sock)]:
                await asyncio.sleep(0.05)
        dropped_after = time.monotonic() - began

    assert answered.json()["text"] == "answered"
    assert during < DEADLINE_S  # answered while the stalled ones still waited
    assert not open_ and dropped_after < DEADLINE_S + 1.5
