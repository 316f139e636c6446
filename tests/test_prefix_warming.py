"""The next turn's prompt warmed while the user reads (the model profile's ``prefix_warming``):
once a turn is stored, the follow-up rewrite's prompt up to the message goes to the server with
a one-token limit, so that the next turn's rewrite finds it in the prompt cache. It is never in a
question's calls, never delays one (a call cancels a warm-up in flight, and none starts while a
call holds the slot), and its failure costs nothing but the time it would have saved."""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypeVar, cast

import pytest
from structlog.testing import capture_logs

from orchestration_kit import AskingTool, Query, QueryTool, dosage_server_reply
from toolwire import App
from toolwire.cli.ask_commands import settling
from toolwire.llm import OpenAIGateway, Purpose
from toolwire.llm.base import current_domain_prompt
from toolwire.llm.builtin_profiles import EMBEDDED_PROFILE, GENERAL_PROFILE
from toolwire.llm.history import current_history
from toolwire.llm.profiles import resolve_profile
from toolwire.orchestrator.follow_up import FOLLOW_UP_INSTRUCTION, StandaloneTask
from toolwire.orchestrator.turn_compression import history_tokens
from toolwire.registry import DomainSpec
from toolwire.settings import LLMSettings, SessionSettings
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest

DOMAIN = DomainSpec(name="pharma", description="Medicines.")
S = TypeVar("S", bound=ScriptedModel)
WARMING = GENERAL_PROFILE.model_copy(update={"prefix_warming": True})


def is_warm_up(request: FakeRequest) -> bool:
    return request.body.get("max_tokens") == 1


def replying(warm_up: FakeReply | None = None) -> Any:
    """A server for the dosage domain; ``warm_up``: how it answers a warm-up."""

    def reply(request: FakeRequest) -> FakeReply:
        if is_warm_up(request):
            return warm_up or FakeReply(text="{")
        return dosage_server_reply(request)

    return reply


def gateway(server: FakeOpenAIServer, *, warming: bool = True) -> OpenAIGateway:
    settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
    profile = WARMING if warming else GENERAL_PROFILE
    return OpenAIGateway(settings, api_key="k", concurrency=1, profile=profile)


async def test_the_next_rewrite_finds_its_prompt_sent_before_up_to_the_message() -> None:
    async with FakeOpenAIServer(replying()) as server:
        model = gateway(server)
        chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
        first = await chat.ask("Tell me about ibuprofen")
        await chat.settle()
        turn_one = len(server.chat_requests)
        second = await chat.ask("and its dose?", session_id=first.session_id)
        await chat.settle()
        await model.aclose()

    warm_ups = [r for r in server.chat_requests if is_warm_up(r)]
    assert len(warm_ups) == 2  # after each stored turn
    warm_up, rewrite = server.chat_requests[turn_one - 1], server.chat_requests[turn_one]
    assert warm_up is warm_ups[0]
    assert rewrite.messages[:3] == warm_up.messages[:3]  # system, then the turn just finished
    assert warm_up.messages[1:3] == [
        {"role": "user", "content": "Tell me about ibuprofen"},
        {"role": "assistant", "content": first.text},
    ]
    assert warm_up.messages[0]["content"].endswith("Domain: Medicines.")
    warmed, sent = warm_up.messages[3]["content"], rewrite.messages[3]["content"]
    assert FOLLOW_UP_INSTRUCTION in warmed and warmed.endswith("<task></task>")
    assert sent == warmed.removesuffix("</task>") + "and its dose?</task>"
    assert warm_up.body["response_format"] == rewrite.body["response_format"]  # same grammar
    assert second.model_calls[0].purpose == "decomposition"  # the rewrite, not a warm-up
    assert len(second.model_calls) == len(server.chat_requests) - turn_one - 1  # one warm-up


async def test_a_warm_up_is_outside_the_question_its_observers_see_no_call_of_it() -> None:
    events: list[Any] = []
    async with FakeOpenAIServer(replying()) as server:
        model = gateway(server)
        chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
        chat.observers.append(lambda: events.append)
        with capture_logs() as logs:
            answer = await chat.ask("Tell me about ibuprofen")
            await chat.settle()
        await model.aclose()

    assert type(events[-1]).__name__ == "RoundFinished"  # nothing after the question ended
    calls = [e for e in events if type(e).__name__ == "ModelCallFinished"]
    assert len(calls) == len(answer.model_calls) == len(server.chat_requests) - 1
    assert [e["event"] for e in logs].count("prefix_warmed") == 1


