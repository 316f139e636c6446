"""A tool that asks more than once (issue 11 item 10): every question and reply of the task's
clarification rounds reaches parameter extraction and the tool, across rounds stored in SQLite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from toolwire import (
    ClarifiableContextConsumerTool,
    Clarification,
    ContextBuffer,
    OrchestratorActivatedTool,
    ToolExecutionResult,
)
from toolwire.llm import Purpose
from toolwire.registry import DomainSpec
from toolwire.sessions import SQLiteSessionStore
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
