"""The bound on whole HTTP bodies (``toolwire.mcp.bounded_bodies``), on httpx's mock transport.

End to end, with real servers on 127.0.0.1: tests/test_mcp_consume.py (``max_result_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from toolwire.mcp.bounded_bodies import BodyTooLarge, bound_bodies
from toolwire.mcp.bounded_lines import TooLarge, too_large

LIMIT = 1_000


def client(body: bytes, content_type: str) -> httpx2.AsyncClient:
    """A client whose every request is answered with ``body`` (streamed, as from a network),
    bounded at ``LIMIT`` bytes."""

    async def streamed() -> AsyncIterator[bytes]:
        yield body

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=streamed(), headers={"content-type": content_type})

    return httpx2.AsyncClient(
        transport=httpx2.MockTransport(answer), event_hooks={"response": [bound_bodies(LIMIT)]}
    )


async def test_a_body_over_the_limit_becomes_an_error_answering_the_request() -> None:
    """Without a Content-Length the reading stops at the limit: the size is not known."""
    async with client(b"x" * (LIMIT + 1), "application/json") as http:
        response = await http.post("http://mcp.test/mcp", json={"jsonrpc": "2.0", "id": 7})
    answer = json.loads(response.content)
    assert answer["id"] == 7
    assert answer["error"]["message"] == (
        "the server's answer is over the limit of 1,000 bytes (max_result_bytes)"
    )
    assert too_large(answer["error"]["data"]) == TooLarge(size=None, limit=LIMIT)


async def test_a_body_over_the_limit_answering_no_request_fails_its_read() -> None:
    async with client(b"x" * (LIMIT + 1), "application/json") as http:
        with pytest.raises(BodyTooLarge, match=r"answer to DELETE is over the limit of 1,000"):
            await http.delete("http://mcp.test/mcp")


async def test_an_event_stream_and_a_body_within_the_limit_pass_as_they_are() -> None:
    events = b"data: " + b"x" * LIMIT * 3 + b"\n\n"
    async with client(events, "text/event-stream; charset=utf-8") as http:
        assert (await http.get("http://mcp.test/mcp")).content == events
    async with client(b"y" * LIMIT, "application/json") as http:
        assert (await http.post("http://mcp.test/mcp", json={"id": 1})).content == b"y" * LIMIT
