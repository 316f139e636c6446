"""``POST /v1/ask`` as Server-Sent Events over real HTTP on 127.0.0.1: steps as they happen, the
answer's text, the same Answer at the end; clarification rounds; errors, the time limit, a
client that goes away (nothing stored), disclosure of error texts, and keep-alives."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from orchestration_kit import NoParams, plugin_of
from server_support.gated import Slow, SlowReply
from server_support.live import SseMessage, serving, sse_messages, stream_ask
from toolwire import App, Clarification, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.registry import DomainSpec
from toolwire.server import configure_server_logging
from toolwire.server.auth import ApiKey
from toolwire.sessions import MemorySessionStore
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest

TOKEN = "stream-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Lookup(OrchestratorActivatedTool[NoParams]):
    name = "lookup"

    def executable_instruction(self) -> str:
        return "Is a dose asked for?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("Ibuprofen: 400 mg every 6 hours.")


class Booking(OrchestratorActivatedTool[NoParams]):
    name = "booking"

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.clarifying_question("Which city?")

    def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"Table booked in {clarification.reply}.")


class Broken(OrchestratorActivatedTool[NoParams]):
    name = "broken"

    def executable_instruction(self) -> str:
        return "Is it broken?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        raise RuntimeError("cannot reach postgres://app:hunter2@db.internal/prod")


SPEC = DomainSpec(name="demo", description="Doses, bookings and slow things (test domain).")


def suitable(prompt: str, names: list[str]) -> list[str]:
    for word in ("booking", "slowreply", "slow", "broken"):
        if word.split("ing")[0] in prompt:
            return [word]
    return ["lookup"]


def scripted() -> ScriptedModel:
    return (
        ScriptedModel()
        .on_suitability(suitable)
        .on_gatekeeper(True)
        .on_answer(lambda question, contexts: " ".join(c.context for c in contexts) or "nothing")
    )


def load(tmp_path: Path, llm: Any, store: MemorySessionStore | None = None) -> App:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    plugin = plugin_of(SPEC, Lookup, Booking, Slow, SlowReply, Broken)
    return App.load(config, llm=llm, plugins=[plugin], load_entry_points=False, session_store=store)


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[App, str, MemorySessionStore]]:
    store = MemorySessionStore()
    app = load(tmp_path, scripted(), store)
    async with serving(app, api_keys=[ApiKey("default", TOKEN)]) as url:
        yield app, url, store
    await app.aclose()


def types(messages: list[SseMessage]) -> list[str]:
    return [message.event for message in messages if message.event != "comment"]


async def test_a_streamed_answer_has_its_steps_then_the_same_answer_as_the_plain_body(
    live: tuple[App, str, MemorySessionStore],
) -> None:
    _, url, _ = live
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as client:
        response, messages = await stream_ask(
            client, url, {"message": "what dose of ibuprofen?", "stream": True}
        )
        plain = await client.post(f"{url}/v1/ask", json={"message": "what dose of ibuprofen?"})

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    kinds = types(messages)
    assert kinds[0] == "round_started"
    assert kinds[-1] == "answer"
    for expected in ("task_started", "tools_chosen", "tool_started", "tool_finished"):
        assert expected in kinds
    assert kinds.index("tool_finished") < kinds.index("answer_delta") < kinds.index("answer")
    for message in messages:  # every message's JSON names its own type
        assert message.data["type"] == message.event
    chosen = next(m.data for m in messages if m.event == "tools_chosen")
    assert chosen["selection"]["activated"] == ["demo.lookup"]
    assert chosen["selection"]["candidates"][0]["tool_name"].startswith("demo.")
    text = "".join(m.data["text"] for m in messages if m.event == "answer_delta")
    answer = messages[-1].data["answer"]
    assert text == answer["text"] == "Ibuprofen: 400 mg every 6 hours."
    body = plain.json()
    assert answer["session_id"] != body["session_id"]  # two conversations, the same answer
    assert {**answer, "session_id": None} == {**body, "session_id": None}


async def test_the_accept_header_asks_for_a_stream_too(
    live: tuple[App, str, MemorySessionStore],
) -> None:
    _, url, _ = live
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as client:
        response, messages = await stream_ask(
            client, url, {"message": "dose?"}, headers={"Accept": "text/event-stream"}
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    assert types(messages)[-1] == "answer"


async def test_a_clarification_and_its_reply_both_stream(
    live: tuple[App, str, MemorySessionStore],
) -> None:
    _, url, _ = live
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as client:
        _, first = await stream_ask(client, url, {"message": "book a table", "stream": True})
        asked = next(m.data for m in first if m.event == "clarification_asked")
        waiting = first[-1].data["answer"]
        _, second = await stream_ask(
            client,
            url,
            {"message": "Szeged", "session_id": waiting["session_id"], "stream": True},
        )

    assert asked["question"] == "Which city?"
    assert asked["tool_name"] == "demo.booking"
    assert waiting["kind"] == "clarification" and waiting["session_id"]
    assert second[0].data["resumed"] is True
    assert second[-1].data["answer"]["text"] == "Table booked in Szeged."


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), f"a key repeated in {keys}"
    return dict(pairs)


async def test_every_event_of_a_streamed_turn_says_which_turn_it_belongs_to(
    tmp_path: Path,
) -> None:
    """Not only ``round_finished``: each message of a turn's stream (its steps, the answer's
    text, the answer, an error) carries the turn in its JSON, once; a follow-up after an answer,
    a clarifying question and the reply to it are turns 2, 3 and 4."""
    model = scripted().on_extract(StandaloneTask, lambda text, _instruction: {"task": text})
    app = load(tmp_path, model, MemorySessionStore())
    async with (
        serving(app, api_keys=[ApiKey("default", TOKEN)]) as url,
        httpx.AsyncClient(headers=AUTH, timeout=10) as client,
    ):
        _, first = await stream_ask(client, url, {"message": "what dose?", "stream": True})
        session_id = first[-1].data["answer"]["session_id"]
        turns = [first]
        for message in ("and for children?", "and book a table", "Szeged"):
            body = {"message": message, "session_id": session_id, "stream": True}
            turns.append((await stream_ask(client, url, body))[1])
        _, unknown = await stream_ask(
            client, url, {"message": "Szeged", "session_id": "no-such", "stream": True}
        )
        body = {"message": "and again?", "session_id": session_id, "stream": True}
        async with client.stream("POST", f"{url}/v1/ask", json=body) as response:
            raw = (await response.aread()).decode()
    await app.aclose()

    for number, messages in enumerate(turns, start=1):
        kinds = types(messages)
        assert kinds[0] == "round_started" and kinds[-1] == "answer"
        assert {"task_started", "tool_finished", "model_call_finished"} <= set(kinds)
        assert [m.data["turn"] for m in messages if m.event != "comment"] == [number] * len(kinds)
        assert messages[-1].data["answer"]["turn"] == number
    assert "answer_delta" in types(turns[1])  # the follow-up's text, streamed as turn 2
    assert turns[1][-1].data["answer"]["context"]["turns_read"] == [1]
    assert "clarification_asked" in types(turns[2])
    assert turns[3][0].data["resumed"] is True  # the reply resumed the waiting task
    # a conversation that cannot be continued: no turn, said as null on each message
    assert types(unknown) == ["round_started", "round_finished", "error"]
    assert [m.data["turn"] for m in unknown] == [None, None, None]
    # on the wire: one "turn" key in every message's JSON (round_started says its own)
    datas = [line[len("data: ") :] for line in raw.splitlines() if line.startswith("data: ")]
    assert len(datas) > 5
    assert [json.loads(d, object_pairs_hook=unique_keys)["turn"] for d in datas] == [5] * len(datas)


async def test_an_error_after_the_stream_began_is_an_error_event_with_its_status(
    live: tuple[App, str, MemorySessionStore],
) -> None:
    _, url, _ = live
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as client:
        response, messages = await stream_ask(
            client, url, {"message": "dose?", "domain": "nope", "stream": True}
        )
        _, unknown = await stream_ask(
            client, url, {"message": "Szeged", "session_id": "no-such", "stream": True}
        )

    assert response.status_code == 200
    error = messages[-1]
    assert error.event == "error"
    assert error.data["status"] == 400
    assert error.data["error"] == "unknown_domain"
    assert "unknown domain 'nope'" in error.data["message"]
    assert error.data["request_id"] == response.headers["x-request-id"]
    assert unknown[-1].data["status"] == 404
    assert unknown[-1].data["error"] == "unknown_session"


async def test_refusals_before_the_stream_are_plain_json_errors(
    live: tuple[App, str, MemorySessionStore],
) -> None:
    _, url, _ = live
    async with httpx.AsyncClient(timeout=10) as client:
        anonymous, _ = await stream_ask(client, url, {"message": "dose?", "stream": True})
        wrong, _ = await stream_ask(
            client,
            url,
            {"message": "dose?", "stream": True},
            headers={"Authorization": "Bearer wrong-token-value"},
        )
        long, _ = await stream_ask(
            client, url, {"message": "x" * 9000, "stream": True}, headers=AUTH
        )

    assert (anonymous.status_code, anonymous.json()["error"]) == (401, "unauthorized")
    assert (wrong.status_code, wrong.json()["error"]) == (401, "unauthorized")
    assert (long.status_code, long.json()["error"]) == (422, "message_too_long")


async def test_the_time_limit_ends_the_stream_with_a_504_and_stores_nothing(
    tmp_path: Path,
) -> None:
    configure_server_logging()  # its processor notes the last step for the 504's message
    store = MemorySessionStore()
    app = load(tmp_path, scripted(), store)
    settings = ServerSettings(request_timeout_s=2.0, sse_keep_alive_s=0.3)
    slow = app.tool("slow")
    assert isinstance(slow, Slow)
    async with serving(app, settings) as url, httpx.AsyncClient(timeout=10) as client:
        _, messages = await stream_ask(client, url, {"message": "slow please", "stream": True})
    await app.aclose()

    assert "comment" in [m.event for m in messages]  # keep-alives while the tool waited
    error = messages[-1]
    assert (error.event, error.data["status"], error.data["error"]) == ("error", 504, "timeout")
    assert "tool_activated" in error.data["message"]
    assert error.data["details"]["tool"] == "demo.slow"
    assert slow.gate.cancelled and not slow.gate.finished
    assert store._rows == {}  # the clarification the tool would have asked is not kept


@pytest.mark.usefixtures("info_logs")
async def test_a_client_that_goes_away_cancels_the_round_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    store = MemorySessionStore()
    app = load(tmp_path, scripted(), store)
    slow = app.tool("slow")
    assert isinstance(slow, Slow)
    with capture_logs() as logs:
        async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
            body = {"message": "slow please", "stream": True}
            async with client.stream("POST", f"{url}/v1/ask", json=body) as response:
                async for message in sse_messages(response):
                    if message.event == "tool_started":
                        break
            await asyncio.wait_for(slow.gate.reached.wait(), 5)
            await slow.gate.until_cancelled()  # the server notices the closed connection
    await app.aclose()

    assert slow.gate.cancelled and not slow.gate.finished
    assert store._rows == {}
    assert any(entry["event"] == "stream_abandoned" for entry in logs)


async def test_a_reply_whose_client_goes_away_leaves_the_conversation_waiting(
    tmp_path: Path,
) -> None:
    store = MemorySessionStore()
    app = load(tmp_path, scripted(), store)
    tool = app.tool("slowreply")
    assert isinstance(tool, SlowReply)
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        _, first = await stream_ask(client, url, {"message": "slowreply", "stream": True})
        session_id = first[-1].data["answer"]["session_id"]
        before = await store.load(session_id)
        reply = {"message": "the red one", "session_id": session_id, "stream": True}
        async with client.stream("POST", f"{url}/v1/ask", json=reply) as response:
            async for message in sse_messages(response):
                if message.event == "tool_started":
                    break
        await asyncio.wait_for(tool.gate.reached.wait(), 5)
        await asyncio.sleep(0.3)  # the server notices the closed connection
        after = await store.load(session_id)  # still there, as it was before the reply
        tool.gate.release.set()
        _, again = await stream_ask(client, url, reply)
    await app.aclose()

    assert after.version == before.version
    assert after.task == before.task
    assert again[-1].data["answer"]["text"] == "Done with the red one."


async def test_error_texts_in_events_are_withheld_like_in_the_answer(tmp_path: Path) -> None:
    app = load(tmp_path, scripted())
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        _, messages = await stream_ask(client, url, {"message": "broken thing", "stream": True})
        verbose_app = load(tmp_path, scripted())
    await app.aclose()

    finished = next(m.data for m in messages if m.event == "tool_finished")
    answer = messages[-1].data["answer"]
    assert finished["record"]["outcome"] == "error"
    assert "hunter2" not in json.dumps([m.data for m in messages])
    match = re.fullmatch(r"failed \(error id ([0-9a-f]{12})\)", finished["record"]["detail"])
    assert match is not None
    # the same failure has the same id in the event and in the answer
    assert answer["trace"]["tools"][0]["detail"] == finished["record"]["detail"]
    assert match.group(1) in answer["failures"][0]

    settings = ServerSettings(expose_error_details=True)
    async with serving(verbose_app, settings) as url, httpx.AsyncClient(timeout=10) as client:
        _, shown = await stream_ask(client, url, {"message": "broken thing", "stream": True})
    await verbose_app.aclose()
    detail = next(m.data for m in shown if m.event == "tool_finished")["record"]["detail"]
    assert "cannot reach postgres://app:***@db.internal/prod" in detail


async def test_the_models_tokens_arrive_before_the_answer_over_http(tmp_path: Path) -> None:
    """The real model path: the OpenAI gateway streaming from a (fake) model server."""
    from toolwire.llm import OpenAIGateway
    from toolwire.settings import LLMSettings

    def reply(request: FakeRequest) -> FakeReply:
        if request.body.get("stream"):
            return FakeReply(text="Take 400 mg with food.", piece_delay_s=0.15)
        return FakeReply()  # the other calls: schema-valid defaults

    async with FakeOpenAIServer(reply) as model_server:
        settings = LLMSettings(base_url=model_server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="test")
        app = load(tmp_path, gateway)
        async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
            _, messages = await stream_ask(client, url, {"message": "dose?", "stream": True})
        await app.aclose()

    deltas = [m.data for m in messages if m.event == "answer_delta"]
    assert [d["text"] for d in deltas] == ["Take", " 400", " mg", " with", " food."]
    answer = messages[-1].data
    assert answer["answer"]["text"].startswith("Take 400 mg with food.")
    # each piece was sent as soon as the model produced it: 4 pauses of 0.15 s after the first
    assert deltas[-1]["at_ms"] - deltas[0]["at_ms"] >= 550
