"""``server.request_timeout_s`` for the MCP ``<domain>.ask`` tool, as for ``POST /v1/ask``: a
question still running at the limit is cancelled, its place under
``server.max_concurrent_questions`` comes back, nothing is stored for the round (a waiting
conversation can be continued by sending the reply again), and the call is an error result in
the words of the HTTP path's 504, naming the limit, the setting and the last step logged.

A direct call of one of the domain's tools is bounded by ``orchestrator.tool_timeout_s`` alone,
through the app's tool runner as in a question: past it the call is an error result naming the
limit and the setting, whether the tool awaits or blocks its tool thread.

Over the SDK's in-process client (the handler stdio and streamable HTTP both run); the tools wait
at a gate the test holds (``server_support.gated``, and ``Blocking`` here).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from orchestration_kit import NoParams, plugin_of
from server_support.gated import Slow, SlowReply
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.mcp.server import DomainMcpServer
from toolwire.registry import DomainSpec
from toolwire.server.run import configure_server_logging
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel


class Blocking(OrchestratorActivatedTool[NoParams]):
    """A plain method: blocks its tool thread until the test releases it."""

    name = "blocking"

    def __init__(self) -> None:
        self.release = threading.Event()

    def executable_instruction(self) -> str:
        return "Does it block?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        self.release.wait(10)
        return ToolExecutionResult.context("unblocked")


T = TypeVar("T", Slow, SlowReply, Blocking)
LIMIT_S = 0.2
TOOL_LIMIT_S = 0.5
"""Above ``LIMIT_S``: a question's tool is cut by the request's limit first."""
SPEC = DomainSpec(name="demo", description="Slow things (test domain).")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[DomainMcpServer, MemorySessionStore]]:
    configure_server_logging()  # as toolwire mcp serve: the steps are tracked for the message
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        json.dumps(
            {
                "default_domain": "demo",
                "sessions": {"store": "memory"},
                "server": {"request_timeout_s": LIMIT_S},
                "orchestrator": {"tool_timeout_s": TOOL_LIMIT_S},
            }
        )
    )
    model = (
        ScriptedModel()
        .on_suitability(lambda prompt, _names: ["slowreply" if "reply" in prompt else "slow"])
        .on_answer(lambda _question, contexts: " ".join(c.context for c in contexts))
    )
    store = MemorySessionStore()
    app = App.load(
        config,
        llm=model,
        plugins=[plugin_of(SPEC, Slow, SlowReply, Blocking)],
        load_entry_points=False,
        session_store=store,
    )
    yield DomainMcpServer(app, "demo"), store
    await app.aclose()


def tool_of(mcp: DomainMcpServer, kind: type[T]) -> T:
    """The app's singleton of the gated tool class ``kind``."""
    tool = mcp.app.tool(str(kind.name))
    assert isinstance(tool, kind)
    return tool


async def ask_bounded(client: Client, arguments: dict[str, str]) -> CallToolResult:
    """``demo.ask``'s result within a few seconds: unbounded, it would wait at the gate for ever."""
    async with asyncio.timeout(5):
        return await client.call_tool("demo.ask", arguments)


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


def timed_out(tool: str) -> str:
    """The start of the error result, word for word the HTTP path's 504 message."""
    return (
        f"the question did not finish within {LIMIT_S:g} s (server.request_timeout_s); "
        f"the last step it logged was tool_activated (tool=demo.{tool}, task_no=1, domain=demo)"
    )


async def test_a_question_past_the_limit_is_cancelled_gives_its_place_back_and_stores_nothing(
    served: tuple[DomainMcpServer, MemorySessionStore],
) -> None:
    mcp, store = served
    slow = tool_of(mcp, Slow)
    async with Client(mcp.server) as client:
        result = await ask_bounded(client, {"message": "slow please"})
        in_flight = mcp.places.in_flight

    assert result.is_error
    assert text_of(result).startswith(timed_out("slow"))
    assert text_of(result).endswith(
        "Nothing was stored for this round: a waiting conversation can be continued by sending "
        "the message again"
    )
    assert slow.gate.cancelled and not slow.gate.finished
    assert in_flight == 0
    assert store._rows == {}  # the clarifying question the tool would have asked is not kept


async def test_a_reply_past_the_limit_leaves_the_conversation_waiting_for_it(
    served: tuple[DomainMcpServer, MemorySessionStore],
) -> None:
    mcp, store = served
    tool = tool_of(mcp, SlowReply)
    async with Client(mcp.server) as client:
        asked = await client.call_tool("demo.ask", {"message": "a slow reply"})
        assert asked.structured_content is not None
        session_id = asked.structured_content["session_id"]
        before = await store.load(session_id)
        reply = {"message": "the red one", "session_id": session_id}
        late = await ask_bounded(client, reply)
        after = await store.load(session_id)
        tool.gate.release.set()  # the reply sent again is answered
        answered = await client.call_tool("demo.ask", reply)

    assert asked.structured_content["kind"] == "clarification"
    assert late.is_error and text_of(late).startswith(timed_out("slowreply"))
    assert tool.gate.cancelled
    assert after.version == before.version  # the dropped round stored nothing
    assert not answered.is_error, text_of(answered)
    assert text_of(answered) == "Done with the red one."
    assert mcp.places.in_flight == 0


@pytest.mark.parametrize("kind", [Slow, Blocking], ids=["awaits", "blocks-its-thread"])
async def test_a_direct_tool_call_past_the_tool_limit_is_an_error_result_naming_it(
    served: tuple[DomainMcpServer, MemorySessionStore], kind: type[Slow | Blocking]
) -> None:
    mcp, _store = served
    tool = tool_of(mcp, kind)
    try:
        async with Client(mcp.server) as client, asyncio.timeout(5):
            result = await client.call_tool(f"demo.{kind.name}", {})
    finally:
        if isinstance(tool, Blocking):
            tool.release.set()  # the abandoned thread returns

    assert result.is_error
    assert text_of(result) == (
        f"tool demo.{kind.name} did not finish within {TOOL_LIMIT_S:g} s "
        "(orchestrator.tool_timeout_s)"
    )
    if isinstance(tool, Slow):
        assert tool.gate.cancelled and not tool.gate.finished
