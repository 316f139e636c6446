"""SPEC §3 step 5 (which tools run on a task) and the prompt-type classification of task "1"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from toolwire.errors import PLUGIN_FAILURES, ModelError, ToolNameError, UnknownToolError
from toolwire.llm.attempts import call_model
from toolwire.llm.base import LanguageModel, Purpose
from toolwire.registry import DomainSpec, ToolRegistry
from toolwire.run_state import ToolRun
from toolwire.selection.pipeline import Selection, ToolSelector
from toolwire.selection.selectable import SelectableTool, ToolCatalogue
from toolwire.selection.state import SelectionStep
from toolwire.task import TaskInfo
from toolwire.tools import ChatbotTool, OrchestratorActivatedTool

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
    """Fill ``prompt_type`` and ``important_words`` of a task from what the user asked
    (:meth:`TaskInfo.question`: a coordinator's rewrite of task "1" is not classified); no call
    for 0 or 1 types."""
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
                task.question(),
                instruction=CLASSIFICATION_INSTRUCTION,
                purpose=Purpose.CLASSIFICATION,
            ),
        )
    except ModelError as error:
        task.run.failures.append(f"prompt type classification failed: {error}")
        return
    task.prompt_type = str(getattr(result, "prompt_type", ""))
    task.important_words = list(getattr(result, "important_words", []))


@dataclass(frozen=True)
class DomainTools:
    """A domain's built tools as activation sees them; computed once per orchestrator."""

    domain: str
    registry: ToolRegistry
    tools: Mapping[str, ChatbotTool[Any]]
    order: Mapping[str, int]
    """Registry order of every qualified name (the tie-break after priority)."""
    excluded: frozenset[str]
    suitability_candidates: tuple[Candidate, ...]
    """The tools selection chooses among: activatable, not the RAG tool, not coordinator-only."""
    rag: Candidate | None
    selector: ToolSelector

    @classmethod
    def build(
        cls,
        domain: DomainSpec,
        registry: ToolRegistry,
        tools: Mapping[str, ChatbotTool[Any]],
        steps: Sequence[SelectionStep],
    ) -> DomainTools:
        """Resolve the domain's references (they must have passed the reference check) and
        build its tool selector (the tool index and ``steps``)."""
        order = {reg.qualified_name: index for index, reg in enumerate(registry)}
        excluded = excluded_names(domain, registry)
        unselected = ToolSelector(ToolCatalogue.build([]), ())
        scope = cls(domain.name, registry, tools, order, excluded, (), None, unselected)
        rag = scope.candidate(domain.rag_tool) if domain.rag_tool else None
        rag_name = rag.qualified_name if rag else None
        candidates = tuple(
            c
            for c in scope.activatable()
            if c.qualified_name != rag_name and not c.tool.coordinator_only
        )
        examples = {reg.qualified_name: reg.examples for reg in registry}
        catalogue = ToolCatalogue.build(
            [(c.qualified_name, c.tool, examples[c.qualified_name]) for c in candidates]
        )
        selector = ToolSelector(catalogue, tuple(steps))
        return cls(domain.name, registry, tools, order, excluded, candidates, rag, selector)

    def rag_entry(self) -> list[SelectableTool]:
        """The RAG tool's selection entry (none without a RAG tool, or if its methods raise)."""
        if self.rag is None:
            return []
        examples = self.registry.resolve(self.rag.qualified_name, self.domain).examples
        try:
            return [SelectableTool.of(self.rag.qualified_name, self.rag.tool, examples)]
        except PLUGIN_FAILURES:  # its words are then missing from routing, nothing else
            return []

    def activatable(self) -> list[Candidate]:
        """The domain's orchestrator-activated tools that are built and not excluded."""
        return [
            Candidate(reg.qualified_name, self.tools[reg.qualified_name], index)
            for index, reg in enumerate(self.registry)
            if reg.domain == self.domain
            and reg.qualified_name in self.tools
            and isinstance(self.tools[reg.qualified_name], OrchestratorActivatedTool)
            and reg.qualified_name not in self.excluded
        ]

    def candidate(self, name: str) -> Candidate:
        """A built tool by short or prefixed name (resolved in this domain first)."""
        qualified = self.registry.resolve(name, self.domain).qualified_name
        if qualified not in self.tools:
            raise UnknownToolError(
                f"tool {qualified!r} is disabled or was not built", name=name, candidates=[]
            )
        return Candidate(qualified, self.tools[qualified], self.order[qualified])

    def required(self, name: str) -> Candidate | str:
        """The candidate a required name designates, or why it cannot be activated."""
        try:
            qualified = self.registry.resolve(name, self.domain).qualified_name
        except ToolNameError as error:
            return f"required tool {name!r} cannot be activated: {error}"
        if qualified in self.excluded:
            return f"required tool {name!r} ({qualified}) is excluded in domain {self.domain!r}"
        if qualified not in self.tools:
            return f"required tool {name!r} ({qualified}) is disabled or was not built"
        return Candidate(qualified, self.tools[qualified], self.order[qualified])


async def choose_tools(
    task: TaskInfo,
    *,
    llm: LanguageModel,
    scope: DomainTools,
    attempts: int,
    preselected: Selection | None = None,
) -> list[ToolRun]:
    """The task's activated tools in priority order, as pending tool runs.

    Required names are exclusive (no selection, no RAG); otherwise the tool selection on
    ``task_prompt`` (never ``prompt_context``) decides among the candidates, and the RAG tool runs
    beside them. An unknown, disabled or excluded required name is a failure on the task.
    Parameters the selection found for a tool (its call's) are kept on its run.
    ``preselected``: a selection made already for this task's prompt (routing's), taken instead
    of selecting again.
    """
    chosen: list[tuple[Candidate, Literal["required", "suitability", "rag"]]] = []
    parameters: dict[str, BaseModel] = {}
    if task.required_tool_names:
        for name in sorted(task.required_tool_names):
            candidate = scope.required(name)
            if isinstance(candidate, str):
                task.run.failures.append(candidate)
                refused = ToolRun.activated(name, "required")
                refused.close("error", candidate)
                task.run.tool_runs.append(refused)
            elif all(c.qualified_name != candidate.qualified_name for c, _ in chosen):
                chosen.append((candidate, "required"))
    else:
        selection = await _suitable(task, llm, scope, attempts, preselected)
        if selection is not None:
            by_name = {c.qualified_name: c for c in scope.suitability_candidates}
            chosen.extend((by_name[name], "suitability") for name in selection.record.activated)
            parameters = selection.parameters
        if scope.rag is not None:
            chosen.append((scope.rag, "rag"))
    chosen.sort(key=lambda pair: pair[0].sort_key)
    runs = [ToolRun.activated(candidate.qualified_name, reason) for candidate, reason in chosen]
    for run in runs:
        extracted = parameters.get(run.tool_name)
        if extracted is not None:  # from its confirmation or its call: no extraction of its own
            run.params = extracted.model_dump(mode="json")
    return runs


async def _suitable(
    task: TaskInfo,
    llm: LanguageModel,
    scope: DomainTools,
    attempts: int,
    preselected: Selection | None,
) -> Selection | None:
    """What selection activates; the record of how goes on the task for the trace."""
    if not scope.suitability_candidates:
        return None
    from_task = not task.prompt_context and task.run.agent_status() is None
    selection = None
    if from_task and preselected is not None and preselected.task_prompt == task.task_prompt:
        selection = preselected
    if selection is None:
        selection = await scope.selector.select(
            task.task_prompt, llm, attempts, parameters_from_task=from_task
        )
    record = selection.record
    task.run.selection = record
    for name, error in record.left_out.items():
        task.run.failures.append(f"tool {name} left out of selection: {error}")
    if record.failure:
        task.run.failures.append(record.failure)
    return selection


def excluded_names(domain: DomainSpec, registry: ToolRegistry) -> frozenset[str]:
    """The qualified names of ``domain``'s ``excluded_tools``: never activated, not even when
    required (SPEC §5), and not offered by the domain's MCP server either."""
    return frozenset(
        registry.resolve(name, domain.name).qualified_name for name in domain.excluded_tools
    )