async def test_a_profile_without_prefix_warming_sends_nothing_between_turns() -> None:
    async with FakeOpenAIServer(replying()) as server:
        model = gateway(server, warming=False)
        chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
        first = await chat.ask("Tell me about ibuprofen")
        await chat.settle()
        sent = len(server.chat_requests)
        await chat.ask("and its dose?", session_id=first.session_id)
        await model.aclose()

    assert sent == len(first.model_calls)
    assert not any(is_warm_up(r) for r in server.chat_requests)


def test_the_embedded_profile_warms_and_a_user_can_turn_it_off() -> None:
    assert EMBEDDED_PROFILE.prefix_warming and not GENERAL_PROFILE.prefix_warming
    profiles = {"general": GENERAL_PROFILE, "embedded": EMBEDDED_PROFILE}
    off = resolve_profile({"prefix_warming": False}, "qwen2.5-coder-1.5b-instruct", profiles)
    assert not off.prefix_warming and off.structured_output == "json_schema"


async def test_a_call_cancels_a_warm_up_in_flight_instead_of_waiting_for_it() -> None:
    async with FakeOpenAIServer(replying(FakeReply(text="{", delay_s=30.0))) as server:
        model = gateway(server)
        warming = asyncio.create_task(model.prefill(StandaloneTask))
        async with asyncio.timeout(5):
            while not server.chat_requests:
                await asyncio.sleep(0.01)
        started = time.monotonic()
        with capture_logs() as logs:
            extracted = await model.extract(Query, "ibuprofen", purpose=Purpose.PARAMETERS)
        elapsed = time.monotonic() - started
        assert await warming is False
        await model.aclose()

    assert extracted == Query(query="ibuprofen") and elapsed < 5
    assert [e["event"] for e in logs if e["event"].startswith("prefill")] == ["prefill_preempted"]


async def test_no_warm_up_starts_while_a_call_holds_the_slot() -> None:
    def reply(request: FakeRequest) -> FakeReply:
        return FakeReply(text='{"query": "ibuprofen"}', delay_s=0.5)

    async with FakeOpenAIServer(reply) as server:
        model = gateway(server)
        extracting = asyncio.create_task(model.extract(Query, "x", purpose=Purpose.PARAMETERS))
        await asyncio.sleep(0.05)
        assert await model.prefill(StandaloneTask) is False
        await extracting
        await model.aclose()

    assert len(server.chat_requests) == 1 and not is_warm_up(server.chat_requests[0])


async def test_a_failed_warm_up_is_logged_and_the_next_turn_goes_on_as_without_it() -> None:
    async with FakeOpenAIServer(replying(FakeReply(status=500))) as server:
        model = gateway(server)
        chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
        with capture_logs() as logs:
            first = await chat.ask("Tell me about ibuprofen")
            await chat.settle()
        second = await chat.ask("and its dose?", session_id=first.session_id)
        await chat.aclose()
        await model.aclose()

    failed = [e for e in logs if e["event"] == "prefill_failed"]
    assert len(failed) == 1 and failed[0]["purpose"] == "decomposition"
    assert all(e["ok"] for e in logs if e["event"] == "llm_call")  # no question's call failed
    assert second.kind == "answer" and second.text == "Ibuprofen: 400 mg."


async def test_closing_the_service_cancels_a_warm_up_in_flight() -> None:
    async with FakeOpenAIServer(replying(FakeReply(text="{", delay_s=30.0))) as server:
        model = gateway(server)
        chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
        await chat.ask("Tell me about ibuprofen")
        async with asyncio.timeout(5):
            while not any(is_warm_up(r) for r in server.chat_requests):
                await asyncio.sleep(0.01)
        started = time.monotonic()
        await chat.aclose()
        await chat.settle()  # nothing left to wait for
        assert time.monotonic() - started < 5
        await model.aclose()


