"""Budgets that fit the model's speed (issue 10 item 5): one time budget per question that every
call draws from, no retries stacked, completion limits per purpose for the model in use, and a
short answer when nothing was retrieved."""

from __future__ import annotations

import asyncio
import time

import pytest
from structlog.testing import capture_logs

from orchestration_kit import EchoTool
from toolwire import ModelError, TimeBudgetSpentError
from toolwire.llm import ChatModel, ChatReply, ChatRequest, OpenAIGateway, create_language_model
from toolwire.llm.base import SuitabilityQuestion
from toolwire.llm.budget import ANSWER_RESERVE, call_time, question_budget
from toolwire.registry import DomainSpec
from toolwire.settings import LLMSettings, OrchestratorSettings
from toolwire.testing import conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply


def test_a_call_gets_the_timeout_cut_to_what_the_question_has_left() -> None:
    assert call_time("answer", 60.0, is_answer=True) == 60.0  # no question: the call timeout
    with question_budget(100.0):
        assert call_time("parameters", 10.0, is_answer=False) == 10.0
        other = call_time("parameters", 600.0, is_answer=False)
        answer = call_time("answer", 600.0, is_answer=True)
    assert 100 * (1 - ANSWER_RESERVE) - 1 < other <= 100 * (1 - ANSWER_RESERVE)
    assert 99 < answer <= 100


def test_the_answers_reserve_is_kept_from_other_calls_and_a_spent_budget_raises() -> None:
    with question_budget(2.0) as budget:
        assert budget is not None
        object.__setattr__(budget, "deadline", time.monotonic() + 1.2)  # 1.2 s of 2 s left
        with pytest.raises(TimeBudgetSpentError, match="spent up to the answer's reserve"):
            call_time("gatekeeper", 60.0, is_answer=False)
        assert 1.0 < call_time("answer", 60.0, is_answer=True) <= 1.2
        object.__setattr__(budget, "deadline", time.monotonic() + 0.5)
        spent = r"time budget of 2 s is spent \(orchestrator.question_budget_s\)"
        with pytest.raises(TimeBudgetSpentError, match=spent):
            call_time("answer", 60.0, is_answer=True)


def test_an_inner_budget_never_extends_the_outer_deadline() -> None:
    with question_budget(10.0) as outer, question_budget(1000.0) as inner:
        assert inner is outer
    with question_budget(10.0) as outer, question_budget(1.0) as inner:
        assert inner is not None and outer is not None and inner.deadline < outer.deadline
    with question_budget(None) as none:
        assert none is None


async def test_a_question_on_a_model_slower_than_its_budget_ends_near_the_budget() -> None:
    """The issue's 364 s: a 60 s call timeout, 2 client retries and 2 orchestrator attempts
    stacked. Here the model never answers in time; the question still ends at its budget."""
    budget_s = 6.0
    async with FakeOpenAIServer(lambda _request: FakeReply(delay_s=30.0)) as server:
        settings = LLMSettings(base_url=server.base_url, model="slow", timeout_s=60, max_retries=2)
        gateway = OpenAIGateway(settings, api_key="k")
        service = conversation_for(
            DomainSpec(name="demo"),
            EchoTool("one", "context"),
            model=gateway,
            settings=OrchestratorSettings(question_budget_s=budget_s, model_attempts=2),
        )
        started = time.monotonic()
        with capture_logs() as logs, pytest.raises(ModelError, match="answer"):
            await service.ask("q")
        elapsed = time.monotonic() - started
        await gateway.aclose()

    assert budget_s - 0.5 < elapsed < budget_s + 1.5
    calls = [event for event in logs if event["event"] == "llm_call"]
    assert [(call["purpose"], call["ok"]) for call in calls] == [
        ("suitability", False), ("answer", False)
    ]  # fmt: skip
    assert all("timed out" in call["error"] for call in calls)
    assert len(server.chat_requests) == 2  # no retry of a timed-out call, no second attempt


async def test_a_question_that_ran_out_of_time_before_the_answer_says_so() -> None:
    async with FakeOpenAIServer(lambda _request: FakeReply(delay_s=30.0)) as server:
        settings = LLMSettings(base_url=server.base_url, model="slow", timeout_s=60)
        gateway = OpenAIGateway(settings, api_key="k")
        with question_budget(1.2), pytest.raises(TimeBudgetSpentError) as raised:
            await gateway.judge_context("q", [])
        await asyncio.sleep(0)
        await gateway.aclose()
    assert raised.value.purpose == "gatekeeper"
    assert server.chat_requests == []  # no call is started without the time to finish it


def test_the_embedded_model_gets_completion_limits_for_its_speed() -> None:
    embedded = create_language_model(LLMSettings(), environ={})
    remote = create_language_model(
        LLMSettings(base_url="http://127.0.0.1:9/v1", model="m"), environ={}
    )
    configured = create_language_model(
        LLMSettings(profile={"completion_limits": {"answer": 700}}), environ={}
    )
    assert isinstance(embedded, OpenAIGateway) and isinstance(configured, OpenAIGateway)
    assert isinstance(remote, OpenAIGateway)
    limits = embedded.profile.completion_limits
    assert (limits.answer, limits.classification, limits.compression) == (384, 128, 512)
    assert limits.answer_without_context == 96
    assert remote.profile.completion_limits.answer == 1024  # a server of unknown speed
    assert configured.profile.completion_limits.answer == 700  # the configuration wins
    assert configured.profile.completion_limits.classification == 128  # the rest: embedded


class OneSlotTransport:
    """A server with one slot: each call takes ``seconds``; records calls in flight and the
    timeout each call was given."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.in_flight = 0
        self.most_in_flight = 0
        self.timeouts: list[float] = []

    async def send(self, request: ChatRequest) -> ChatReply:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.timeouts.append(request.timeout_s)
        await asyncio.sleep(self.seconds)
        self.in_flight -= 1
        return ChatReply(text='{"answer": "yes"}', model="one-slot")

    async def aclose(self) -> None:
        pass


async def test_calls_wait_for_a_slot_before_their_timeout_starts() -> None:
    """Tools' yes/no questions run side by side; on a one-slot server they queue in the model
    layer, where waiting spends the question's budget but not the call's own timeout (queued
    inside the server, the fourth call ran into its 60 s timeout)."""
    transport = OneSlotTransport(seconds=0.2)
    model = ChatModel(transport, LLMSettings(timeout_s=0.5), concurrency=1)
    questions = [SuitabilityQuestion(tool_name=f"demo.t{n}", question="?") for n in range(4)]

    with question_budget(60.0):
        answers = await model.suitability("q", questions)

    assert answers == dict.fromkeys((q.tool_name for q in questions), True)
    assert transport.most_in_flight == 1
    assert transport.timeouts == [0.5] * 4  # each call's own timeout, none spent waiting
