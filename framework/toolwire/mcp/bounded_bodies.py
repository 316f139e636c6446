"""The streamable HTTP transport's whole-body answers, bounded in size.

A streamable HTTP server answers a POST with an event stream or with one plain JSON body. The
SDK bounds each event of a stream (``max_sse_event_size``) but reads a JSON body whole
(``response.aread()``), so one answer could fill toolwire's memory. The httpx client toolwire
hands the SDK carries a response hook (:func:`bound_bodies`) that puts every body that is not an
event stream behind :class:`BoundedBody`, which holds at most ``max_result_bytes`` of it:

- the body is counted as decoded (a compressed body is decoded here, so a small gzip body cannot
  grow past the limit either); one whose Content-Length already says it is too large is not
  read at all.
- past the limit the reading stops and the response is closed, and the SDK gets instead the
  stdio transport's JSON-RPC error answering the same request (:func:`refusal`): the call fails
  at once naming the limit, and the session stays usable. A body too large that answers no
  JSON-RPC request (the session's closing ``DELETE``) fails its read with :class:`BodyTooLarge`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

import httpx2

from toolwire.mcp.bounded_lines import TooLarge, refusal

EVENT_STREAM = "text/event-stream"


class BodyTooLarge(httpx2.StreamError):
    """A body over the limit that answers no JSON-RPC request."""


def bound_bodies(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx ``response`` event hook: each body but an event stream's is read through a
    :class:`BoundedBody` of ``limit`` bytes."""

    async def bound(response: httpx2.Response) -> None:
        media_type = response.headers.get("content-type", "").partition(";")[0]
        if media_type.strip().lower() == EVENT_STREAM:
            return
        received = httpx2.Response(  # the body as sent, compressed or not
            response.status_code,
            headers=response.headers,
            stream=response.stream,
            request=response.request,
        )
        response.headers.pop("content-encoding", None)  # BoundedBody yields it decoded
        response.stream = BoundedBody(received, limit)

    return bound


class BoundedBody(httpx2.AsyncByteStream):
    """The decoded body of ``response``, held until its end if it is at most ``limit`` bytes
    (see the module docstring)."""

    def __init__(self, response: httpx2.Response, limit: int) -> None:
        self.response = response
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = await self._read()
        if isinstance(body, TooLarge):
            yield self._refusal(body)
            return
        for piece in body:
            yield piece

    async def aclose(self) -> None:
        await self.response.aclose()

    async def _read(self) -> list[bytes] | TooLarge:
        """The body's pieces, or what refused it (the response is then closed unread)."""
        declared = _declared_size(self.response)
        if declared is not None and declared > self.limit:
            await self.response.aclose()
            return TooLarge(size=declared, limit=self.limit)
        pieces: list[bytes] = []
        size = 0
        async with aclosing(self.response.aiter_bytes()) as body:  # closing it closes the response
            async for piece in body:
                size += len(piece)
                if size > self.limit:
                    return TooLarge(size=None, limit=self.limit)
                pieces.append(piece)
        return pieces

    def _refusal(self, refused: TooLarge) -> bytes:
        request_id = _request_id(self.response.request)
        if request_id is None:
            raise BodyTooLarge(
                f"the server's answer to {self.response.request.method} is over the limit of "
                f"{self.limit:,} bytes (max_result_bytes)"
            )
        return refusal(request_id, refused).encode()


def _declared_size(response: httpx2.Response) -> int | None:
    """The body's size by its Content-Length; None when there is none or the body is compressed
    (the header then counts the compressed bytes)."""
    length = response.headers.get("content-length", "")
    if "content-encoding" in response.headers or not length.isdigit():
        return None
    return int(length)


def _request_id(request: httpx2.Request) -> int | str | None:
    """The ``id`` of the JSON-RPC request a POST carried (None: no request, e.g. a ``DELETE``)."""
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, int | str) else None
