"""The deep search coordinator: subtasks per missing item, the conditional full search, bounds."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import (
    AGENT_COORDINATOR_MARKER,
    ExecutionText,
    PromptAndContext,
    SubtaskDecision,
    TaskInfo,
)
from toolwire.llm import CallRecord, collect_calls, record_call
from toolwire.llm.status_bar import agent_status_block
from toolwire.orchestrator import TaskTrace
from toolwire.run_state import DeepSearchProgress, DeepSearchStop, TaskRun
from toolwire.search import (
    AbstractDeepSearchCoordinatorTool,
    DeepSearchParams,
    DeepSearchSettings,
    PageRef,
    SearchParams,
    search_request,
)
from toolwire.tools import (
    ChatbotTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
    validate_tool_class,
)


class _Search(OrchestratorActivatedTool[SearchParams]):
    name = "search"

    def executable_instruction(self) -> str:
        return "never"

    def execute_with_result(self, params: SearchParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("")


class _Neighbors(_Search):
    name = "neighbors"


class Deep(AbstractDeepSearchCoordinatorTool):
    def __init__(self, settings: DeepSearchSettings | None = None, *, neighbors: bool = True):
        super().__init__(settings)
        self.search = _Search()
        self.search.domain = "docs"
        self.neighbors = _Neighbors() if neighbors else None
        if self.neighbors is not None:
            self.neighbors.domain = "docs"

    def get_search_tool(self) -> ChatbotTool[Any]:
        return self.search

    def get_neighbor_search_tool(self) -> ChatbotTool[Any] | None:
        return self.neighbors


def _pac(task_no: str, tool: str, context: str, *pages: PageRef) -> PromptAndContext:
    return PromptAndContext(
        prompt="p", context=context, tool_name=tool, task_no=task_no, pages=pages
    )


def _missing(*items: str, consulted: tuple[PageRef, ...] = ()) -> TaskRun:
    """The run state the orchestrator leaves before the fallback step: what the gatekeeper
    found missing and the pages consulted so far."""
    return TaskRun(deep_search=DeepSearchProgress(missing=list(items), consulted=list(consulted)))


def _ask_again(task: TaskInfo, *items: str) -> None:
    task.run.deep_search.missing = list(items)


def _items(task: TaskInfo) -> list[str]:
    return [sub.task_prompt for sub in task.sub_tasks]


def test_the_coordinator_class_is_a_valid_tool_that_never_volunteers() -> None:
    validate_tool_class(Deep)
    assert (
        Deep()
        .executable_instruction()
        .endswith("always false – runs only on coordinator-designated tasks")
    )


def test_nothing_missing_leaves_the_task_unchanged() -> None:
    task = TaskInfo(task_prompt="What is a list?")
    before = task.model_dump()
    assert Deep().decompose_into_subtasks(task) is task
    assert task.model_dump() == before


def test_each_missing_item_becomes_a_neighbor_then_a_conditional_full_search() -> None:
    json_2 = PageRef(doc_id="json", page_no=2)
    task = TaskInfo(
        task_prompt="q",
        prompt_type="how_to",
        important_words=["json"],
        run=_missing(
            "default of sort_keys", "indent values", "default of sort_keys", consulted=(json_2,)
        ),
    )
    Deep().decompose_into_subtasks(task)
    assert [(s.task_no, s.required_tool_names, s.conditional) for s in task.sub_tasks] == [
        ("1.1.n", {"docs.neighbors"}, False),
        ("1.1.s", {"docs.search"}, True),
        ("1.2.n", {"docs.neighbors"}, False),
        ("1.2.s", {"docs.search"}, True),
    ]
    first = task.sub_tasks[0]
    assert first.prompt_type == "how_to" and first.important_words == ["json"]
    assert first.task_prompt == "default of sort_keys"  # the request alone, no status in it
    [deep_round] = task.run.deep_search.rounds
    assert (deep_round.round, deep_round.max_rounds) == (1, 3)
    assert (deep_round.calls_made, deep_round.call_budget) == (0, 60)
    assert deep_round.missing == ["default of sort_keys", "indent values"]
    assert deep_round.consulted == [json_2]
    assert [(s.item, s.neighbor_task_no, s.search_task_no) for s in deep_round.searches] == [
        ("default of sort_keys", "1.1.n", "1.1.s"),
        ("indent values", "1.2.n", "1.2.s"),
    ]
    # what the model reads after the searches' text: budget, round, missing items, pages
    block = agent_status_block(deep_round)
    assert block.startswith("<agent_status>") and block.endswith("</agent_status>")
    assert "Model calls made: 0 of 60." in block and "Deep search round: 1 of 3." in block
    assert "- indent values" in block and "Pages consulted: [page json#2]" in block
    assert TaskTrace.of(task).notes == [
        "deep search round 1: searching for default of sort_keys; indent values"
    ]


def test_without_a_neighbor_tool_only_an_unconditional_full_search() -> None:
    task = TaskInfo(task_prompt="q", run=_missing("x"))
    Deep(neighbors=False).decompose_into_subtasks(task)
    assert [(s.task_no, s.conditional) for s in task.sub_tasks] == [("1.1.s", False)]
    assert task.run.deep_search.rounds[0].searches[0].neighbor_task_no is None


def test_a_later_round_continues_numbering_and_never_repeats_an_item() -> None:
    task = TaskInfo(task_no="1", task_prompt="q", run=_missing("a"))
    deep = Deep()
    deep.decompose_into_subtasks(task)
    _ask_again(task, "a", "b")
    deep.decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s", "1.2.n", "1.2.s"]
    assert _items(task) == ["a", "a", "b", "b"]
    second = task.run.deep_search.rounds[1]
    assert second.round == 2 and second.missing == ["b"]
    assert [search.item for search in second.searches] == ["a", "b"]  # every search so far
    before = len(task.sub_tasks)
    deep.decompose_into_subtasks(task)  # nothing new is missing
    assert len(task.sub_tasks) == before


def test_item_numbers_continue_after_subtasks_other_coordinators_made() -> None:
    task = TaskInfo(
        task_prompt="q",
        sub_tasks=[
            TaskInfo(task_no="1.1", task_prompt="x"),
            TaskInfo(task_no="1.2", task_prompt="y"),
        ],
        run=_missing("a"),
    )
    Deep().decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1", "1.2", "1.3.n", "1.3.s"]


def test_an_item_differing_only_in_case_or_spacing_is_searched_once() -> None:
    task = TaskInfo(task_prompt="q", run=_missing("Default of  sort_keys", "indent"))
    deep = Deep()
    deep.decompose_into_subtasks(task)
    _ask_again(task, "default of sort_keys ", "INDENT", "default  OF sort_keys")
    deep.decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s", "1.2.n", "1.2.s"]


def test_each_round_records_the_calls_made_when_it_started() -> None:
    task = TaskInfo(task_prompt="q", run=_missing("a"))
    deep = Deep()
    with collect_calls():
        deep.decompose_into_subtasks(task)
        record_call(CallRecord(purpose="relevance", model="m"))
        _ask_again(task, "b")
        deep.decompose_into_subtasks(task)
    first, second = task.run.deep_search.rounds
    assert (first.calls_made, second.calls_made) == (0, 1)
    assert "Model calls made: 1 of 60." in agent_status_block(second)


def test_rounds_are_bounded() -> None:
    task = TaskInfo(task_prompt="q")
    deep = Deep(DeepSearchSettings(max_rounds=2))
    for item in ["a", "b", "c"]:
        _ask_again(task, item)
        deep.decompose_into_subtasks(task)
    assert _items(task)[::2] == ["a", "b"]
    assert task.run.deep_search.stopped == DeepSearchStop(
        rounds=2, max_rounds=2, calls_made=0, call_budget=60, missing=["c"]
    )
    assert TaskTrace.of(task).notes[-1] == (
        "deep search stopped: 2 of 2 rounds, 0 of 60 model calls; still missing: c"
    )


def test_the_call_budget_stops_new_rounds() -> None:
    task = TaskInfo(task_prompt="q", run=_missing("a"))
    with collect_calls():
        for _ in range(3):
            record_call(CallRecord(purpose="relevance", model="m"))
        Deep(DeepSearchSettings(call_budget=3)).decompose_into_subtasks(task)
    stopped = task.run.deep_search.stopped
    assert task.sub_tasks == [] and stopped is not None
    assert (stopped.calls_made, stopped.call_budget) == (3, 3)


def test_items_per_round_are_capped() -> None:
    task = TaskInfo(task_prompt="q", run=_missing("a", "b", "c"))
    Deep(DeepSearchSettings(max_items_per_round=1)).decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s"]


NB = "docs.neighbors"


def _searched(*items: str) -> TaskInfo:
    """A parent whose deep search made one round for ``items``."""
    parent = TaskInfo(task_prompt="q", run=_missing(*items))
    Deep().decompose_into_subtasks(parent)
    return parent


@pytest.mark.parametrize(
    ("completed", "decision"),
    [
        ({f"1.1.n:{NB}": [_pac("1.1.n", NB, "found")]}, SubtaskDecision.SKIP),
        ({f"1.1.n:{NB}": [_pac("1.1.n", NB, "")]}, SubtaskDecision.RUN),
        ({f"1.2.n:{NB}": [_pac("1.2.n", NB, "found")]}, SubtaskDecision.RUN),
        ({}, SubtaskDecision.RUN),
    ],
)
def test_full_search_is_skipped_exactly_when_its_neighbor_search_answered(
    completed: dict[str, list[PromptAndContext]], decision: SubtaskDecision
) -> None:
    parent = _searched("a", "b")
    full = parent.sub_tasks[1]
    assert full.task_no == "1.1.s"
    assert Deep().decide_conditional_subtask(parent, full, completed) is decision


def test_a_subtask_the_deep_search_did_not_make_is_run() -> None:
    parent = _searched("a")
    stranger = TaskInfo(task_no="1.9.s", task_prompt="x", conditional=True)
    found = {f"1.9.n:{NB}": [_pac("1.9.n", NB, "found")]}
    assert Deep().decide_conditional_subtask(parent, stranger, found) is SubtaskDecision.RUN


def test_collecting_reports_each_item_once_and_ignores_other_results() -> None:
    parent = _searched("sort keys", "indent", "encoding", "unasked")
    a_2, b_1 = PageRef(doc_id="a", page_no=2), PageRef(doc_id="b", page_no=1)
    buffer = {
        "1:docs.rag": [_pac("1", "docs.rag", "rag page", PageRef(doc_id="rag", page_no=1))],
        f"1.1.n:{NB}": [_pac("1.1.n", NB, "page a2", a_2)],
        "1.2.n:docs.neighbors": [_pac("1.2.n", NB, "")],
        "1.2.s:docs.search": [_pac("1.2.s", "docs.search", "pages a2 b1", a_2, b_1)],
        "1.3.n:docs.neighbors": [_pac("1.3.n", NB, "")],
    }
    text = ExecutionText("q", status=parent.run.agent_status())
    result = Deep().execute_with_prior_context(DeepSearchParams(), text, buffer)
    assert result.text.splitlines() == [
        "Deep search results:",
        "- sort keys: found on [page a#2]",
        "- indent: found on [page a#2], [page b#1]",
        "- encoding: nothing found",
    ]
    assert Deep().execute_with_prior_context(DeepSearchParams(), text, {}).text == ""
    assert Deep().execute_with_prior_context(DeepSearchParams(), "q", buffer).text == ""


def test_search_request_is_the_coordinators_task() -> None:
    text = ExecutionText("item", "user question", status=_searched("item").run.agent_status())
    assert search_request(text) == "item"
    assert search_request(f"user question{AGENT_COORDINATOR_MARKER}item") == "item"
    assert search_request("plain question") == "plain question"
