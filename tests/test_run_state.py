"""The orchestrator's run state (issue 12): one typed object on the task (``TaskInfo.run``) that
plugins never write, tool runs whose control state is apart from their trace record, a trace
rendered from it, and data (pages, a deep search round's status) handed on as data."""

from __future__ import annotations

from typing import Any

from orchestration_kit import AskingTool, Coordinator, EchoTool, Query, domain, subtask
from toolwire import (
    ChatbotTool,
    ExecutionText,
    OrchestratorActivatedTool,
    PageRef,
    PromptAndContext,
    TaskInfo,
    TaskStatus,
    ToolExecutionResult,
)
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.orchestrator import TaskTrace
from toolwire.run_state import (
    AgentStatus,
    DeepSearchItem,
    DeepSearchProgress,
    GatekeeperRecord,
    TaskRun,
    ToolRunState,
)
from toolwire.search import AbstractDeepSearchCoordinatorTool, SearchParams
from toolwire.task import SPEC_FIELDS
from toolwire.testing import ScriptedModel, conversation_for, orchestrator_for


def test_task_info_holds_the_spec_fields_and_the_run_state_only() -> None:
    assert set(TaskInfo.model_fields) == {*SPEC_FIELDS, "run"}
    assert "status" not in TaskInfo.model_fields and "results" not in TaskInfo.model_fields


def test_a_misspelt_or_retired_field_is_refused() -> None:
    for field in ({"task_promt": "q"}, {"task_prompt": "q", "status": "done"}):
        try:
            TaskInfo.model_validate(field)
        except ValueError as error:
            assert "Extra inputs are not permitted" in str(error)
        else:
            raise AssertionError(f"{field} was accepted")


async def test_a_coordinator_neither_sees_nor_writes_the_run_state(
    scripted_model: ScriptedModel,
) -> None:
    seen: list[TaskRun] = []

    def forge(task: TaskInfo) -> None:
        seen.append(task.run.model_copy(deep=True))
        task.run.failures.append("forged failure")
        task.run.status = TaskStatus.DONE
        task.run.results.append(
            PromptAndContext(prompt="p", context="forged", tool_name="x", task_no="1")
        )
        made = subtask("1.1", "made", "echo")
        made.run = TaskRun(status=TaskStatus.DONE, failures=["forged too"])
        task.sub_tasks = [made]

    echo = EchoTool("echo", "echoed")
    scripted_model.on_answer()
    orchestrator = orchestrator_for(
        domain(), Coordinator("forger", forge), echo, model=scripted_model
    )
    earlier = PromptAndContext(
        prompt="q", context="from an earlier round", tool_name="old", task_no="1"
    )
    task = TaskInfo(
        task_prompt="q",
        required_tool_names={"echo"},
        run=TaskRun(results=[earlier], failures=["an earlier failure"]),
    )

    await orchestrator.run_round(task)

    assert seen == [TaskRun()]  # a fresh run state: no results, no failures
    assert task.run.failures == ["an earlier failure"]
    assert [result.context for result in task.run.results] == ["from an earlier round", "echoed"]
    made = task.sub_tasks[0]
    assert made.task_prompt == "made" and made.owner_coordinator_name == "demo.forger"
    assert made.run.failures == [] and echo.texts[0].endswith("made")  # it ran: not "done"
    assert [record.outcome for record in task.run.coordinator_runs] == ["decomposed"]


async def test_a_tool_run_keeps_its_control_state_apart_from_its_trace_record(
    scripted_model: ScriptedModel,
) -> None:
    asker = AskingTool("asker")
    scripted_model.on_extract(Query, {"query": "x"}).on_answer("done")
    service = conversation_for(domain(), asker, model=scripted_model)
    root = await service.orchestrator(None).new_task("q")
    root.required_tool_names = {"asker"}

    first = await service.orchestrator(None).run_round(root)

    [run] = root.run.tool_runs
    assert first.kind == "clarification"
    assert (run.state, run.record.outcome, run.params) == (
        ToolRunState.WAITING,
        "clarification",
        {"query": "x"},
    )
    assert root.run.pending_clarification is not None
    assert set(TaskTrace.of(root).tools[0].model_dump()) == {
        "tool_name",
        "reason",
        "outcome",
        "detail",
        "params",
    }  # the trace shows what the tool ran with, but no control state

    root.run.pending_clarification.reply = "that one"
    second = await service.orchestrator(None).run_round(root)

    assert second.kind == "answer"
    assert (run.state, root.run.tool_runs[0].record.outcome) == (ToolRunState.CLOSED, "context")
    assert [(c.question, c.reply) for c in root.run.clarifications] == [("Which one?", "that one")]
    assert root.run.pending_clarification is None


