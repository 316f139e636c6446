"""A model that is down or answers garbage (issue 11 items 1 and 2), seen from outside.

The contract: when the answer needs the model and the model fails (unreachable, 5xx or 429 after
the retries, a reply that is not a chat completion, the question's time budget spent), ``ask``
raises ``ModelError``: HTTP 502 ``model_error``, exit code 1 in the CLI, so that monitoring that
counts 5xx sees a dead model. A step that failed while the answer could still be given (a
guaranteed answer of a tool) is listed in ``failures`` of a 200 answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from orchestration_kit import AskingTool, EchoTool, Query
from server_support.fake_model import fake_model_in_thread
from server_support.processes import ServerProcess, write_config
from toolwire import ModelError, ToolExecutionResult
from toolwire.disclosure import disclosed_answer
from toolwire.events import AnswerDelta, Event, observing
from toolwire.llm import OpenAIGateway
from toolwire.llm.local import free_port
from toolwire.orchestrator.answer import answer_cut_off
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest, default_output


@contextmanager
def server_on_model(
    tmp_path: Path, base_url: str, request_timeout_s: float = 30.0
) -> Iterator[ServerProcess]:
    """``toolwire serve`` (the test plugin's ``trip`` domain) on the OpenAI-compatible model at
    ``base_url``, instead of the scripted model."""
    config = write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        server={"request_timeout_s": request_timeout_s},
        llm={"base_url": base_url, "model": "fake-model", "max_retries": 1, "timeout_s": 60},
    )
    process = ServerProcess(
        config, tmp_path / "server.log", env={"TOOLWIRE_TEST_REAL_MODEL": "1"}
    ).start()
    try:
        yield process
    finally:
        process.stop()


NOT_A_COMPLETION = json.dumps({"choices": {"0": "yes"}, "usage": "lots"}).encode()


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (None, "cannot connect to the model server"),
        (FakeReply(status=503, error="overloaded"), "HTTP 503: overloaded"),
        (FakeReply(status=429, error="rate limited"), "HTTP 429: rate limited"),
        (FakeReply(raw_body=b"<html>bad gateway</html>"), "not JSON"),
        (FakeReply(raw_body=NOT_A_COMPLETION), "not an OpenAI chat completion"),
    ],
    ids=["unreachable", "503", "429", "garbage", "json-not-a-completion"],
)
@pytest.mark.requires_extra("server")
def test_a_dead_model_is_a_502_model_error_over_http(
    tmp_path: Path, reply: FakeReply | None, cause: str
) -> None:
    with model_url(reply) as base_url, server_on_model(tmp_path, base_url) as server:
        response = httpx.post(
            f"{server.url}/v1/ask", json={"message": "book a table in Rome"}, timeout=30
        )
        body = response.json()
        assert response.status_code == 502, response.text
        assert body["error"] == "model_error"
        assert body["details"]["purpose"] == "answer"
        assert cause in logged_error(server, body["details"]["error_id"])
        events = server.events()

    failed = [e for e in events if e.get("event") == "llm_call" and e.get("ok") is False]
    assert failed and all(cause in e["error"] for e in failed)


def logged_error(server: ServerProcess, error_id: str) -> str:
    """The text behind an error id the caller got, from the server's log (the caller gets a
    generic reason; the operator the details)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for event in server.events():
            if event.get("error_id") == error_id:
                return str(event)
        time.sleep(0.05)
    raise AssertionError(f"no log event carries error id {error_id}")


@contextmanager
def model_url(reply: FakeReply | None) -> Iterator[str]:
    """The base URL of a fake model answering ``reply`` to everything; None: a port where
    nothing listens (connection refused)."""
    if reply is None:
        yield f"http://127.0.0.1:{free_port()}/v1"
        return
    with fake_model_in_thread(lambda _request: reply) as fake:
        yield fake.base_url


@pytest.mark.requires_extra("server")
def test_a_model_too_slow_for_the_request_is_a_502_before_the_requests_timeout(
    tmp_path: Path,
) -> None:
    """The server's request timeout bounds the question's budget, so the model calls end first:
    the caller learns that the model failed (502), not only that the request took too long."""
    slow = FakeReply(text="late", delay_s=30.0)
    with (
        fake_model_in_thread(lambda _request: slow) as fake,
        server_on_model(tmp_path, fake.base_url, 4.0) as server,
    ):
        started = time.monotonic()
        response = httpx.post(f"{server.url}/v1/ask", json={"message": "book"}, timeout=30)
        elapsed = time.monotonic() - started
        assert response.status_code == 502, response.text
        logged = logged_error(server, response.json()["details"]["error_id"])

    assert "time budget of 3.8 s is spent (server.request_timeout_s)" in logged
    assert elapsed < 4.0


# -- in process, with the scripted model --------------------------------------------------------


def trip() -> DomainSpec:
    return DomainSpec(name="trip", description="Table booking.")


