"""A model server whose reply body is not JSON, or not UTF-8 (issue 34, section 6): a
``ModelError`` naming what is wrong, so HTTP 502 ``model_error`` (an ``error`` event with status
502 in a stream), never a 500 ``internal_error``. Each body comes from a raw socket server on
127.0.0.1 that answers every request with the same bytes, whatever the path: the chat
completion (plain and streamed) and the model list (asked when ``llm.model`` is unset)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from orchestration_kit import Query, plugin_of
from server_support.live import serving, stream_ask
from toolwire import App, ModelError
from toolwire.events import observing
from toolwire.llm import OpenAIGateway
from toolwire.registry import DomainSpec
from toolwire.settings import LLMSettings

NOT_UTF8 = ("application/json", b'{"choices": [{"message": {"content": "\xff\xfe"}}]}')
NOT_JSON = ("application/json", b"<html>bad gateway</html>")
STREAM_NOT_JSON = ("text/event-stream", b"data: not json\n\n")
STREAM_NOT_UTF8 = ("text/event-stream", b'data: {"choices": "\xff"}\n\n')


@asynccontextmanager
async def answering(content_type: str, body: bytes) -> AsyncIterator[str]:
    """A server answering every request with ``body``; yields its base URL."""
    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1")
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            handlers.discard(task)
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()
        for handler in list(handlers):
            handler.cancel()
        await asyncio.gather(*handlers)


def gateway(base_url: str, model: str | None = "fake-model") -> OpenAIGateway:
    settings = LLMSettings(base_url=base_url, model=model, max_retries=0)
    return OpenAIGateway(settings, api_key="k")


@pytest.mark.parametrize(
    ("reply", "watched", "cause"),
    [
        (NOT_UTF8, False, "the server's reply is not UTF-8 text (byte 0xff at position 38)"),
        (NOT_UTF8, True, "the server's reply is not UTF-8 text (byte 0xff at position 38)"),
        (STREAM_NOT_JSON, True, "a streamed chunk is not JSON (Expecting value at position 0)"),
        (STREAM_NOT_UTF8, True, "a streamed chunk is not UTF-8 text (byte 0xff at position 19)"),
    ],
    ids=["not-utf8", "not-utf8-watched", "stream-not-json", "stream-not-utf8"],
)
async def test_an_unreadable_reply_is_a_model_error_naming_what_is_wrong(
    reply: tuple[str, bytes], watched: bool, cause: str
) -> None:
    """``watched``: someone observes the question, so the answer is asked for as a stream."""
    async with answering(*reply) as base_url:
        model = gateway(base_url)
        with pytest.raises(ModelError) as raised, observing(lambda _event: None):
            if watched:
                await model.answer("q", [])
            else:
                await model.extract(Query, "q")
        await model.aclose()

    assert cause in str(raised.value)


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (NOT_JSON, "the server's reply is not JSON (Expecting value at position 0)"),
        (NOT_UTF8, "the server's reply is not UTF-8 text (byte 0xff at position 38)"),
        (("application/json", b'{"data": "none"}'), "is not an OpenAI model list"),
    ],
    ids=["not-json", "not-utf8", "not-a-list"],
)
async def test_an_unreadable_model_list_is_a_model_error(
    reply: tuple[str, bytes], cause: str
) -> None:
    """Without ``llm.model`` the first call lists the server's models; the SDK's own reading of
    a body that is not JSON failed with an AttributeError (an HTTP 500)."""
    async with answering(*reply) as base_url:
        model = gateway(base_url, model=None)
        with pytest.raises(ModelError, match="cannot list the server's models") as raised:
            await model.answer("q", [])
        await model.aclose()

    assert cause in str(raised.value)


@pytest.mark.parametrize(
    "reply", [NOT_UTF8, STREAM_NOT_JSON, STREAM_NOT_UTF8], ids=["not-utf8", "sse", "sse-utf8"]
)
async def test_over_http_an_unreadable_reply_is_a_502_plain_and_streamed(
    tmp_path: Path, reply: tuple[str, bytes]
) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    spec = DomainSpec(name="demo", description="Nothing but the model (test domain).")
    async with answering(*reply) as base_url:
        model = gateway(base_url)
        app = App.load(config, llm=model, plugins=[plugin_of(spec)], load_entry_points=False)
        async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
            plain = await client.post(f"{url}/v1/ask", json={"message": "dose?"})
            _, messages = await stream_ask(client, url, {"message": "dose?", "stream": True})
        await app.aclose()

    assert plain.status_code == 502, plain.text
    assert plain.json()["error"] == "model_error"
    assert "the language model failed" in plain.json()["message"]
    last = messages[-1]
    assert last.event == "error"
    assert (last.data["status"], last.data["error"]) == (502, "model_error")
