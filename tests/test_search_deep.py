"""The deep search coordinator: subtasks per missing item, the conditional full search, bounds."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import AGENT_COORDINATOR_MARKER, PromptAndContext, SubtaskDecision, TaskInfo
from toolwire.llm import CallRecord, collect_calls, record_call
from toolwire.search import (
    AbstractDeepSearchCoordinatorTool,
    DeepSearchParams,
    DeepSearchSettings,
    Page,
    SearchParams,
    page_refs,
    search_request,
    without_status_block,
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


def _pac(task_no: str, tool: str, context: str) -> PromptAndContext:
    return PromptAndContext(prompt="p", context=context, tool_name=tool, task_no=task_no)


def _page(doc: str, n: int, text: str = "text") -> str:
    return Page(doc_id=doc, page_no=n, title=doc, text=text).render()


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
    task = TaskInfo(task_prompt="q", prompt_type="how_to", important_words=["json"])
    task.results = [_pac("1", "rag", _page("json", 2))]
    task.gatekeeper_missing = ["default of sort_keys", "indent values", "default of sort_keys"]
    Deep().decompose_into_subtasks(task)
    assert [(s.task_no, s.required_tool_names, s.conditional) for s in task.sub_tasks] == [
        ("1.1.n", {"docs.neighbors"}, False),
        ("1.1.s", {"docs.search"}, True),
        ("1.2.n", {"docs.neighbors"}, False),
        ("1.2.s", {"docs.search"}, True),
    ]
    first = task.sub_tasks[0]
    assert first.prompt_type == "how_to" and first.important_words == ["json"]
    assert search_request(first.task_prompt) == "default of sort_keys"
    # the status block ends the prompt: budget, round, missing items, pages consulted
    block = first.task_prompt.partition("\n\n")[2]
    assert block.startswith("<status>") and block.endswith("</status>")
    assert "Model calls made: 0 of 60." in block and "Deep search round 1 of 3." in block
    assert "- indent values" in block and page_refs(block) == [("json", 2)]
    assert task.notes[-1].startswith("deep search round 1")


def test_without_a_neighbor_tool_only_an_unconditional_full_search() -> None:
    task = TaskInfo(task_prompt="q", gatekeeper_missing=["x"])
    Deep(neighbors=False).decompose_into_subtasks(task)
    assert [(s.task_no, s.conditional) for s in task.sub_tasks] == [("1.1.s", False)]


def test_a_later_round_continues_numbering_and_never_repeats_an_item() -> None:
    task = TaskInfo(task_no="1", task_prompt="q", gatekeeper_missing=["a"])
    deep = Deep()
    deep.decompose_into_subtasks(task)
    task.gatekeeper_missing = ["a", "b"]
    deep.decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s", "1.2.n", "1.2.s"]
    assert without_status_block(task.sub_tasks[2].task_prompt) == "b"
    assert "Deep search round 2 of 3." in task.sub_tasks[2].task_prompt
    before = len(task.sub_tasks)
    deep.decompose_into_subtasks(task)  # nothing new is missing
    assert len(task.sub_tasks) == before


def test_an_item_differing_only_in_case_or_spacing_is_searched_once() -> None:
    task = TaskInfo(task_prompt="q", gatekeeper_missing=["Default of  sort_keys", "indent"])
    deep = Deep()
    deep.decompose_into_subtasks(task)
    task.gatekeeper_missing = ["default of sort_keys ", "INDENT", "default  OF sort_keys"]
    deep.decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s", "1.2.n", "1.2.s"]


def test_the_status_block_is_last_and_changes_every_round() -> None:
    task = TaskInfo(task_prompt="q", gatekeeper_missing=["a"])
    deep = Deep()
    with collect_calls():
        deep.decompose_into_subtasks(task)
        record_call(CallRecord(purpose="relevance", model="m"))
        task.gatekeeper_missing = ["b"]
        deep.decompose_into_subtasks(task)
    first, second = task.sub_tasks[0].task_prompt, task.sub_tasks[2].task_prompt
    for prompt, item in ((first, "a"), (second, "b")):
        assert prompt.startswith(f"{item}\n\n<status>") and prompt.endswith("</status>")
        assert search_request(prompt) == item
    assert "Model calls made: 0 of 60." in first and "Model calls made: 1 of 60." in second


def test_rounds_are_bounded() -> None:
    task = TaskInfo(task_prompt="q")
    deep = Deep(DeepSearchSettings(max_rounds=2))
    for item in ["a", "b", "c"]:
        task.gatekeeper_missing = [item]
        deep.decompose_into_subtasks(task)
    assert [without_status_block(s.task_prompt) for s in task.sub_tasks[::2]] == ["a", "b"]
    assert task.notes[-1].startswith("deep search stopped: 2 of 2 rounds")


def test_the_call_budget_stops_new_rounds() -> None:
    task = TaskInfo(task_prompt="q", gatekeeper_missing=["a"])
    with collect_calls():
        for _ in range(3):
            record_call(CallRecord(purpose="relevance", model="m"))
        Deep(DeepSearchSettings(call_budget=3)).decompose_into_subtasks(task)
    assert task.sub_tasks == [] and "3 of 3 model calls" in task.notes[-1]


def test_items_per_round_are_capped() -> None:
    task = TaskInfo(task_prompt="q", gatekeeper_missing=["a", "b", "c"])
    Deep(DeepSearchSettings(max_items_per_round=1)).decompose_into_subtasks(task)
    assert [s.task_no for s in task.sub_tasks] == ["1.1.n", "1.1.s"]


NB = "docs.neighbors"


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
    parent = TaskInfo(task_prompt="q")
    full = TaskInfo(task_no="1.1.s", task_prompt="x", conditional=True)
    assert Deep().decide_conditional_subtask(parent, full, completed) is decision


def test_collecting_reports_each_item_once_and_ignores_other_tools() -> None:
    def pac(task_no: str, tool: str, item: str, context: str) -> PromptAndContext:
        prompt = f"question{AGENT_COORDINATOR_MARKER}{item}\n\n<status>\n</status>"
        return PromptAndContext(prompt=prompt, context=context, tool_name=tool, task_no=task_no)

    buffer = {
        "1:docs.rag": [_pac("1", "docs.rag", _page("rag", 1))],
        f"1.1.n:{NB}": [pac("1.1.n", NB, "sort keys", _page("a", 2))],
        "1.2.n:docs.neighbors": [pac("1.2.n", NB, "indent", "")],
        "1.2.s:docs.search": [pac("1.2.s", "docs.search", "indent", _page("a", 2) + _page("b", 1))],
        "1.3.n:docs.neighbors": [pac("1.3.n", NB, "encoding", "")],
    }
    result = Deep().execute_with_prior_context(DeepSearchParams(), "q", buffer)
    assert result.text.splitlines() == [
        "Deep search results:",
        "- sort keys: found on [page a#2]",
        "- indent: found on [page a#2], [page b#1]",
        "- encoding: nothing found",
    ]
    assert Deep().execute_with_prior_context(DeepSearchParams(), "q", {}).text == ""


def test_search_request_strips_marker_prefix_and_status_block() -> None:
    text = f"user question{AGENT_COORDINATOR_MARKER}item\n\n<status>\nx\n</status>"
    assert search_request(text) == "item"
    assert search_request("plain question") == "plain question"
