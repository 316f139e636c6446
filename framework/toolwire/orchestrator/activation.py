"""SPEC §3 step 5 (which tools run on a task) and the prompt-type classification of task "1"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from toolwire.errors import ModelError, ToolNameError
from toolwire.llm.base import LanguageModel, Purpose, SuitabilityQuestion
from toolwire.orchestrator.invoke import call_model
from toolwire.registry import ToolRegistry
from toolwire.task import TaskInfo, ToolRunRecord
from toolwire.tools import ChatbotTool

CLASSIFICATION_INSTRUCTION = (
    "Classify the user's message: choose the one prompt type that fits it best and list the "
    "words of the message that matter most for answering it."
)


@dataclass(frozen=True)
class Candidate:
    """A tool the orchestrator may activate, with its place in registry order."""

    qualified_name: str
    tool: ChatbotTool[Any]
    order: int

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.tool.priority, self.order)


@lru_cache(maxsize=64)
def classification_schema(prompt_types: tuple[str, ...]) -> type[BaseModel]:
    """``{prompt_type: Literal[...], important_words: list[str]}`` for a domain's prompt types."""
    literal: Any = Literal.__getitem__(prompt_types)
    return create_model(
        "PromptClassification",
        prompt_type=(literal, ...),
        important_words=(list[str], Field(default_factory=list)),
    )


async def classify(
    llm: LanguageModel, task: TaskInfo, prompt_types: Sequence[str], attempts: int
) -> None:
    """Fill ``prompt_type`` and ``important_words`` of task "1" (no call for 0 or 1 types)."""
    if len(prompt_types) == 1:
        task.prompt_type = prompt_types[0]
    if len(prompt_types) < 2:
        return
    schema = classification_schema(tuple(prompt_types))
    try:
        result = await call_model(
            Purpose.CLASSIFICATION.value,
            attempts,
            lambda: llm.extract(
                schema,
                task.task_prompt,
                instruction=CLASSIFICATION_INSTRUCTION,
                purpose=Purpose.CLASSIFICATION,
            ),
        )
    except ModelError as error:
        task.failures.append(f"prompt type classification failed: {error}")
        return
    task.prompt_type = str(getattr(result, "prompt_type", ""))
    task.important_words = list(getattr(result, "important_words", []))
    task.notes.append(f"prompt type: {task.prompt_type}")


async def choose_tools(
    task: TaskInfo,
    *,
    llm: LanguageModel,
    registry: ToolRegistry,
    domain: str,
    tools: dict[str, ChatbotTool[Any]],
    order: dict[str, int],
    suitability_candidates: Sequence[Candidate],
    rag: Candidate | None,
    excluded: frozenset[str],
    attempts: int,
) -> list[ToolRunRecord]:
    """The task's activated tools in priority order, as pending run records.

    Required names are exclusive (no suitability call, no RAG); otherwise one suitability call on
    ``task_prompt`` (never ``prompt_context``) decides among the candidates, and the RAG tool runs
    beside them. An unknown, disabled or excluded required name is a failure on the task.
    """
    chosen: list[tuple[Candidate, Literal["required", "suitability", "rag"]]] = []
    if task.required_tool_names:
        for name in sorted(task.required_tool_names):
            candidate = _required(task, name, registry, domain, tools, order, excluded)
            if candidate is not None and all(
                c.qualified_name != candidate.qualified_name for c, _ in chosen
            ):
                chosen.append((candidate, "required"))
    else:
        for candidate in await _suitable(task, llm, suitability_candidates, attempts):
            chosen.append((candidate, "suitability"))
        if rag is not None:
            chosen.append((rag, "rag"))
    chosen.sort(key=lambda pair: pair[0].sort_key)
    return [
        ToolRunRecord(tool_name=candidate.qualified_name, reason=reason, outcome="pending")
        for candidate, reason in chosen
    ]


def _required(
    task: TaskInfo,
    name: str,
    registry: ToolRegistry,
    domain: str,
    tools: dict[str, ChatbotTool[Any]],
    order: dict[str, int],
    excluded: frozenset[str],
) -> Candidate | None:
    try:
        qualified = registry.resolve(name, domain).qualified_name
    except ToolNameError as error:
        problem = f"required tool {name!r} cannot be activated: {error}"
    else:
        if qualified in excluded:
            problem = f"required tool {name!r} ({qualified}) is excluded in domain {domain!r}"
        elif qualified not in tools:
            problem = f"required tool {name!r} ({qualified}) is disabled or was not built"
        else:
            return Candidate(qualified, tools[qualified], order.get(qualified, len(order)))
    task.failures.append(problem)
    task.tool_runs.append(
        ToolRunRecord(tool_name=name, reason="required", outcome="error", detail=problem)
    )
    return None


async def _suitable(
    task: TaskInfo, llm: LanguageModel, candidates: Sequence[Candidate], attempts: int
) -> list[Candidate]:
    if not candidates:
        return []
    questions = [
        SuitabilityQuestion(tool_name=c.qualified_name, question=c.tool.executable_instruction())
        for c in candidates
    ]
    names = {question.tool_name for question in questions}
    try:
        answers = await call_model(
            Purpose.SUITABILITY.value,
            attempts,
            lambda: llm.suitability(task.task_prompt, questions),
            is_valid=lambda result: names <= set(result),
        )
    except ModelError as error:
        task.failures.append(f"suitability test failed, no tool activated by it: {error}")
        return []
    yes = [c for c in candidates if answers.get(c.qualified_name) is True]
    task.notes.append(
        "suitability: " + (", ".join(c.qualified_name for c in yes) if yes else "no tool")
    )
    return yes