def test_the_trace_is_rendered_from_the_run_state() -> None:
    item = DeepSearchItem(item="dose", number=1, neighbor_task_no="1.1.n", search_task_no="1.1.s")
    status = AgentStatus(
        round=1, max_rounds=3, calls_made=4, call_budget=60, missing=["dose"], searches=[item]
    )
    task = TaskInfo(
        task_prompt="rewritten",
        run=TaskRun(
            user_message="What dose?",
            status=TaskStatus.DONE,
            failures=["tool x raised"],
            deep_search=DeepSearchProgress(
                verdicts=[
                    GatekeeperRecord(sufficient=False, missing=["dose"]),
                    GatekeeperRecord(sufficient=True),
                ],
                rounds=[status],
            ),
        ),
    )

    trace = TaskTrace.of(task)

    assert (trace.user_message, trace.status, trace.failures) == (
        "What dose?",
        TaskStatus.DONE,
        ["tool x raised"],
    )
    assert trace.notes == [
        "gatekeeper: context insufficient, missing ['dose']",
        "deep search round 1: searching for dose",
        "gatekeeper: context sufficient",
    ]


# -- a deep search round: its status as data ----------------------------------------------------


class Paged(OrchestratorActivatedTool[SearchParams]):
    """Returns one page as context, and the page as data."""

    coordinator_only = True

    def __init__(self, name: str, page: PageRef | None) -> None:
        self.name = name
        self.page = page
        self.texts: list[str] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: always false"

    def execute_with_result(self, params: SearchParams, text: str) -> ToolExecutionResult:
        self.texts.append(text)
        if self.page is None:
            return ToolExecutionResult.context("")
        return ToolExecutionResult.context(f"{self.page.label} text", pages=[self.page])


class Deep(AbstractDeepSearchCoordinatorTool):
    def __init__(self, search: ChatbotTool[Any]) -> None:
        super().__init__()
        self.search = search

    def get_search_tool(self) -> ChatbotTool[Any]:
        return self.search


async def test_a_deep_search_round_reaches_its_searches_as_data_and_the_model_as_text(
    scripted_model: ScriptedModel,
) -> None:
    rag = Paged("rag", PageRef(doc_id="guide", page_no=1))
    finder = Paged("finder", PageRef(doc_id="guide", page_no=7))
    deep = Deep(finder)
    scripted_model.on_extract(SearchParams, {"query": "dose"}).on_gatekeeper(
        GatekeeperVerdict(sufficient=False, missing=["the dose"]), times=1
    ).on_gatekeeper(True).on_answer()
    service = conversation_for(
        domain(rag_tool="rag", deep_fallback={"*": "deep"}), rag, finder, deep, model=scripted_model
    )

    answer = await service.ask("How much?")

    [text] = finder.texts
    assert isinstance(text, ExecutionText) and text.task == "the dose"
    assert "agent_status" not in text  # the tool's text carries no status block ...
    assert text.status is not None and text.status.consulted == [PageRef(doc_id="guide", page_no=1)]
    [extraction] = [
        call.inputs
        for call in scripted_model.calls_for(Purpose.PARAMETERS)
        if "the dose" in call.inputs["text"]
    ]
    # ... nor does the text its parameters are extracted from: the model reads the status apart
    assert extraction["text"] == str(text) and extraction["status"] == text.status
    assert "- the dose: found on [page guide#7]" in answer.text  # the summary, from the data
    assert answer.trace.sub_tasks[0].task_prompt == "the dose"
