"""``server.max_concurrent_questions`` for the MCP ``<domain>.ask`` tool, as for ``POST /v1/ask``:
past the limit a call is at once an error result saying the server is busy and when to call
again (never a wait in a queue), and a place comes back when a question ends, however it ends.

Over streamable HTTP on 127.0.0.1 (``toolwire mcp serve --http``'s application, run in this
process so the test holds the gate), and over the SDK's in-process client: the handler stdio
runs, where one client can send many calls at once too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from mcp_support.serving import http_session
from orchestration_kit import plugin_of
from server_support.gated import Gated, holding
from server_support.live import serving_asgi
from toolwire import App
from toolwire.errors import ModelError
from toolwire.mcp.server import DomainMcpServer
from toolwire.mcp.transports import MCP_PATH, http_app
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel

LIMIT = 2
BUSY = (
    "busy: the server is answering 2 questions, its limit (server.max_concurrent_questions: 2); "
    "send the question again in 5 s, or raise the limit if the model keeps up"
)


def answer(question: str, contexts: list[object]) -> str:
    """The held tool's text; a question that says "fail" fails its model call."""
    if "fail" in question:
        raise ModelError("answer", "HTTP 500 from the model server")
    return " ".join(getattr(context, "context", "") for context in contexts) or "free"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Gated, DomainMcpServer]]:
    config = tmp_path / "toolwire.yaml"
    settings = {"max_concurrent_questions": LIMIT}
    config.write_text(
        json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}, "server": settings})
    )
    model = (
        ScriptedModel()
        .on_suitability(lambda prompt, names: [] if "free" in prompt else ["gated"])
        .on_gatekeeper(True)
        .on_answer(answer)
    )
    spec = DomainSpec(name="demo", description="Questions held at a gate (test domain).")
    app = App.load(config, llm=model, plugins=[plugin_of(spec, Gated)], load_entry_points=False)
    gated = app.tool("gated")
    assert isinstance(gated, Gated)
    yield gated, DomainMcpServer(app, "demo")
    await app.aclose()


async def at_once(call: Coroutine[Any, Any, CallToolResult]) -> CallToolResult:
    """The call's result within a few seconds: a call queued behind the gate would never end."""
    async with asyncio.timeout(5):
        return await call


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_over_http_past_the_limit_a_question_is_refused_at_once_and_a_place_comes_back(
    served: tuple[Gated, DomainMcpServer],
) -> None:
    gated, mcp = served
    settings = mcp.app.config.server
    async with (
        serving_asgi(http_app(mcp, settings, []), settings) as base,
        http_session(f"{base}{MCP_PATH}") as session,
    ):
        held = [
            asyncio.create_task(session.call_tool("demo.ask", {"message": f"question {n}"}))
            for n in range(LIMIT)
        ]
        try:
            await holding(gated, LIMIT)
            refused = await at_once(session.call_tool("demo.ask", {"message": "one too many"}))
            listed = await session.list_tools()  # only questions are counted
        finally:
            gated.gate.set()
        answered = await asyncio.gather(*held)
        after = await session.call_tool("demo.ask", {"message": "now there is room"})

    assert refused.is_error and text_of(refused) == BUSY
    assert [tool.name for tool in listed.tools] == ["demo.ask", "demo.gated"]
    contents = [result.structured_content or {} for result in answered]
    assert all(content.pop("session_id") for content in contents)  # each its conversation
    assert contents == [
        {
            "kind": "answer",
            "text": f"answered: question {n}",
            "turn": 1,
            "context": None,  # a first turn took nothing from turns before it
            "guaranteed_contexts": [],
            "failures": [],
            "notices": [],
        }
        for n in range(LIMIT)
    ]
    assert not after.is_error and text_of(after) == "answered: now there is room"
    assert mcp.places.in_flight == 0


async def test_in_process_the_limit_holds_and_a_failed_question_gives_its_place_back(
    served: tuple[Gated, DomainMcpServer],
) -> None:
    gated, mcp = served
    async with Client(mcp.server) as client:
        held = [
            asyncio.create_task(client.call_tool("demo.ask", {"message": f"question {n}"}))
            for n in range(LIMIT)
        ]
        try:
            await holding(gated, LIMIT)
            refused = await at_once(client.call_tool("demo.ask", {"message": "one too many"}))
        finally:
            gated.gate.set()
        await asyncio.gather(*held)

        failed = [
            await client.call_tool("demo.ask", {"message": "free, but fail"})
            for _ in range(LIMIT + 1)
        ]
        after = await client.call_tool("demo.ask", {"message": "a free question"})

    assert refused.is_error and text_of(refused) == BUSY
    assert all(result.is_error for result in failed)
    assert text_of(failed[-1]).startswith("the language model failed (error id ")
    assert not after.is_error and text_of(after) == "free"
    assert mcp.places.in_flight == 0
