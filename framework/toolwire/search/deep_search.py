"""``AbstractDeepSearchCoordinatorTool``: the deep fallback of seed 6.10.

When the context gatekeeper finds the primary retrieval insufficient, the orchestrator writes what
is missing into the task's deep search progress (``TaskInfo.run.deep_search``: ``missing``, and
the pages ``consulted`` so far) and runs the domain's deep fallback tool
(``DomainSpec.deep_fallback`` for the prompt type). This coordinator turns each missing item into
a pair of subtasks, exactly as seed 6.4 shows:

* ``"<n>.<k>.n"``: the cheap neighbour-page search (``required_tool_names``: the neighbour tool);
* ``"<n>.<k>.s"``: the full search, *conditional*: :meth:`decide_conditional_subtask` skips it when
  the paired neighbour search returned context.

Each round is recorded in the progress as an :class:`~toolwire.run_state.AgentStatus`: model calls
made out of the budget, the round, what it searches for, the pages already consulted, and every
search so far with its subtasks. Its searches run with it (``ExecutionText.status``): the model
reads it as the status block after their text, the neighbour search takes its consulted pages.
The search is bounded: at most ``max_rounds`` rounds per task and no new round once the
question's model calls reach ``call_budget``. After its subtasks ran, the coordinator runs on the
parent task as a context consumer and reports, per missing item, the pages found or that nothing
was found.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

import structlog
from pydantic import BaseModel, ConfigDict, Field

from toolwire.context_buffer import ContextBuffer, PromptAndContext
from toolwire.llm.base import current_calls
from toolwire.run_state import (
    AgentStatus,
    DeepSearchItem,
    DeepSearchProgress,
    DeepSearchStop,
    SubtaskDecision,
)
from toolwire.task import ExecutionText, TaskInfo
from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    ContextConsumerTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
    coordinator_only_instruction,
)

log = structlog.get_logger(__name__)

T = TypeVar("T")


class DeepSearchParams(BaseModel):
    """The coordinator takes no parameters: it works from the task and the context buffer."""


class DeepSearchSettings(BaseModel):
    """YAML ``settings`` of a deep search coordinator."""

    model_config = ConfigDict(extra="forbid")

    max_rounds: int = Field(default=3, ge=1)
    """Rounds per task; keep it at or below ``orchestrator.deep_search_max_rounds``."""
    max_items_per_round: int = Field(default=3, ge=1)
    """Missing items searched per round (each costs a neighbour and maybe a full search)."""
    call_budget: int = Field(default=60, ge=1)
    """No new round starts once the question has made this many model calls."""


class AbstractDeepSearchCoordinatorTool(
    OrchestratorActivatedTool[DeepSearchParams],
    AgentCoordinator,
    ContextConsumerTool[DeepSearchParams],
    ABC,
):
    """Deep fallback coordinator: subclasses name the domain's search tools (seed 6.10)."""

    params_model = DeepSearchParams
    settings_model = DeepSearchSettings

    def __init__(self, settings: DeepSearchSettings | None = None) -> None:
        self.settings = settings or DeepSearchSettings()

    @abstractmethod
    def get_search_tool(self) -> ChatbotTool[Any]:
        """The domain's full search (an ``AbstractContextSearchTool``); required."""

    def get_neighbor_search_tool(self) -> ChatbotTool[Any] | None:
        """The cheap neighbour search (an ``AbstractNeighborPageSearchTool``); optional."""
        return None

    coordinator_only = True

    def executable_instruction(self) -> str:
        return coordinator_only_instruction(self.name)

    # -- decomposition ---------------------------------------------------------------------

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        """Add one round of search subtasks for what the gatekeeper found missing.

        Unchanged when nothing is missing (the normal, non-fallback path), when every missing
        item was already searched on this task, or when the round or call budget is spent (the
        progress then says why: ``stopped``).
        """
        progress = task.run.deep_search
        searched = {_item_key(search.item) for search in _searches(progress)}
        wanted = [
            item
            for item in _distinct(progress.missing, key=_item_key)
            if _item_key(item) not in searched
        ]
        if not wanted:
            return task
        rounds_done = len(progress.rounds)
        calls_made = len(current_calls())
        budget = self.settings.call_budget
        if rounds_done >= self.settings.max_rounds or calls_made >= budget:
            progress.stopped = DeepSearchStop(
                rounds=rounds_done,
                max_rounds=self.settings.max_rounds,
                calls_made=calls_made,
                call_budget=budget,
                missing=wanted,
            )
            log.info(
                "deep_search_bounded",
                task_no=task.task_no,
                rounds=rounds_done,
                calls=calls_made,
                missing=wanted,
            )
            return task
        items = wanted[: self.settings.max_items_per_round]
        neighbor = self.get_neighbor_search_tool()
        first = _next_item_number(task, progress)
        searches = [
            DeepSearchItem(
                item=item,
                number=number,
                neighbor_task_no=f"{task.task_no}.{number}.n" if neighbor is not None else None,
                search_task_no=f"{task.task_no}.{number}.s",
            )
            for number, item in enumerate(items, start=first)
        ]
        progress.rounds.append(
            AgentStatus(
                round=rounds_done + 1,
                max_rounds=self.settings.max_rounds,
                calls_made=calls_made,
                call_budget=budget,
                missing=items,
                consulted=list(progress.consulted),
                searches=[*_searches(progress), *searches],
            )
        )
        new = [sub for search in searches for sub in self._subtasks_for(task, search, neighbor)]
        task.sub_tasks = [*task.sub_tasks, *new]
        log.info(
            "deep_search_round",
            task_no=task.task_no,
            round=rounds_done + 1,
            items=items,
            subtasks=[sub.task_no for sub in new],
        )
        return task

    def _subtasks_for(
        self, task: TaskInfo, search: DeepSearchItem, neighbor: ChatbotTool[Any] | None
    ) -> list[TaskInfo]:
        common: dict[str, Any] = {
            "task_prompt": search.item,
            "important_words": list(task.important_words),
            "prompt_type": task.prompt_type,
        }
        full = TaskInfo(
            task_no=search.search_task_no,
            required_tool_names={self.get_search_tool().qualified_name},
            **common,
        )
        if neighbor is None or search.neighbor_task_no is None:
            return [full]
        cheap = TaskInfo(
            task_no=search.neighbor_task_no, required_tool_names={neighbor.qualified_name}, **common
        )
        full.conditional = True  # runs only when the cheap search found nothing
        return [cheap, full]

    def decide_conditional_subtask(
        self, parent: TaskInfo, next_subtask: TaskInfo, completed_so_far: ContextBuffer
    ) -> SubtaskDecision:
        """Skip the full search when its paired neighbour search returned context (seed 6.4)."""
        paired = next(
            (
                search.neighbor_task_no
                for search in _searches(parent.run.deep_search)
                if search.search_task_no == next_subtask.task_no
            ),
            None,
        )
        answered = paired is not None and any(
            result.context
            for results in completed_so_far.values()
            for result in results
            if result.task_no == paired
        )
        return SubtaskDecision.SKIP if answered else SubtaskDecision.RUN

    # -- collecting ------------------------------------------------------------------------

    def execute_with_prior_context(
        self, params: DeepSearchParams, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        """A summary of what each missing item's searches found: the pages, or nothing.

        The pages themselves are already in the buffer under the subtasks' own task numbers
        (SPEC §3 step 4) and reach the answer from there; repeating them here would double the
        context. The summary tells the answer which items stayed unanswered.
        """
        status = text.status if isinstance(text, ExecutionText) else None
        by_task: dict[str, list[PromptAndContext]] = {}
        for results in prior_context.values():
            for result in results:
                by_task.setdefault(result.task_no, []).append(result)
        lines = ["Deep search results:"]
        answered = 0
        for search in status.searches if status is not None else []:
            numbers = (search.neighbor_task_no, search.search_task_no)
            results = [result for number in numbers if number for result in by_task.get(number, [])]
            if not results:
                continue
            found = list(dict.fromkeys(page for result in results for page in result.pages))
            where = ", ".join(page.label for page in found)
            lines.append(f"- {search.item}: " + (f"found on {where}" if found else "nothing found"))
            answered += bool(found)
        if len(lines) == 1:
            return ToolExecutionResult.context("")
        log.info("deep_search_collected", items=len(lines) - 1, answered=answered)
        return ToolExecutionResult.context("\n".join(lines))


def _searches(progress: DeepSearchProgress) -> list[DeepSearchItem]:
    """Every item searched for so far (the latest round lists them all)."""
    return list(progress.rounds[-1].searches) if progress.rounds else []


def _distinct(items: list[T], key: Callable[[T], Hashable] = lambda item: item) -> list[T]:
    """``items`` without repeats (by ``key``) and without empty strings, first occurrence kept."""
    seen: dict[Hashable, T] = {}
    for item in items:
        if isinstance(item, str):
            item = cast(T, item.strip())
        if item:
            seen.setdefault(key(item), item)
    return list(seen.values())


def _item_key(item: str) -> str:
    """Missing items differing only in case or spacing are one item: searched once."""
    return " ".join(item.split()).casefold()


def _next_item_number(task: TaskInfo, progress: DeepSearchProgress) -> int:
    """Item numbers continue across rounds, and after the subtasks other coordinators made
    (numbered ``"<n>.1"``, ``"<n>.2"`` … by the orchestrator)."""
    searches = _searches(progress)
    ours = {
        number
        for search in searches
        for number in (search.neighbor_task_no, search.search_task_no)
        if number is not None
    }
    others = sum(sub.task_no not in ours for sub in task.sub_tasks)
    return max([others, *(search.number for search in searches)]) + 1
