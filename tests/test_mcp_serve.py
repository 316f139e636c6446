"""A domain as an MCP server (``toolwire mcp serve``), driven by the SDK's own client.

Over stdio: the real command for the pharma domain (direct tool calls need no model), and the
test launcher (``mcp_support.serve_launch``: the same server code with the ``trip`` test plugin
and its deterministic model) for ``trip.ask`` through a clarification round. Over streamable
HTTP: the launcher, with and without a bearer token, and toolwire itself as the client. What
``<domain>.ask`` shows of internal errors is what ``POST /v1/ask`` shows (error ids, or with
``server.expose_error_details`` the masked text).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from pydantic import BaseModel, field_validator
from structlog.testing import capture_logs

from _build_samples import make_plugin
from mcp_support.serving import (
    TOOLWIRE,
    McpHttpServer,
    http_session,
    launcher_env,
    post_ping,
    trip_config,
)
from server_support import plugin as trip
from server_support.plugin import NOTHING
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.conversation import TurnContext
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.llm.history import current_history
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.testing import ScriptedModel

TOKEN = "mcp-test-token"
LEAKED_KEY = "sk-proj-LeakedKey0123456789abcdefXYZ"
ERROR_ID = re.compile(r"[0-9a-f]{12}")


@asynccontextmanager
async def stdio_session(
    command: str, *args: str, env: dict[str, str]
) -> AsyncIterator[ClientSession]:
    parameters = StdioServerParameters(command=command, args=list(args), env=env)
    async with stdio_client(parameters) as streams, ClientSession(*streams) as session:
        await session.initialize()
        yield session


async def ask_through_a_clarification(session: ClientSession) -> None:
    """``trip.ask``: the booking tool asks which city; the reply with the session id books."""
    first = await session.call_tool("trip.ask", {"message": "Book me a table"})
    assert not first.is_error
    assert first.structured_content is not None
    assert first.structured_content["kind"] == "clarification"
    assert first.structured_content["text"] == "Which city?"
    session_id = first.structured_content["session_id"]
    assert session_id and f'session_id "{session_id}"' in first.content[0].text  # type: ignore[union-attr]
    second = await session.call_tool("trip.ask", {"message": "city=Rome", "session_id": session_id})
    assert second.structured_content is not None
    assert second.structured_content["kind"] == "answer"
    assert second.structured_content["text"].startswith("Table booked in Rome")
    assert second.structured_content["session_id"] == session_id  # the conversation goes on


async def test_toolwire_mcp_serve_offers_the_pharma_tools_over_stdio() -> None:
    env = {"TOOLWIRE_PLUGINS": "pharma"}
    async with stdio_session(TOOLWIRE, "mcp", "serve", "--domain", "pharma", env=env) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(listed) == [
            "pharma.ask",
            "pharma.interaction_analysis",
            "pharma.dosage_info",
        ]  # substance_lookup is not orchestrator-activated: reachable only by injection
        dosage = listed["pharma.dosage_info"]
        assert dosage.input_schema["required"] == ["product"]
        assert dosage.input_schema["properties"]["product"]["description"] == (
            "The medicine product or active substance asked about"
        )
        assert dosage.description is not None
        assert dosage.description.endswith(
            "Use it when the answer to this question is yes: Does the question ask how much of "
            "a medicine to take, or how often (its dose)?"
        )
        # dosage_info finds the product through its injected substance_lookup
        found = await session.call_tool("pharma.dosage_info", {"product": "Tylenol"})
        assert found.structured_content is not None
        assert found.structured_content["kind"] == "guaranteed"
        assert found.structured_content["text"].startswith("Usual dosage for Tylenol: paracetamol")
        asked = await session.call_tool("pharma.dosage_info", {"product": "Excedrin"})
        assert asked.structured_content is not None
        assert asked.structured_content["kind"] == "clarification"
        assert "Excedrin Extra Strength" in asked.structured_content["text"]
        wrong = await session.call_tool("pharma.dosage_info", {"produkt": "Tylenol"})
        assert wrong.is_error
        assert wrong.content[0].text == (  # type: ignore[union-attr]
            "invalid arguments for pharma.dosage_info: product: Field required"
        )


async def test_domain_ask_goes_through_a_clarification_round_over_stdio(tmp_path: Path) -> None:
    config = trip_config(tmp_path)
    module = ("-m", "mcp_support.serve_launch", str(config))
    async with stdio_session(sys.executable, *module, env=launcher_env()) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert names == ["trip.ask", "trip.booking"]
        direct = await session.call_tool("trip.booking", {"city": "Oslo"})
        assert direct.structured_content is not None
        assert direct.structured_content["kind"] == "context"
        await ask_through_a_clarification(session)


async def test_over_stdio_a_message_naming_a_key_twice_is_refused_and_the_next_answered(
    tmp_path: Path,
) -> None:
    """The SDK read it with the last value winning (a table booked in Rome), where a proxy or a
    log that keeps the first value saw Oslo. The messages are written raw: the SDK's client
    cannot send a key twice."""
    module = ("-m", "mcp_support.serve_launch", str(trip_config(tmp_path)))
    server = await asyncio.create_subprocess_exec(
        sys.executable, *module, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **launcher_env()},
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    stdin, stdout = server.stdin, server.stdout

    async def exchange(raw: str) -> dict[str, Any]:
        stdin.write(raw.encode() + b"\n")
        await stdin.drain()
        async with asyncio.timeout(20):
            answer: dict[str, Any] = json.loads(await stdout.readline())
        return answer

    client = {"name": "raw", "version": "0"}
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    try:
        started = await exchange(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
        )
        assert "result" in started, started
        stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        if Path(f"/proc/{server.pid}/fd/0").exists():  # stdin is the client's alone
            assert os.readlink(f"/proc/{server.pid}/fd/0") == os.devnull
        call = (
            '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", '
            '"params": {"name": "trip.booking", "arguments": %s}}'
        )
        refused = await exchange(call % (2, '{"city": "Oslo", "city": "Rome"}'))
        repeated_id = await exchange('{"jsonrpc": "2.0", "id": 3, "id": 4, "method": "ping"}')
        answered = await exchange(call % (5, '{"city": "Oslo"}'))
    finally:
        stdin.close()
        async with asyncio.timeout(20):
            await server.wait()

    said = "; send each key once (JSON parsers disagree on which value of a repeated key wins)"
    assert refused == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": -32600,
            "message": 'Invalid request: the message has a duplicate key "city" at '
            f"$.params.arguments.city{said}",
        },
    }
    assert repeated_id["id"] is None and repeated_id["error"]["code"] == -32600
    assert repeated_id["error"]["message"].endswith(f'duplicate key "id" at $.id{said}')
    assert answered["id"] == 5
    assert answered["result"]["structuredContent"]["text"].startswith("Table booked in Oslo")
    assert server.returncode == 0


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[McpHttpServer]:
    server = McpHttpServer(trip_config(tmp_path), launcher_env())
    yield server
    server.stop()


@pytest.fixture
def guarded_http_server(tmp_path: Path) -> Iterator[McpHttpServer]:
    server = McpHttpServer(trip_config(tmp_path), launcher_env(TOOLWIRE_API_TOKEN=TOKEN))
    yield server
    server.stop()


async def test_a_domain_over_streamable_http(http_server: McpHttpServer) -> None:
    assert http_server.url.startswith("http://127.0.0.1:") and http_server.url.endswith("/mcp")
    async with http_session(http_server.url) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert names == ["trip.ask", "trip.booking"]
        asked = await session.call_tool("trip.booking", {})
        assert asked.structured_content == {"kind": "clarification", "text": "Which city?"}
        await ask_through_a_clarification(session)


async def test_http_needs_the_bearer_token_when_one_is_set(
    guarded_http_server: McpHttpServer,
) -> None:
    url = guarded_http_server.url
    missing = post_ping(url, {})
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["message"] == (
        "this endpoint needs an 'Authorization: Bearer <token>' header"
    )
    wrong = post_ping(url, {"Authorization": "Bearer nope"})
    assert (wrong.status_code, wrong.json()["error"]) == (401, "unauthorized")
    async with http_session(url, TOKEN) as session:
        await ask_through_a_clarification(session)


async def test_domain_ask_withholds_a_tool_exception_behind_an_error_id(
    http_server: McpHttpServer,
) -> None:
    """As ``POST /v1/ask`` does: the caller gets the failed step and an error id, the server's
    log the (masked) text under that id."""
    async with http_session(http_server.url) as session:
        asked = await session.call_tool("trip.ask", {"message": "Book city=Oslo fail=db"})
    assert not asked.is_error and asked.structured_content is not None
    assert asked.structured_content["text"].startswith(NOTHING)
    (failure,) = asked.structured_content["failures"]
    prefix = "task 1: tool trip.booking failed (error id "
    assert failure.startswith(prefix) and failure.endswith(")")
    error_id = failure.removeprefix(prefix)[:-1]
    assert ERROR_ID.fullmatch(error_id)
    for internal in ("hunter2", "db.internal.example", "postgresql", "ConnectionError"):
        assert internal not in str(asked)
    (withheld,) = [e for e in http_server.events() if e.get("error_id") == error_id]
    assert withheld["event"] == "error_withheld"
    assert (withheld["task_no"], withheld["tool"]) == ("1", "trip.booking")
    assert withheld["detail"].startswith(
        "tool trip.booking raised ConnectionError: could not connect to "
        "postgresql://booking:***@db.internal.example:5432/tables"
    )
    assert "hunter2" not in http_server.log_path.read_text()


async def test_domain_ask_shows_the_masked_text_when_error_details_are_exposed(
    tmp_path: Path,
) -> None:
    config = trip_config(tmp_path, {"expose_error_details": True})
    module = ("-m", "mcp_support.serve_launch", str(config))
    async with stdio_session(sys.executable, *module, env=launcher_env()) as session:
        asked = await session.call_tool("trip.ask", {"message": "Book city=Oslo fail=db"})
    assert asked.structured_content is not None
    assert asked.structured_content["failures"] == [
        "task 1: tool trip.booking raised ConnectionError: could not connect to "
        "postgresql://booking:***@db.internal.example:5432/tables: connection refused"
    ]
    assert "hunter2" not in str(asked)


async def test_toolwire_consumes_its_own_mcp_server(
    guarded_http_server: McpHttpServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two directions together: a served domain's tools become another app's tools."""
    monkeypatch.setenv("TRIP_TOKEN", TOKEN)
    config = tmp_path / "consumer.yaml"
    config.write_text(
        "default_domain: travel\nsessions: {store: memory}\ndomains: [{name: travel}]\n"
        "mcp_servers:\n"
        f"  - {{name: trip, url: '{guarded_http_server.url}', bearer_token_env: TRIP_TOKEN,\n"
        "     tools: [{name: trip.booking, as: booking}]}\n",
        encoding="utf-8",
    )
    model = ScriptedModel().on_suitability(["booking"]).on_gatekeeper(True).on_answer()
    app = App.load(config, llm=model, load_entry_points=False)
    try:
        assert app.mcp_problems == []
        booking = app.tool("travel.booking")
        assert booking.params_model.model_fields.keys() >= {"city"}
        model.on_extract(booking.params_model, {"city": "Lisbon"})
        answer = await app.ask("Book a table in Lisbon")
        assert answer.text.startswith("Table booked in Lisbon")  # the served tool's text
    finally:
        await app.aclose()


