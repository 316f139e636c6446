"""The answer's text streamed through the chat transport (``ChatRequest.on_text``): the OpenAI
transport against the fake server's Server-Sent Events, a transport that cannot stream, and the
failure paths (a stream that breaks off, one that is too slow)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolwire.context_buffer import PromptAndContext
from toolwire.errors import ModelError
from toolwire.events import AnswerDelta, Event, ModelCallFinished, ModelCallStarted, observing
from toolwire.llm import ChatModel, ChatReply, ChatRequest, OpenAIGateway, collect_calls
from toolwire.settings import LLMSettings
from toolwire.testing import fake_openai
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply

CONTEXT = [PromptAndContext(prompt="q", context="Ibuprofen: 400 mg.", tool_name="t", task_no="1")]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def gateway(server: FakeOpenAIServer) -> AsyncIterator[OpenAIGateway]:
    settings = LLMSettings(base_url=server.base_url, model="fake-model", timeout_s=5.0)
    model = OpenAIGateway(settings.model_copy(update={"max_retries": 0}), api_key="test-key")
    yield model
    await model.aclose()


async def test_a_watched_answer_streams_its_text_piece_by_piece(
    server: FakeOpenAIServer, gateway: OpenAIGateway
) -> None:
    server.script(FakeReply(text="Take 400 mg with food.", piece_delay_s=0.2))
    seen: list[Event] = []

    with observing(seen.append), collect_calls() as calls:
        text = await gateway.answer("What dose?", CONTEXT)

    request = server.chat_requests[0]
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    deltas = [event for event in seen if isinstance(event, AnswerDelta)]
    assert [delta.text for delta in deltas] == ["Take", " 400", " mg", " with", " food."]
    assert text == "Take 400 mg with food."
    # the pieces arrived while the call ran: the last four came at least 4 × 0.2 s after the first
    finished = next(event for event in seen if isinstance(event, ModelCallFinished))
    assert finished.at_ms - deltas[0].at_ms >= 700
    started = next(event for event in seen if isinstance(event, ModelCallStarted))
    assert all(delta.parent == started.step for delta in deltas)
    # the figures come from the stream's usage chunk, as for a plain reply
    (record,) = calls
    assert record.purpose == "answer" and record.ok
    assert record.prompt_tokens > 0
    assert record.completion_tokens == len(text) // 4 + 1
    assert finished.record == record


async def test_an_unwatched_answer_and_structured_calls_are_not_streamed(
    server: FakeOpenAIServer, gateway: OpenAIGateway
) -> None:
    server.script(FakeReply(text="plain"), FakeReply(text='{"sufficient": true, "missing": []}'))

    assert await gateway.answer("What dose?", CONTEXT) == "plain"
    with observing(lambda event: None):
        await gateway.judge_context("q", CONTEXT)

    assert [request.body.get("stream") for request in server.chat_requests] == [None, None]


async def test_a_stream_that_breaks_off_is_a_model_error_with_a_failed_record(
    server: FakeOpenAIServer, gateway: OpenAIGateway
) -> None:
    server.script(FakeReply(text="one two three four", break_after=2))
    seen: list[Event] = []

    with (
        observing(seen.append),
        collect_calls() as calls,
        pytest.raises(ModelError, match="the stream broke off"),
    ):
        await gateway.answer("q", CONTEXT)

    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["one", " two"]
    assert len(server.chat_requests) == 1  # not retried: part of the text was shown
    (record,) = calls
    assert not record.ok
    assert "stream broke off" in (record.error or "")


async def test_a_streamed_chunk_nested_too_deeply_is_a_model_error(
    server: FakeOpenAIServer, gateway: OpenAIGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk of valid JSON thousands deep (before: a RecursionError out of the stream)."""
    streamed = fake_openai._Stream.of

    def with_a_deep_chunk(*args: Any) -> Any:
        stream = streamed(*args)
        stream.events.insert(1, "[" * 100_000 + "]" * 100_000)
        return stream

    monkeypatch.setattr(fake_openai._Stream, "of", with_a_deep_chunk)
    server.script(FakeReply(text="one two three"))
    seen: list[Event] = []

    with observing(seen.append), pytest.raises(ModelError) as raised:
        await gateway.answer("q", CONTEXT)

    assert raised.value.detail == "a streamed chunk is JSON nested too deeply to read"
    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["one"]


async def test_a_stream_slower_than_the_calls_time_is_a_timeout(server: FakeOpenAIServer) -> None:
    settings = LLMSettings(base_url=server.base_url, model="fake-model", timeout_s=0.5)
    gateway = OpenAIGateway(settings, api_key="test-key")
    server.script(FakeReply(text="a b c d e f g h", piece_delay_s=0.2))

    with observing(lambda event: None), pytest.raises(ModelError, match="timed out"):
        await gateway.answer("q", CONTEXT)
    await gateway.aclose()


async def test_the_wait_for_the_headers_counts_toward_a_streamed_calls_time(
    server: FakeOpenAIServer,
) -> None:
    """llama.cpp sends the headers once it has read the prompt: 0.4 s of a 0.5 s call are gone
    before the first piece, and eight pieces 0.05 s apart do not fit the rest."""
    settings = LLMSettings(base_url=server.base_url, model="fake-model", timeout_s=0.5)
    gateway = OpenAIGateway(settings, api_key="test-key")
    server.script(FakeReply(text="a b c d e f g h", delay_s=0.4, piece_delay_s=0.05))
    started = time.monotonic()

    with observing(lambda event: None), pytest.raises(ModelError, match="timed out"):
        await gateway.answer("q", CONTEXT)
    assert time.monotonic() - started < 0.7
    await gateway.aclose()


async def test_a_stream_the_content_filter_stopped_is_a_model_error(
    server: FakeOpenAIServer, gateway: OpenAIGateway
) -> None:
    server.script(FakeReply(text="The dose", finish_reason="content_filter"))
    seen: list[Event] = []

    with observing(seen.append), pytest.raises(ModelError, match="content filter stopped"):
        await gateway.answer("q", CONTEXT)
    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["The", " dose"]


class WholeReplyTransport:
    """A transport that cannot stream: it ignores ``on_text``."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        return ChatReply(text="All at once.", model="whole")

    async def aclose(self) -> None:
        pass


async def test_a_transport_that_cannot_stream_shows_the_watcher_the_text_at_once() -> None:
    transport = WholeReplyTransport()
    model = ChatModel(transport)
    seen: list[Event] = []

    with observing(seen.append):
        assert await model.answer("q", CONTEXT) == "All at once."
    assert await model.answer("q", CONTEXT) == "All at once."

    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["All at once."]
    watched, unwatched = transport.requests
    assert watched.on_text is not None and unwatched.on_text is None
