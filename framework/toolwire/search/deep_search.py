"""``AbstractDeepSearchCoordinatorTool``: the deep fallback of seed 6.10.

When the context gatekeeper finds the primary retrieval insufficient, the orchestrator writes what
is missing onto the task (``TaskInfo.gatekeeper_missing``) and runs the domain's deep fallback tool
(``DomainSpec.deep_fallback`` for the prompt type). This coordinator turns each missing item into
a pair of subtasks, exactly as seed 6.4 shows:

* ``"<n>.<k>.n"``: the cheap neighbour-page search (``required_tool_names``: the neighbour tool);
* ``"<n>.<k>.s"``: the full search, *conditional*: :meth:`decide_conditional_subtask` skips it when
  the paired neighbour search returned context.

Each round's subtask prompts end with a status block (model calls made out of the budget, the
round, what is still missing, the pages already consulted, which the neighbour search reads). The
search is bounded: at most ``max_rounds`` rounds per task and no new round once the question's
model calls reach ``call_budget``. After its subtasks ran, the coordinator runs on the parent task
as a context consumer and reports, per missing item, the pages found or that nothing was found.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

import structlog
from pydantic import BaseModel, ConfigDict, Field

from toolwire.llm.base import current_calls
from toolwire.llm.prompts import status_block
from toolwire.search.pages import page_refs
from toolwire.search.requests import search_request, without_status_block
from toolwire.task import ContextBuffer, SubtaskDecision, TaskInfo
from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    ContextConsumerTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
    coordinator_only_instruction,
)

log = structlog.get_logger(__name__)

ROUND_NOTE_PREFIX = "deep search round "
"""Trace note written on the task for each round; the round count lives on the task itself."""

T = TypeVar("T")

_DEEP_KEY = re.compile(r"^(?P<task_no>.+\.\d+\.[ns]):")


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
        item was already searched on this task, or when the round or call budget is spent.
        """
        searched = {_item_key(item) for item in _searched_items(task)}
        wanted = [
            item
            for item in _distinct(task.gatekeeper_missing, key=_item_key)
            if _item_key(item) not in searched
        ]
        if not wanted:
            return task
        rounds_done = sum(note.startswith(ROUND_NOTE_PREFIX) for note in task.notes)
        calls_made = len(current_calls())
        if rounds_done >= self.settings.max_rounds or calls_made >= self.settings.call_budget:
            task.notes.append(
                f"deep search stopped: {rounds_done} of {self.settings.max_rounds} rounds, "
                f"{calls_made} of {self.settings.call_budget} model calls; still missing: "
                + "; ".join(wanted)
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
        round_no = rounds_done + 1
        consulted = [
            ref for sub in task.walk() for pac in sub.results for ref in page_refs(pac.context)
        ]
        notes = [f"Deep search round {round_no} of {self.settings.max_rounds}."]
        if consulted:
            notes.append(
                "Pages consulted: " + ", ".join(f"[page {d}#{n}]" for d, n in _distinct(consulted))
            )
        block = status_block(
            calls_made=calls_made, call_budget=self.settings.call_budget, missing=items, notes=notes
        )
        first = _next_item_number(task)
        new: list[TaskInfo] = []
        for number, item in enumerate(items, start=first):
            new += self._subtasks_for(task, f"{task.task_no}.{number}", f"{item}\n\n{block}")
        task.sub_tasks = [*task.sub_tasks, *new]
        task.notes.append(f"{ROUND_NOTE_PREFIX}{round_no}: searching for " + "; ".join(items))
        log.info(
            "deep_search_round",
            task_no=task.task_no,
            round=round_no,
            items=items,
            subtasks=[sub.task_no for sub in new],
        )
        return task

    def _subtasks_for(self, task: TaskInfo, base_no: str, prompt: str) -> list[TaskInfo]:
        search = self.get_search_tool()
        neighbor = self.get_neighbor_search_tool()
        common: dict[str, Any] = {
            "task_prompt": prompt,
            "important_words": list(task.important_words),
            "prompt_type": task.prompt_type,
        }
        full = TaskInfo(
            task_no=f"{base_no}.s", required_tool_names={search.qualified_name}, **common
        )
        if neighbor is None:
            return [full]
        cheap = TaskInfo(
            task_no=f"{base_no}.n", required_tool_names={neighbor.qualified_name}, **common
        )
        full.conditional = True  # runs only when the cheap search found nothing
        return [cheap, full]

    def decide_conditional_subtask(
        self, parent: TaskInfo, next_subtask: TaskInfo, completed_so_far: ContextBuffer
    ) -> SubtaskDecision:
        """Skip the full search when its paired neighbour search returned context (seed 6.4)."""
        paired_prefix = next_subtask.task_no.replace(".s", ".n") + ":"
        answered = any(
            key.startswith(paired_prefix) and any(pac.context for pac in results)
            for key, results in completed_so_far.items()
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
        items: dict[str, tuple[str, list[tuple[str, int]]]] = {}
        for key, results in prior_context.items():
            match = _DEEP_KEY.match(key)
            if match is None:
                continue
            item_no = match["task_no"].rsplit(".", 1)[0]
            for result in results:
                request, found = items.setdefault(item_no, (search_request(result.prompt), []))
                found += [ref for ref in page_refs(result.context) if ref not in found]
        if not items:
            return ToolExecutionResult.context("")
        lines = ["Deep search results:"]
        for request, found in items.values():
            where = ", ".join(f"[page {doc}#{no}]" for doc, no in found)
            lines.append(f"- {request}: " + (f"found on {where}" if found else "nothing found"))
        log.info(
            "deep_search_collected",
            items=len(items),
            answered=sum(bool(found) for _, found in items.values()),
        )
        return ToolExecutionResult.context("\n".join(lines))


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


def _searched_items(task: TaskInfo) -> set[str]:
    return {
        without_status_block(sub.task_prompt)
        for sub in task.sub_tasks
        if re.fullmatch(rf"{re.escape(task.task_no)}\.\d+\.[ns]", sub.task_no)
    }


def _next_item_number(task: TaskInfo) -> int:
    """Item numbers continue across rounds (and after any subtask a coordinator already made)."""
    numbers = [0]
    prefix = f"{task.task_no}."
    for sub in task.sub_tasks:
        if sub.task_no.startswith(prefix):
            head = sub.task_no[len(prefix) :].split(".", 1)[0]
            if head.isdigit():
                numbers.append(int(head))
    return max(numbers) + 1
