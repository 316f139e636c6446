"""ASGI middleware: request ids and access logs, and the request body size limit.

Both are plain ASGI (not ``BaseHTTPMiddleware``) so that the request id bound into structlog's
context variables is seen by every event the request logs, in the handler and in the tasks the
orchestrator starts, and so that an over-long body is refused before the application sees it.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolwire.errors import PLUGIN_FAILURES
from toolwire.server.problems import ApiError

log = structlog.get_logger("toolwire.server.access")

REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID_KEY = REQUEST_ID_HEADER.encode("latin-1")
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def _header(scope: Scope, wanted: bytes) -> str | None:
    """The value of the header named ``wanted`` (lower-case bytes, as ASGI names headers)."""
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


class RequestContextMiddleware:
    """Give every request an id (``X-Request-ID`` in and out), bind it into structlog's context,
    log one ``http_request`` access event, and answer a crash with a JSON 500 instead of a bare
    text page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, _REQUEST_ID_KEY)
        if incoming is not None and _VALID_REQUEST_ID.fullmatch(incoming):
            request_id = incoming
        else:
            request_id = uuid.uuid4().hex
        status = 500
        started = False
        begin = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                headers = [
                    (key, value)
                    for key, value in message.get("headers", [])
                    if key.lower() != _REQUEST_ID_KEY
                ]
                headers.append((_REQUEST_ID_KEY, request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            except PLUGIN_FAILURES:  # SystemExit too: plugin code (a store, a model) may raise it
                log.exception("request_crashed", method=scope["method"], path=scope["path"])
                if not started:
                    crashed = ApiError(
                        500,
                        "internal_error",
                        "the server failed while handling this request; the request id finds "
                        "the traceback in the server's log",
                    )
                    await crashed.response()(scope, receive, send_with_id)
            finally:
                client = scope.get("client")
                log.info(
                    "http_request",
                    method=scope["method"],
                    path=scope["path"],
                    status=status,
                    duration_ms=round((time.perf_counter() - begin) * 1000, 2),
                    client=f"{client[0]}:{client[1]}" if client else None,
                )


class BodyLimitMiddleware:
    """Refuse a request body larger than the limit with 413, whether or not it declares its
    length, and one that does not arrive within ``timeout`` seconds with 408 (closing the
    connection: a stalled client holds no slot); the body is read (at most ``limit`` bytes)
    before the application runs."""

    def __init__(
        self, app: ASGIApp, limit: Callable[[], int], timeout: Callable[[], float]
    ) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(limit, int(declared))(scope, receive, send)
            return

        chunks: list[bytes] = []
        size = 0
        timeout = self.timeout()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client went away
                        await self.app(scope, replay([message], receive), send)
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await _too_large(limit, None)(scope, receive, send)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            log.info("body_timed_out", received_bytes=size, timeout_s=timeout)
            await _body_timeout(timeout, size)(scope, receive, send)
            return
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, replay([body], receive), send)


def _too_large(limit: int, declared: int | None) -> ASGIApp:
    size = f"{declared} bytes" if declared is not None else "more than that"
    return ApiError(
        413,
        "body_too_large",
        f"the request body is {size}; the limit is {limit} bytes (server.max_body_bytes); "
        "send a shorter message",
        details={"limit_bytes": limit},
    ).response()


def _body_timeout(timeout: float, received: int) -> ASGIApp:
    return ApiError(
        408,
        "body_timeout",
        f"the request body did not arrive within {timeout:g} s (server.body_timeout_s); "
        f"{received} bytes came; send the whole body at once",
        details={"timeout_s": timeout, "received_bytes": received},
        headers={"Connection": "close"},
    ).response()


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that returns the buffered messages first, then the real ones."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