class WarmingModel(ScriptedModel):
    """The scripted model, with a warm-up that records what it would send."""

    warms_prefixes = True

    def __init__(self, fails: BaseException | None = None) -> None:
        super().__init__()
        self.warm_ups: list[tuple[Any, ...]] = []
        self.fails = fails

    async def prefill(
        self,
        schema: type[Any],
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> bool:
        self.warm_ups.append((schema, purpose, current_history(), current_domain_prompt()))
        if self.fails is not None:
            raise self.fails
        return True


def scripted(model: S) -> S:
    model.on_suitability({"dosage": True}).on_extract(Query, {"query": "ibuprofen"})
    model.on_extract(StandaloneTask, {"task": "What is the dose of ibuprofen?"})
    model.on_answer(lambda question, contexts: "noted")
    return model


async def test_a_warm_up_reads_the_conversation_as_the_next_turn_will() -> None:
    model = scripted(WarmingModel())
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
    first = await chat.ask("Tell me about ibuprofen")
    await chat.settle()
    second = await chat.ask("and its dose?", session_id=first.session_id)
    await chat.settle()

    assert len(model.warm_ups) == 2
    schema, purpose, history, domain = model.warm_ups[0]
    assert schema is StandaloneTask and purpose is Purpose.DECOMPOSITION
    assert history == (
        {"role": "user", "content": "Tell me about ibuprofen"},
        {"role": "assistant", "content": "noted"},
    )
    assert domain is not None and "Medicines." in str(domain)
    assert len(model.warm_ups[1][2]) == 4 and second.turn == 2


async def test_no_warm_up_while_a_clarifying_question_waits_the_reply_is_no_rewrite() -> None:
    model = WarmingModel()
    model.on_suitability({"asking": True}).on_extract(Query, {"query": "ibuprofen"})
    model.on_answer(lambda question, contexts: "noted")
    chat = conversation_for(DOMAIN, AskingTool("asking"), model=model)
    asked = await chat.ask("Tell me about it")
    await chat.settle()

    assert asked.kind == "clarification" and model.warm_ups == []


async def test_no_warm_up_when_the_next_turn_compresses_the_history_first() -> None:
    model = scripted(WarmingModel())
    budget = SessionSettings(history_tokens=256)
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model, sessions=budget)
    long = await chat.ask("Tell me about ibuprofen and every product that holds it. " * 25)
    await chat.settle()
    stored = (await chat.store.load(long.session_id)).conversation
    assert history_tokens(stored) > 256  # the next turn compresses first

    assert model.warm_ups == []


@pytest.mark.parametrize("error", [RuntimeError("socket gone"), SystemExit(3)])
async def test_a_warm_up_that_raises_is_logged_and_loses_nothing(error: BaseException) -> None:
    """Even a SystemExit from the model's code: in a task it would stop the event loop."""
    model = scripted(WarmingModel(fails=error))
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
    with capture_logs() as logs:
        first = await chat.ask("Tell me about ibuprofen")
        await chat.settle()
    second = await chat.ask("and its dose?", session_id=first.session_id)

    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["prefix_warming_failed"]
    assert second.kind == "answer" and second.turn == 2


class SlowAnswers(WarmingModel):
    """Holds the answer of a message that says "slow" until released."""

    def __init__(self) -> None:
        super().__init__()
        self.answering = asyncio.Event()
        self.release = asyncio.Event()

    async def answer(self, question: str, contexts: Any) -> str:
        if "slow" in question:
            self.answering.set()
            await self.release.wait()
        return await super().answer(question, contexts)


async def test_no_warm_up_starts_while_another_question_is_in_flight() -> None:
    """On a server with one slot a warm-up would hold back the other question's next call."""
    model = SlowAnswers()
    scripted(model)
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
    slow = asyncio.create_task(chat.ask("a slow question"))
    await asyncio.wait_for(model.answering.wait(), 5)
    await chat.ask("a quick question")
    await chat.settle()
    assert model.warm_ups == []  # the slow one was still in flight
    model.release.set()
    await slow
    await chat.settle()

    assert len(model.warm_ups) == 1
    assert model.warm_ups[0][2][0] == {"role": "user", "content": "a slow question"}


async def test_a_closed_service_starts_no_warm_up() -> None:
    model = scripted(WarmingModel())
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
    await chat.aclose()
    answer = await chat.ask("Tell me about ibuprofen")
    await chat.settle()

    assert answer.kind == "answer" and model.warm_ups == []


async def test_a_model_that_cannot_warm_gets_no_warm_up_task() -> None:
    model = scripted(ScriptedModel())
    chat = conversation_for(DOMAIN, QueryTool("dosage"), model=model)
    await chat.ask("Tell me about ibuprofen")

    assert chat._warming == set()


class SettlingApp:
    """Stands in for the app: its settling takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.settled = False

    async def settle(self) -> None:
        await asyncio.sleep(self.seconds)
        self.settled = True


def test_the_chat_prompt_lets_the_app_settle_while_the_user_types() -> None:
    """``toolwire chat`` reads the prompt in the main thread; with the event loop stopped there
    the warm-up would wait for the next question instead of the user's typing."""
    app = SettlingApp(0.05)
    with asyncio.Runner() as runner, settling(runner, cast(App, app)):
        time.sleep(0.5)  # the user types
        assert app.settled


def test_a_line_sent_before_the_app_settled_does_not_wait_for_it() -> None:
    app = SettlingApp(30.0)
    with asyncio.Runner() as runner:
        started = time.monotonic()
        with settling(runner, cast(App, app)):
            pass  # the line came at once
        assert time.monotonic() - started < 5 and not app.settled
        runner.run(asyncio.sleep(0))  # the next question's loop: nothing stands in its way