DEMO_CONFIG = "default_domain: demo\nsessions: {store: memory}\n"
TRIP_CONFIG = "default_domain: trip\nsessions: {store: memory}\n"


class Nothing(BaseModel):
    pass


class BoomTool(OrchestratorActivatedTool[Nothing]):
    """Fails with a secret in its message."""

    def executable_instruction(self) -> str:
        return "Does the user want it to fail?"

    def execute_with_result(self, params: Nothing, text: str) -> ToolExecutionResult:
        raise RuntimeError("db password=swordfish42 rejected")


class QuestionlessTool(BoomTool):
    """A tool whose suitability question cannot be asked."""

    def executable_instruction(self) -> str:
        sys.exit(2)


class AskTool(BoomTool):
    """A domain tool that would hide <domain>.ask."""

    name = "ask"


async def test_a_failing_tool_is_an_error_result_with_secrets_masked(
    toolwire_app_factory: Any,
) -> None:
    from mcp import MCPError

    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",), tools=(BoomTool,))
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=ScriptedModel())
    served = DomainMcpServer(app, "demo")
    failed = await served.call("demo.boom", {})
    assert failed.is_error
    assert failed.content[0].text == (  # type: ignore[union-attr]
        "tool demo.boom raised RuntimeError: db password=*** rejected"
    )
    offered = "unknown tool 'demo.nope'; this server offers: demo.ask, demo.boom"
    with pytest.raises(MCPError, match=re.escape(offered)):
        await served.call("demo.nope", {})


