"""A tool that asks more than once (issue 11 item 10): every question and reply of the task's
clarification rounds reaches parameter extraction and the tool, across rounds stored in SQLite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from orchestration_kit import AskingTool, Coordinator, EchoTool, NoParams, Query
from toolwire import (
    ClarifiableContextConsumerTool,
    Clarification,
    ContextBuffer,
    ModelError,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolExecutionResult,
)
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore, SQLiteSessionStore
from toolwire.testing import ScriptedModel, conversation_for


class Booking(BaseModel):
    city: str | None = None
    date: str | None = None


def extract_booking(text: str, _instruction: str = "") -> Booking:
    """The deterministic "model": every ``city=`` and ``date=`` in the text, the last winning."""
    return Booking.model_validate(dict(re.findall(r"\b(city|date)=(\w+)", text)))


def next_step(params: Booking) -> ToolExecutionResult:
    if params.city is None:
        return ToolExecutionResult.clarifying_question("Which city?")
    if params.date is None:
        return ToolExecutionResult.clarifying_question("Which date?")
    return ToolExecutionResult.context(f"Table in {params.city} on {params.date}.")


class TwoQuestions(OrchestratorActivatedTool[Booking]):
    """Asks for the city, then for the date."""

    name = "booker"

    def __init__(self) -> None:
        self.clarifications: list[Clarification] = []

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_result(self, params: Booking, text: str) -> ToolExecutionResult:
        return next_step(params)

    def execute_with_clarification(
        self, params: Booking, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        self.clarifications.append(clarification)
        return next_step(params)


class TwoQuestionsWithContext(
    ClarifiableContextConsumerTool[Booking], OrchestratorActivatedTool[Booking]
):
    """The same, as a clarifiable context consumer (SPEC §2)."""

    name = "booker"

    def __init__(self) -> None:
        self.clarifications: list[Clarification] = []

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_prior_context(
        self, params: Booking, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        return next_step(params)

    def execute_with_clarification_and_prior_context(
        self,
        params: Booking,
        text: str,
        clarification: Clarification,
        prior_context: ContextBuffer,
    ) -> ToolExecutionResult:
        self.clarifications.append(clarification)
        return next_step(params)


@pytest.mark.parametrize("tool_class", [TwoQuestions, TwoQuestionsWithContext])
async def test_a_tool_asking_twice_keeps_the_first_reply(
    tmp_path: Path, tool_class: type[TwoQuestions | TwoQuestionsWithContext]
) -> None:
    tool = tool_class()
    model = (
        ScriptedModel().on_suitability(["booker"]).on_extract(Booking, extract_booking).on_answer()
    )
    store = SQLiteSessionStore(tmp_path / "sessions.sqlite3")
    service = conversation_for(DomainSpec(name="trip"), tool, model=model, store=store)

    first = await service.ask("book a table for two")
    second = await service.ask("city=Rome", session_id=first.session_id)
    third = await service.ask("date=Friday", session_id=second.session_id)
    await store.aclose()

    assert (first.text, second.text) == ("Which city?", "Which date?")
    assert third.kind == "answer" and third.text == "Table in Rome on Friday."
    last_extraction = model.calls_for(Purpose.PARAMETERS)[-1].inputs["text"]
    assert last_extraction == (
        "book a table for two"
        "\n\nClarifying question: Which city?\nUser's reply: city=Rome"
        "\n\nClarifying question: Which date?\nUser's reply: date=Friday"
    )
    first_round, second_round = tool.clarifications
    assert (second_round.question, second_round.reply) == ("Which date?", "date=Friday")
    assert [(each.question, each.reply) for each in second_round.earlier] == [
        ("Which city?", "city=Rome")
    ]
    assert first_round.earlier == []
    [run] = third.trace.tools
    assert run.detail.startswith(
        "asked 'Which city?', reply 'city=Rome'; asked 'Which date?', reply 'date=Friday'; "
    )


class AsksForTheDate(OrchestratorActivatedTool[NoParams]):
    """Asks once, then answers with the reply."""

    name = "dates"

    def executable_instruction(self) -> str:
        return "dates: always false"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.clarifying_question("Which date?")

    def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"on {clarification.reply}")


def search_the_dates(task: TaskInfo) -> None:
    """The deep fallback: a round adds a subtask that asks (in the chain it adds nothing)."""
    if task.run.deep_search.missing:
        task.sub_tasks.append(TaskInfo(task_prompt="find the date", required_tool_names={"dates"}))


async def test_a_resumed_tool_failing_extraction_leaves_at_most_one_question_waiting() -> None:
    """Before, the task whose tool asked stayed waiting when that tool's extraction failed on
    the reply: a deep fallback subtask that then asked left two questions waiting, and the next
    reply was refused as an inconsistent conversation (SessionError), losing it."""
    model = ScriptedModel().on_suitability(["asks"]).on_answer()
    model.on_extract(Query, {"query": "x"}, times=1)
    model.on_extract(Query, ModelError("parameters", "timeout"))  # once the user replied
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["the date"]), times=1)
    model.on_gatekeeper(True)
    store = MemorySessionStore()
    service = conversation_for(
        DomainSpec(name="trip", rag_tool="rag", deep_fallback={"*": "deep"}),
        EchoTool("rag", "partial", priority=1),
        AskingTool("asks"),
        AsksForTheDate(),
        Coordinator("deep", search_the_dates),
        model=model,
        store=store,
    )

    first = await service.ask("q")
    second = await service.ask("that one", session_id=first.session_id)
    stored = (await store.load(second.session_id)).task
    assert stored is not None
    waiting = [task.task_no for task in stored.walk() if task.run.pending_clarification]
    third = await service.ask("Monday", session_id=second.session_id)

    assert [first.text, second.text] == ["Which one?", "Which date?"]
    assert waiting == ["1.1"]
    assert second.failures[0].startswith("task 1: parameters could not be extracted")
    assert third.kind == "answer" and "on Monday" in third.text
    assert [third.trace.status, third.trace.sub_tasks[0].status] == ["done", "done"]
