"""``toolwire mcp serve`` refuses a client's message that names a key twice, over both transports.

The SDK parses each message itself and keeps the last value of a repeated key, so
``{"arguments": {"city": "Oslo", "city": "Rome"}}`` runs with Rome while a proxy or a log that
keeps the first saw Oslo. toolwire reads every message first with
:func:`toolwire.strict_json.loads`; one that names a key twice never reaches the SDK and is
answered with a JSON-RPC *Invalid Request* error (-32600) naming the key and its path
(:func:`refusal`), carrying the request's ``id`` unless the ``id`` is what is repeated (then, and
for a notification, ``null``). The connection stays usable. A message that is not JSON at all is
left to the SDK, which answers it as before.

- **HTTP** (:class:`UniqueKeyBodies`, behind the body size limit): the answer is a 400, as the
  SDK's to a body it cannot parse.
- **stdio** (:func:`unique_key_stdio`): the SDK's stdio transport reads the lines toolwire hands
  it (:class:`UniqueKeyLines`); the error is written through the transport's own writer, so it
  never tears another message. toolwire opens stdin as the SDK does when it opens it itself:
  fd 0 points at the null device while serving, so a tool's child process reads EOF, never a
  message.

The SDK still parses each message it gets: a message is parsed twice (docs/mcp.md).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import anyio
import structlog

from toolwire import strict_json
from toolwire.server.middleware import replay
from toolwire.strict_json import DuplicateKeyError

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger(__name__)


def refusal(error: DuplicateKeyError, message: str | bytes) -> JSONRPCError:
    """The JSON-RPC error answering ``message``, which names a key twice (``error``)."""
    from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError

    return JSONRPCError(
        jsonrpc="2.0",
        id=_request_id(error, message),
        error=ErrorData(
            code=INVALID_REQUEST,
            message=f"Invalid request: the message has a {error}; send each key once (JSON "
            "parsers disagree on which value of a repeated key wins)",
        ),
    )


def _request_id(error: DuplicateKeyError, message: str | bytes) -> int | str | None:
    """The message's ``id``, unless it is the key named twice (or cannot be read)."""
    if error.location is None or error.location == ("id",):
        return None
    try:
        document = json.loads(message)  # "id" is named once at the top: no value to choose
    except (ValueError, RecursionError):
        return None
    request_id = document.get("id") if isinstance(document, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def _refused(error: DuplicateKeyError, transport: str) -> None:
    log.info(
        "mcp_message_refused",
        transport=transport,
        reason="duplicate_key",
        key=error.key[: strict_json.SHOWN_KEY_CHARS],
        path=error.path,
    )


# -- HTTP ---------------------------------------------------------------------------------------


class UniqueKeyBodies:
    """ASGI middleware: a POST body that names a key twice is answered with a 400 JSON-RPC
    error; any other body goes on to the SDK's application as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:  # one message behind BodyLimitMiddleware, which has read the body already
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        try:
            strict_json.loads(body)
        except DuplicateKeyError as error:
            _refused(error, "http")
            await _refusal_response(refusal(error, body))(scope, receive, send)
            return
        except (ValueError, RecursionError):
            pass  # not JSON (or too deep for Python): the SDK answers it as it always did
        await self.app(scope, replay(messages, receive), send)


def _refusal_response(error: JSONRPCError) -> ASGIApp:
    from starlette.responses import Response

    return Response(
        error.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=400,
        media_type="application/json",
    )


# -- stdio --------------------------------------------------------------------------------------


class UniqueKeyLines(anyio.AsyncFile[str]):
    """stdin's lines for the SDK's stdio transport, but for those that name a key twice: each of
    them is answered through ``answer_with``'s sender instead."""

    def __init__(self, fp: IO[str]) -> None:
        super().__init__(fp)
        self._send: Callable[[SessionMessage], Awaitable[None]] | None = None
        self._ready = anyio.Event()

    def answer_with(self, send: Callable[[SessionMessage], Awaitable[None]]) -> None:
        """Where refusals go: the transport's writer, known once the transport has started."""
        self._send = send
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in super().__aiter__():
            try:
                strict_json.loads(line)
            except DuplicateKeyError as error:
                await self._refuse(error, line)
                continue
            except (ValueError, RecursionError):
                pass  # not JSON: the SDK handles it as it always did
            yield line

    async def _refuse(self, error: DuplicateKeyError, line: str) -> None:
        from mcp.shared.message import SessionMessage

        _refused(error, "stdio")
        await self._ready.wait()
        assert self._send is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # closing down
            await self._send(SessionMessage(refusal(error, line)))


@asynccontextmanager
async def unique_key_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server()`` streams, reading stdin through :class:`UniqueKeyLines`."""
    from mcp.server.stdio import stdio_server

    with _claimed_stdin() as wire:
        lines = UniqueKeyLines(_UnownedText(wire, encoding="utf-8", errors="replace"))
        async with stdio_server(stdin=lines) as (read_stream, write_stream):
            lines.answer_with(write_stream.send)
            yield read_stream, write_stream


class _UnownedText(io.TextIOWrapper):
    """UTF-8 text over a buffer this transport does not own: closing it (when collected too)
    leaves the buffer open, as the SDK's wrapper does (``sys.stdin``'s buffer stays usable)."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


@contextmanager
def _claimed_stdin() -> Iterator[BinaryIO]:
    """The client's end of stdin; while serving, fd 0 is the null device (what the SDK's
    ``stdio_server`` does when it opens stdin itself, which toolwire's lines stop it doing).
    stdin that is not fd 0, or one that cannot be duplicated, is read in place."""
    stdin = sys.stdin.buffer
    try:
        wire = os.dup(0) if stdin.fileno() == 0 else None  # not inherited by child processes
    except (OSError, ValueError, io.UnsupportedOperation):
        wire = None
    if wire is not None and wire <= 2:  # fd 1 or 2 was closed: do not take its place
        os.close(wire)
        wire = None
    if wire is not None:
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            try:
                os.dup2(null, 0)
            finally:
                os.close(null)
        except OSError:
            os.close(wire)
            wire = None
    if wire is None:
        yield stdin
        return
    try:
        # never closed: a worker thread may still be blocked reading it after the transport ends
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        with suppress(OSError):
            os.dup2(wire, 0)