async def test_a_tool_whose_question_raises_is_left_out_and_the_others_served(
    toolwire_app_factory: Any,
) -> None:
    """As the orchestrator leaves it out of selection: one tool's bug built no server at all."""
    from mcp import MCPError

    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",), tools=(QuestionlessTool, BoomTool))
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=ScriptedModel())
    with capture_logs() as events:
        served = DomainMcpServer(app, "demo")

    assert [tool.name for tool in served.listing()] == ["demo.ask", "demo.boom"]
    left_out = [e for e in events if e["event"] == "mcp_tool_left_out"]
    assert [(e["tool"], e["error"]) for e in left_out] == [("demo.questionless", "SystemExit: 2")]
    with pytest.raises(MCPError, match=re.escape("this server offers: demo.ask, demo.boom")):
        await served.call("demo.questionless", {})


class QuietTool(BoomTool):
    """Answers quietly; the domain excludes it."""

    def execute_with_result(self, params: Nothing, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("quiet")


async def test_an_excluded_tool_is_neither_offered_nor_run(toolwire_app_factory: Any) -> None:
    """SPEC §5: a domain's excluded tools are never activated, not even when required; the MCP
    server listed and ran them."""
    from mcp import MCPError

    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",), tools=(QuietTool, BoomTool))
    excluding = DEMO_CONFIG + "domains:\n  - name: demo\n    excluded_tools: [quiet]\n"
    app = toolwire_app_factory(plugins=[demo], config=excluding, llm=ScriptedModel())
    served = DomainMcpServer(app, "demo")

    assert [tool.name for tool in served.listing()] == ["demo.ask", "demo.boom"]
    offered = "unknown tool 'demo.quiet'; this server offers: demo.ask, demo.boom"
    with pytest.raises(MCPError, match=re.escape(offered)):
        await served.call("demo.quiet", {})


class Keyed(BaseModel):
    key: str = ""

    @field_validator("key")
    @classmethod
    def known(cls, value: str) -> str:
        return {"a": "alpha"}[value]  # raises KeyError, which pydantic does not wrap


class KeyedTool(OrchestratorActivatedTool[Keyed]):
    """Looks a key up while validating its parameters."""

    def executable_instruction(self) -> str:
        return "Does the user name a key?"

    def execute_with_result(self, params: Keyed, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(params.key)


async def test_a_parameter_model_that_raises_gives_an_error_result_with_secrets_masked(
    toolwire_app_factory: Any,
) -> None:
    """Only a ValidationError was an error result: a KeyError escaped as a protocol error, its
    message unmasked."""
    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",), tools=(KeyedTool,))
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=ScriptedModel())
    served = DomainMcpServer(app, "demo")
    assert (await served.call("demo.keyed", {"key": "a"})).content[0].text == "alpha"  # type: ignore[union-attr]

    failed = await served.call("demo.keyed", {"key": "password=swordfish42"})
    assert failed.is_error
    assert failed.content[0].text == (  # type: ignore[union-attr]
        "invalid arguments for demo.keyed: its parameter model raised KeyError: 'password=***'"
    )


async def test_domain_ask_refuses_what_post_v1_ask_refuses(toolwire_app_factory: Any) -> None:
    """The message limit of the HTTP service held for ``<domain>.ask`` too: a 2 MB message over
    stdio ran the whole orchestrator. Over the SDK's client (in process)."""
    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",))
    config = DEMO_CONFIG + "server: {max_message_chars: 50}\n"
    model = ScriptedModel().on_answer("fine")
    app = toolwire_app_factory(plugins=[demo], config=config, llm=model)
    async with Client(DomainMcpServer(app, "demo").server) as client:
        too_long = await client.call_tool("demo.ask", {"message": "x" * 51})
        not_a_session = await client.call_tool(
            "demo.ask", {"message": "Paris", "session_id": "a b\u0000"}
        )
        blank = await client.call_tool("demo.ask", {"message": " \n "})
        fine = await client.call_tool("demo.ask", {"message": "x" * 50})

    assert too_long.is_error and not_a_session.is_error and blank.is_error and not fine.is_error
    assert "the message is empty or only whitespace" in blank.content[0].text  # type: ignore[union-attr]
    assert too_long.content[0].text == (  # type: ignore[union-attr]
        "invalid arguments for demo.ask: the message has 51 characters; the limit is 50 "
        "(server.max_message_chars); shorten it"
    )
    assert "session_id: Value error, this is not a session id" in (
        not_a_session.content[0].text  # type: ignore[union-attr]
    )
    assert len(model.calls_for(Purpose.ANSWER)) == 1  # only the message within the limit ran


async def test_domain_ask_refuses_an_argument_it_does_not_know(toolwire_app_factory: Any) -> None:
    """``sessionId`` for ``session_id`` started a new conversation instead of continuing one."""
    from toolwire.mcp.server import DomainMcpServer

    app = toolwire_app_factory(plugins=[trip], config=TRIP_CONFIG, llm=trip.scripted_model())
    served = DomainMcpServer(app, "trip")
    first = await served.call("trip.ask", {"message": "book a table"})
    assert first.structured_content is not None
    session_id = first.structured_content["session_id"]
    misspelt = await served.call("trip.ask", {"message": "city=Rome", "sessionId": session_id})

    assert misspelt.is_error and misspelt.structured_content is None
    assert misspelt.content[0].text == (  # type: ignore[union-attr]
        "invalid arguments for trip.ask: sessionId: Extra inputs are not permitted"
    )
    [ask] = [tool for tool in served.listing() if tool.name == "trip.ask"]
    assert ask.input_schema["additionalProperties"] is False


async def test_domain_ask_continues_a_conversation_after_an_answer_and_says_what_it_took(
    toolwire_app_factory: Any,
) -> None:
    """A follow-up after an answer (not the reply to a clarifying question): the second call
    with the first answer's ``session_id`` is turn 2, its model calls read turn 1 in standard
    roles, and its result carries ``context`` as ``POST /v1/ask``'s answer does. Over the SDK's
    client (in process), the ``trip`` test plugin."""
    from toolwire.mcp.server import DomainMcpServer

    histories: list[list[dict[str, str]]] = []

    def rewrite(text: str, _instruction: str) -> dict[str, str]:
        """ "there" becomes the city the earlier turns booked in."""
        histories.append([dict(message) for message in current_history()])
        booked = re.findall(r"booked in (\w+)", str(current_history()))
        return {"task": text.replace("there", f"city={booked[-1]}")}

    model = (
        ScriptedModel()
        .on_suitability(lambda _prompt, names: names)
        .on_extract(trip.BookingParams, trip.extract_pairs)
        .on_extract(StandaloneTask, rewrite)
        .on_answer(lambda _question, contexts: contexts[0].context.partition(" (pid")[0])
    )
    app = toolwire_app_factory(plugins=[trip], config=TRIP_CONFIG, llm=model)
    served = DomainMcpServer(app, "trip")
    async with Client(served.server) as client:
        first = await client.call_tool("trip.ask", {"message": "Book a table city=Rome"})
        assert first.structured_content is not None
        session_id = first.structured_content["session_id"]
        second = await client.call_tool(
            "trip.ask", {"message": "one more there tomorrow", "session_id": session_id}
        )

    assert (first.structured_content["turn"], first.structured_content["context"]) == (1, None)
    assert second.structured_content is not None and not second.is_error
    result = second.structured_content
    assert (result["kind"], result["text"]) == ("answer", "Table booked in Rome")
    assert (result["session_id"], result["turn"]) == (session_id, 2)
    assert result["context"] == {
        "turns_read": [1],
        "summaries_read": [],
        "standalone": "one more city=Rome tomorrow",
        "notes": [],
    }
    assert TurnContext.model_validate(result["context"]) == TurnContext(
        turns_read=[1], standalone="one more city=Rome tomorrow"
    )  # Answer.context, the model POST /v1/ask returns
    assert histories == [
        [
            {"role": "user", "content": "Book a table city=Rome"},
            {"role": "assistant", "content": "Table booked in Rome"},
        ]
    ]
    [ask] = [tool for tool in served.listing() if tool.name == "trip.ask"]
    assert ask.output_schema is not None and "context" in ask.output_schema["properties"]


def refuse_with_the_key(_question: str, _contexts: object) -> str:
    raise ModelError("answer", f"HTTP 500: Incorrect API key provided: {LEAKED_KEY}")


async def test_domain_ask_withholds_a_failed_model_call_behind_an_error_id(
    toolwire_app_factory: Any,
) -> None:
    """A toolwire error that is the server's failure (``POST /v1/ask``'s 5xx) is an error result
    with a generic reason and an error id, over the SDK's client (in process)."""
    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",))
    model = ScriptedModel().on_answer(refuse_with_the_key)
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=model)
    with capture_logs() as events:
        async with Client(DomainMcpServer(app, "demo").server) as client:
            failed = await client.call_tool("demo.ask", {"message": "Anything?"})
    assert failed.is_error
    text = failed.content[0].text  # type: ignore[union-attr]
    match = re.fullmatch(
        r"the language model failed \(error id ([0-9a-f]{12})\); "
        r"the server's log has the details under this id",
        text,
    )
    assert match, text
    assert LEAKED_KEY not in str(failed)
    (logged,) = [e for e in events if e.get("error_id") == match[1]]
    assert (logged["event"], logged["error"]) == ("request_error", "model_error")
    assert "Incorrect API key provided" in logged["message"]


