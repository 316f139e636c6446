"""Parameters no model call needs to find (issue 33): a coordinator's (``TaskInfo.tool_params``)
and a tool's own from its text (``ChatbotTool.params_from_text``), with their failure paths."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, field_validator
from structlog.testing import capture_logs

from orchestration_kit import Coordinator, Query, QueryTool, domain, subtask
from toolwire import OrchestratorActivatedTool, TaskInfo, ToolExecutionResult
from toolwire.llm import Purpose
from toolwire.testing import ScriptedModel, conversation_for


def _lookups(params: dict[str, dict[str, object]]) -> Coordinator:
    """Splits every message into two lookups that require ``finder``, each given ``params``."""

    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = [
            subtask("1.1", "find red", "finder"),
            subtask("1.2", "find blue", "finder"),
        ]
        for sub_task in task.sub_tasks:
            sub_task.tool_params = {name: dict(value) for name, value in params.items()}

    return Coordinator("planner", decompose)


async def test_a_coordinators_parameters_are_not_extracted_again() -> None:
    model = ScriptedModel().on_suitability([]).on_answer()
    for name in ("finder", "demo.finder"):  # the short and the prefixed name
        finder = QueryTool("finder")
        planner = _lookups({name: {"query": "given"}})
        await conversation_for(domain(), planner, finder, model=model).ask("find two colours")
        assert [params for params, _ in finder.calls] == [Query(query="given")] * 2
    assert model.calls_for(Purpose.PARAMETERS) == []


async def test_parameters_that_fail_the_tools_model_are_extracted() -> None:
    model = ScriptedModel().on_suitability([]).on_answer()
    model.on_extract(Query, {"query": "extracted"}, purpose=Purpose.PARAMETERS)
    finder = QueryTool("finder")
    planner = _lookups({"finder": {"query": ["not", "a", "string"]}})
    with capture_logs() as logs:
        await conversation_for(domain(), planner, finder, model=model).ask("find two colours")
    assert [params.query for params, _ in finder.calls] == ["extracted", "extracted"]
    assert len(model.calls_for(Purpose.PARAMETERS)) == 2
    assert [e["tool"] for e in logs if e["event"] == "coordinator_params_invalid"] == [
        "demo.finder", "demo.finder"
    ]  # fmt: skip


class TextReader(QueryTool):
    """Takes its query from the text itself; raises on a text that says "unreadable"."""

    def params_from_text(self, text: str) -> Query | None:
        if "unreadable" in text:
            raise ValueError("cannot read that")
        return Query(query=text.upper())


async def test_a_tool_that_reads_its_parameters_from_the_text_needs_no_call() -> None:
    model = ScriptedModel().on_suitability(["reader"]).on_answer()
    reader = TextReader("reader")
    await conversation_for(domain(), reader, model=model).ask("red shoes")
    assert [params.query for params, _ in reader.calls] == ["RED SHOES"]
    assert model.purposes == [Purpose.SUITABILITY, Purpose.ANSWER]


async def test_a_params_from_text_that_raises_falls_back_to_extraction() -> None:
    model = ScriptedModel().on_suitability(["reader"]).on_answer()
    model.on_extract(Query, {"query": "extracted"}, purpose=Purpose.PARAMETERS)
    reader = TextReader("reader")
    with capture_logs() as logs:
        answer = await conversation_for(domain(), reader, model=model).ask("unreadable")
    assert [params.query for params, _ in reader.calls] == ["extracted"]
    assert answer.failures == []
    [failed] = [e for e in logs if e["event"] == "params_from_text_failed"]
    assert "ValueError: cannot read that" in failed["error"]


FAILING = {"attribute": AttributeError("no such attribute"), "type": TypeError("wrong type")}


class Picky(BaseModel):
    """Its validator raises what pydantic passes through instead of a ValidationError."""

    query: str

    @field_validator("query")
    @classmethod
    def _not_failing(cls, value: str) -> str:
        if value in FAILING:
            raise FAILING[value]
        return value


class PickyTool(OrchestratorActivatedTool[Picky]):
    name = "finder"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def executable_instruction(self) -> str:
        return "finder: is a lookup needed?"

    def execute_with_result(self, params: Picky, text: str) -> ToolExecutionResult:
        self.queries.append(params.query)
        return ToolExecutionResult.context(f"found {params.query}")


@pytest.mark.parametrize("given", sorted(FAILING))
async def test_coordinator_params_whose_validator_raises_are_extracted(given: str) -> None:
    """Before, the validator's AttributeError or TypeError ended the question."""
    model = ScriptedModel().on_suitability([]).on_answer()
    model.on_extract(Picky, {"query": "extracted"}, purpose=Purpose.PARAMETERS)
    finder = PickyTool()
    planner = _lookups({"finder": {"query": given}})
    with capture_logs() as logs:
        answer = await conversation_for(domain(), planner, finder, model=model).ask("two colours")
    assert finder.queries == ["extracted", "extracted"]
    assert answer.failures == []
    invalid = [e["error"] for e in logs if e["event"] == "coordinator_params_invalid"]
    assert invalid == [f"raised {type(FAILING[given]).__name__}: {FAILING[given]}"] * 2
