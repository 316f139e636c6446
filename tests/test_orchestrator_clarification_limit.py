"""A user's message gets at most ``orchestrator.max_clarification_rounds`` clarifying questions.

Before, nothing bounded them: a tool that asks again after every reply (or a user who never
gives what it needs) kept the conversation waiting forever, one stored round after another. Now
a tool's question beyond the limit is not passed on: its run is closed as ``skipped``, the rest
of the question runs, and the answer is made from what the other tools found, saying so with a
``clarification_limit`` notice (shown to HTTP and MCP callers like every notice). The limit
counts the questions of one message (its task tree); the conversation's next message starts again.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from orchestration_kit import EchoTool, NoParams
from toolwire import Clarification, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.disclosure import disclosed_answer
from toolwire.events import ClarificationAsked
from toolwire.orchestrator import Answer, ConversationService
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.orchestrator.streaming import Answered
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore
from toolwire.settings import OrchestratorSettings
from toolwire.testing import ScriptedModel, conversation_for

QUESTION = "Which city exactly?"


class NeverSatisfied(OrchestratorActivatedTool[NoParams]):
    """Asks again after every reply."""

    name = "booker"
    priority = 100

    def __init__(self) -> None:
        self.replies: list[str | None] = []

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.clarifying_question(QUESTION)

    def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        self.replies.append(clarification.reply)
        return ToolExecutionResult.clarifying_question(QUESTION)


def service(
    store: MemorySessionStore, **settings: int
) -> tuple[NeverSatisfied, ConversationService]:
    asker = NeverSatisfied()
    weather = EchoTool("weather", "Sunny in Rome.", priority=200)
    model = ScriptedModel().on_suitability(["booker", "weather"]).on_answer()
    model.on_extract(StandaloneTask, lambda text, instruction: {"task": text})  # a later message
    conversation = conversation_for(
        DomainSpec(name="trip"),
        asker,
        weather,
        model=model,
        store=store,
        settings=OrchestratorSettings.model_validate(settings),
    )
    return asker, conversation


def limit_notice(limit: int) -> str:
    return (
        f"tool trip.booker asked {QUESTION!r}, which was not passed on: a message gets at most "
        f"{limit} clarifying question(s) before its answer (orchestrator.max_clarification_rounds:"
        f" {limit}); the answer is made from what the tools found"
    )


def assert_answered_without_the_question(answer: Answer, limit: int) -> None:
    assert answer.kind == "answer" and answer.session_id is not None
    # the answer is made from what the other tool found, and says that it may be incomplete
    assert answer.text.startswith("Sunny in Rome.")
    assert "(Some steps failed, so this answer may be incomplete: 1 problem(s)" in answer.text
    (notice,) = answer.notices
    assert (notice.kind, notice.task_no, notice.detail) == ("clarification_limit", "1", None)
    assert notice.message == limit_notice(limit)
    assert answer.failures == [f"task 1: {notice.message}"]
    booker, weather = answer.trace.tools
    assert (booker.outcome, weather.outcome) == ("skipped", "context")
    assert booker.detail.endswith(
        f"asked {QUESTION!r}, not passed on (orchestrator.max_clarification_rounds: {limit})"
    )
    # callers without error details see it as it is: toolwire's words and the tool's question
    shown = disclosed_answer(answer, verbose=False)
    assert (shown.notices, shown.failures) == (answer.notices, answer.failures)


async def test_the_default_limit_is_five_questions_then_the_answer_says_so() -> None:
    store = MemorySessionStore()
    asker, conversation = service(store)
    assert OrchestratorSettings().max_clarification_rounds == 5

    answer = await conversation.ask("book a table")
    questions = 0
    with capture_logs() as logs:
        while answer.kind == "clarification" and questions < 10:
            questions += 1
            reply = f"reply {questions}"
            answer = await conversation.ask(reply, session_id=answer.session_id)

    assert questions == 5
    assert asker.replies == [f"reply {n}" for n in range(1, 6)]  # the fifth reply ran the tool
    assert_answered_without_the_question(answer, 5)
    assert (await store.load(answer.session_id)).task is None  # nothing waits any more
    (reached,) = [entry for entry in logs if entry["event"] == "clarification_limit_reached"]
    assert (reached["tool"], reached["limit"]) == ("trip.booker", 5)


async def test_a_limit_of_zero_never_asks() -> None:
    store = MemorySessionStore()
    _, conversation = service(store, max_clarification_rounds=0)

    events = [event async for event in conversation.ask_stream("book a table")]

    answered = events[-1]
    assert isinstance(answered, Answered)
    answer = answered.answer
    assert_answered_without_the_question(answer, 0)
    assert not [event for event in events if isinstance(event, ClarificationAsked)]
    assert (await store.load(answer.session_id)).task is None


async def test_questions_within_the_limit_are_asked_as_before() -> None:
    store = MemorySessionStore()
    _, conversation = service(store, max_clarification_rounds=2)

    first = await conversation.ask("book a table")
    second = await conversation.ask("Rome", session_id=first.session_id)
    third = await conversation.ask("Rome!", session_id=second.session_id)

    assert [first.kind, second.kind] == ["clarification", "clarification"]
    assert first.notices == second.notices == []
    assert_answered_without_the_question(third, 2)


async def test_the_limit_counts_the_questions_of_one_message_not_of_the_conversation() -> None:
    """The notice says "a message gets at most N": that is what is counted (the task tree of the
    message); a later message of the same conversation may be asked again."""
    store = MemorySessionStore()
    asker, conversation = service(store, max_clarification_rounds=1)

    first = await conversation.ask("book a table")
    answered = await conversation.ask("Rome", session_id=first.session_id)
    second = await conversation.ask("book another one", session_id=answered.session_id)
    again = await conversation.ask("Milan", session_id=second.session_id)

    assert [first.kind, answered.kind, second.kind, again.kind] == [
        "clarification", "answer", "clarification", "answer"
    ]  # fmt: skip
    assert asker.replies == ["Rome", "Milan"]
    assert_answered_without_the_question(answered, 1)
    assert_answered_without_the_question(again, 1)


def test_the_limit_cannot_be_negative() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        OrchestratorSettings(max_clarification_rounds=-1)
