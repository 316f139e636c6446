"""The HTTP service in the test's own event loop, on a free loopback port (real sockets, so
streaming and disconnects behave as in production), and a small Server-Sent Events reader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from toolwire.app import App
from toolwire.server.auth import ApiKey
from toolwire.server.connections import h11_event_limit, protocol_class
from toolwire.server.factory import create_app
from toolwire.server.run import bind_socket
from toolwire.settings import ServerSettings


@asynccontextmanager
async def serving(
    app: App, settings: ServerSettings | None = None, api_keys: Sequence[ApiKey] = ()
) -> AsyncIterator[str]:
    """Serve ``app`` until the block ends; yields its base URL."""
    settings = settings or ServerSettings()
    async with serving_asgi(create_app(app, settings, api_keys=list(api_keys)), settings) as url:
        yield url


@asynccontextmanager
async def serving_asgi(asgi: ASGIApp, settings: ServerSettings) -> AsyncIterator[str]:
    """Serve any of toolwire's HTTP applications until the block ends; yields its base URL."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        asgi,
        log_config=None,
        access_log=False,
        lifespan="on",
        http=protocol_class(settings.header_timeout_s, settings.max_header_bytes),
        h11_max_incomplete_event_size=h11_event_limit(settings.max_header_bytes),
        timeout_keep_alive=settings.keep_alive_s,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


@dataclass(frozen=True)
class SseMessage:
    """One Server-Sent Event (``event``, its ``data`` parsed as JSON), or a comment."""

    event: str
    data: dict[str, Any]
    comment: str = ""


async def sse_messages(response: httpx.Response) -> AsyncIterator[SseMessage]:
    """The messages of a streamed response, as they arrive."""
    event, data, comment = "message", "", ""
    async for line in response.aiter_lines():
        if line == "":
            if comment and not data:
                yield SseMessage("comment", {}, comment)
            elif data:
                yield SseMessage(event, json.loads(data))
            event, data, comment = "message", "", ""
        elif line.startswith(":"):
            comment = line[1:].strip()
        elif line.startswith("event:"):
            event = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data += line.partition(":")[2].strip()


async def stream_ask(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], **kwargs: Any
) -> tuple[httpx.Response, list[SseMessage]]:
    """``POST /v1/ask`` streamed to its end: the response and every message."""
    async with client.stream("POST", f"{url}/v1/ask", json=body, **kwargs) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response, [message async for message in sse_messages(response)]
        await response.aread()
        return response, []