async def test_domain_ask_reports_a_model_that_exits_as_a_failed_question(
    toolwire_app_factory: Any,
) -> None:
    """A model's ``sys.exit()`` is the question's failure (an error result with an error id), not
    the end of the server, whose calls run in tasks."""
    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",))
    model = ScriptedModel().on_answer(lambda _question, _contexts: sys.exit(6))
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=model)
    failed = await DomainMcpServer(app, "demo").call("demo.ask", {"message": "Anything?"})

    assert failed.is_error
    assert re.fullmatch(
        r"the server failed \(error id [0-9a-f]{12}\); the server's log has the details under "
        r"this id",
        failed.content[0].text,  # type: ignore[union-attr]
    )


def test_a_domain_tool_named_ask_is_refused(toolwire_app_factory: Any) -> None:
    from toolwire.errors import ConfigError, UnknownDomainError
    from toolwire.mcp.server import DomainMcpServer

    demo = make_plugin("demo", domains=("demo",), tools=(AskTool,))
    app = toolwire_app_factory(plugins=[demo], config=DEMO_CONFIG, llm=ScriptedModel())
    with pytest.raises(ConfigError, match=re.escape("tool 'demo.ask' would hide the MCP tool")):
        DomainMcpServer(app, "demo")
    with pytest.raises(UnknownDomainError, match="unknown domain 'shop'"):
        DomainMcpServer(app, "shop")