async def test_a_resumed_round_whose_answer_fails_keeps_the_conversation_waiting() -> None:
    asks = AskingTool("asks", "Which city?")
    model = ScriptedModel().on_suitability(["asks"]).on_extract(Query, {"query": "Rome"})
    model.on_answer(ModelError("answer", "down"), times=1).on_answer("Booked in Rome.")
    store = MemorySessionStore()
    service = conversation_for(trip(), asks, model=model, store=store)

    question = await service.ask("book a table")
    assert question.kind == "clarification" and question.session_id
    with pytest.raises(ModelError):
        await service.ask("Rome", session_id=question.session_id)
    # nothing was lost: the same reply is sent again once the model is back
    answer = await service.ask("Rome", session_id=question.session_id)
    assert answer.kind == "answer" and answer.text.startswith("Booked in Rome.")
    assert len(asks.clarifications) == 2  # the tool ran on the reply both times


async def test_a_guaranteed_answer_survives_a_failing_answer_model() -> None:
    sure = EchoTool("sure", ToolExecutionResult.as_guaranteed_context("Verified: no interaction."))
    plain = EchoTool("plain", "some more context")
    model = ScriptedModel().on_suitability(["sure", "plain"]).on_answer(ModelError("answer", "x"))
    service = conversation_for(trip(), sure, plain, model=model)

    answer = await service.ask("q")

    assert answer.kind == "answer"
    assert answer.text.startswith("Verified: no interaction.")
    assert any("answer composition failed" in failure for failure in answer.failures)


async def test_a_watched_answer_checks_a_reply_that_is_not_an_event_stream() -> None:
    """A server that answers a stream request with a whole body: a chat completion is read as
    one piece; anything else is the same ModelError as without streaming (issue 11 item 1)."""
    whole = json.dumps({
        "model": "fake-model", "usage": {"prompt_tokens": 9, "completion_tokens": 2},
        "choices": [{"message": {"content": "Take 400 mg."}, "finish_reason": "stop"}],
    })  # fmt: skip
    async with FakeOpenAIServer() as server:
        server.script(
            FakeReply(raw_body=whole.encode()),
            FakeReply(raw_body=b"<html>bad gateway</html>"),
            FakeReply(raw_body=NOT_A_COMPLETION),
        )
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="k")
        seen: list[Event] = []
        with observing(seen.append):
            assert await gateway.answer("q", []) == "Take 400 mg."
            with pytest.raises(ModelError, match="not JSON"):
                await gateway.answer("q", [])
            with pytest.raises(ModelError, match="not an OpenAI chat completion"):
                await gateway.answer("q", [])
        await gateway.aclose()

    assert all(request.body.get("stream") for request in server.chat_requests)
    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["Take 400 mg."]


@pytest.mark.parametrize("finish_reason", ["length", "stop"])
async def test_an_answer_cut_off_at_its_length_limit_is_listed_as_a_failure(
    finish_reason: str,
) -> None:
    """The text the model wrote up to the limit is kept, and the caller learns that it is not
    the whole answer (before, only a log line said so); a finished answer lists nothing."""

    def answering(request: FakeRequest) -> FakeReply:
        if request.output_schema is not None:
            return FakeReply(text=default_output(request.output_schema))
        return FakeReply(text="Tables are free at 8 pm, and", finish_reason=finish_reason)

    async with FakeOpenAIServer(answering) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="k")
        answer = await conversation_for(trip(), model=gateway).ask("book a table in Rome")
        await gateway.aclose()

    cut_off = finish_reason == "length"
    assert answer.kind == "answer"
    assert answer.text.startswith("Tables are free at 8 pm, and")
    # nothing was retrieved: the limit to raise is the short one of such answers
    notice = answer_cut_off(with_context=False)
    expected = [f"task 1: {notice.message}"] if cut_off else []
    assert answer.failures == expected
    assert answer.notices == ([notice] if cut_off else [])
    assert notice.kind == "answer_cut_off" and notice.message == (
        "the answer reached its length limit and was cut off "
        "(the model profile's completion_limits.answer_without_context)"
    )
    assert [call.truncated for call in answer.model_calls if call.purpose == "answer"] == [cut_off]
    # a caller who sees no error details (HTTP, MCP) still learns that the text is not whole
    shown = disclosed_answer(answer, verbose=False)
    assert (shown.failures, shown.notices) == (expected, answer.notices)


DEEP = "[" * 100_000 + "]" * 100_000
"""Valid JSON nested deeper than Python's json reader can follow (it raised RecursionError)."""


async def test_json_nested_too_deeply_is_a_model_error_or_a_bad_output_not_a_crash() -> None:
    async with FakeOpenAIServer() as server:
        server.script(
            FakeReply(raw_body=b'{"choices": ' + DEEP.encode() + b"}"),
            FakeReply(text=DEEP),
            FakeReply(text=DEEP),
        )
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="k")
        with pytest.raises(ModelError, match="the server's reply is JSON nested too deeply"):
            await gateway.answer("q", [])
        # as structured output: an invalid output, told to the model once, then None
        assert await gateway.extract(Query, "find Rome") is None
        await gateway.aclose()

    corrective = server.chat_requests[-1].messages[-1]["content"]
    assert "the output is JSON nested too deeply to read" in corrective
