"""The trace shows the parameters each tool ran with (``ToolRunRecord.params``): extracted by
the model, given by a coordinator, extracted again after a clarifying question; None for a tool
whose parameters could not be found. ``bench/eval_conversations.py`` judges a turn by them."""

from __future__ import annotations

from orchestration_kit import AskingTool, Coordinator, Query, QueryTool, domain, subtask
from toolwire import TaskInfo
from toolwire.llm import Purpose
from toolwire.testing import ScriptedModel, conversation_for


async def test_the_trace_shows_the_extracted_parameters() -> None:
    model = ScriptedModel().on_suitability(["finder"]).on_answer()
    model.on_extract(Query, {"query": "red shoes"}, purpose=Purpose.PARAMETERS)
    answer = await conversation_for(domain(), QueryTool("finder"), model=model).ask("red shoes?")
    [run] = answer.trace.tools
    assert (run.tool_name, run.outcome, run.params) == (
        "demo.finder", "context", {"query": "red shoes"}
    )  # fmt: skip
    assert answer.model_dump(mode="json")["trace"]["tools"][0]["params"] == {"query": "red shoes"}


async def test_a_coordinators_parameters_are_in_its_subtasks_trace() -> None:
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = [subtask("1.1", "find red", "finder"), subtask("1.2", "find blue")]
        task.sub_tasks[0].tool_params = {"finder": {"query": "red"}}
        task.sub_tasks[1].required_tool_names = {"finder"}
        task.sub_tasks[1].tool_params = {"demo.finder": {"query": "blue"}}

    model = ScriptedModel().on_suitability([]).on_answer()
    service = conversation_for(
        domain(), Coordinator("planner", decompose), QueryTool("finder"), model=model
    )
    answer = await service.ask("find two colours")
    params = [run.params for sub in answer.trace.sub_tasks for run in sub.tools]
    assert params == [{"query": "red"}, {"query": "blue"}]


async def test_a_clarified_run_shows_the_parameters_of_its_latest_run() -> None:
    model = ScriptedModel().on_suitability(["asker"]).on_answer()
    model.on_extract(Query, {"query": "a dose"}, purpose=Purpose.PARAMETERS, times=1)
    model.on_extract(Query, {"query": "the PM one"}, purpose=Purpose.PARAMETERS)
    service = conversation_for(domain(), AskingTool("asker"), model=model)
    asked = await service.ask("Which dose?")
    assert asked.kind == "clarification"
    [waiting] = asked.trace.tools
    assert (waiting.outcome, waiting.params) == ("clarification", {"query": "a dose"})
    answered = await service.ask("the PM one", session_id=asked.session_id)
    [run] = answered.trace.tools
    assert (run.outcome, run.params) == ("context", {"query": "the PM one"})


async def test_a_tool_whose_parameters_were_not_found_shows_none() -> None:
    model = ScriptedModel().on_suitability(["finder"]).on_answer()
    model.on_extract(Query, None, purpose=Purpose.PARAMETERS)  # no valid output
    answer = await conversation_for(domain(), QueryTool("finder"), model=model).ask("red?")
    [run] = answer.trace.tools
    assert (run.outcome, run.params) == ("error", None)
