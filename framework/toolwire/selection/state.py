"""The state a selection's steps share, and the protocol a step follows.

A selection is a pipeline of named steps (``orchestrator.selection.steps``) over one
:class:`SelectionState`: retrieval puts candidates in it, a choice or a function call selects
some of them, a confirmation keeps those whose own question the model answers yes. Each step
leaves a :class:`~toolwire.selection.trace.StepRecord` saying what it decided, so the trace
explains every step without knowing it. A step is registered by name through the
``register_selection_steps`` hook, built-in steps like a plugin's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from toolwire.errors import ModelError
from toolwire.llm.attempts import call_model
from toolwire.llm.base import LanguageModel, Purpose
from toolwire.selection.selectable import SelectableTool, ToolCatalogue
from toolwire.selection.trace import SelectionRecord, StepRecord
from toolwire.settings import SelectionSettings

T = TypeVar("T")


class StepFailed(Exception):
    """A step's model call failed; the message says what the selection did instead."""


@dataclass
class Candidate:
    """A tool put to the model, with its retrieval score."""

    tool: SelectableTool
    score: float

    @property
    def name(self) -> str:
        return self.tool.qualified_name


@dataclass
class SelectionState:
    """What the steps of one selection read and write."""

    task_prompt: str
    catalogue: ToolCatalogue
    llm: LanguageModel
    attempts: int
    parameters_from_task: bool
    """The tools' parameters are extracted from the task prompt alone (no prompt context, no
    status block), so a step may carry arguments the model wrote while choosing."""
    record: SelectionRecord
    candidates: list[Candidate] = field(default_factory=list)
    selected: list[SelectableTool] | None = None
    """The tools that run as things stand (None: no step has selected yet; every candidate is
    still open)."""
    parameters: dict[str, BaseModel] = field(default_factory=dict)
    """Parameters a step carried, by qualified name: that tool needs no extraction of its own."""
    model_selected: bool = False
    """Whether ``selected`` is a model's answer (a choice, a function call), not a lone
    candidate taken as it is: when a confirmation fails, only a model's answer runs."""

    @property
    def candidate_tools(self) -> list[SelectableTool]:
        return [candidate.tool for candidate in self.candidates]

    @property
    def open_tools(self) -> list[SelectableTool]:
        """The selected tools, or every candidate while nothing is selected."""
        return self.candidate_tools if self.selected is None else list(self.selected)

    def select(self, tools: Sequence[SelectableTool]) -> None:
        self.selected = list(tools)
        names = {tool.qualified_name for tool in tools}
        for name in [*self.parameters]:
            if name not in names:
                del self.parameters[name]  # a dropped tool loses what its step carried

    def named(self, names: Sequence[str], among: Sequence[SelectableTool]) -> list[SelectableTool]:
        """The tools of ``among`` whose short names the model gave, in its order, each once; the
        names that are none of them are recorded as ignored."""
        by_short_name = {tool.short_name: tool for tool in among}
        self.record.ignored.extend(name for name in names if name not in by_short_name)
        return [by_short_name[name] for name in dict.fromkeys(names) if name in by_short_name]

    async def ask(
        self,
        purpose: Purpose,
        call: Callable[[], Awaitable[T]],
        failed: str,
        is_valid: Callable[[T], bool] = lambda _: True,
    ) -> T:
        """One model call of a step, with the orchestrator's attempts; a failure is a
        :class:`StepFailed` saying ``failed`` (what the selection does instead) and why."""
        try:
            return await call_model(purpose.value, self.attempts, call, is_valid=is_valid)
        except ModelError as error:
            raise StepFailed(f"{failed}: {error}") from error

    async def model_selects(
        self, call: Callable[[], Awaitable[Sequence[str]]], failed: str
    ) -> list[SelectableTool]:
        """The candidates a model call names (``call`` returns their short names) become the
        selection, as the model's answer; when the call fails nothing is selected and the
        :class:`StepFailed` says ``failed``."""
        try:
            names = await self.ask(Purpose.CHOICE, call, failed)
        except StepFailed:
            self.select([])
            raise
        chosen = self.named(names, self.candidate_tools)
        self.select(chosen)
        self.model_selected = True
        return chosen

    async def confirm(self, tools: Sequence[SelectableTool]) -> dict[str, bool]:
        """Each tool's own yes/no question, one call per tool (a small model answers one
        question far better than several in one call); each answer is recorded as it comes, so a
        later question's failure loses none."""
        answers: dict[str, bool] = {}
        for tool in tools:
            name = tool.qualified_name
            reply = await self.ask(
                Purpose.SUITABILITY,
                partial(self.llm.suitability, self.task_prompt, [tool.suitability_question()]),
                "a confirmation failed",
                is_valid=partial(_answers, name),
            )
            answers[name] = bool(reply[name])
            self.record.answers[name] = answers[name]  # kept when a later question fails
        return answers


def _answers(name: str, reply: Mapping[str, bool]) -> bool:
    return name in reply


@runtime_checkable
class SelectionStep(Protocol):
    """One named step of a selection. ``run`` reads and changes the state and writes what it
    decided into ``record`` (its verdicts per tool, a note); a :class:`StepFailed` it raises is
    recorded as the step's failure and the next step runs.

    A step that puts candidates in the state (``retrieve``, a plugin's own retrieval) says so
    with a class attribute ``provides_candidates = True`` (:func:`provides_candidates`): every
    other step works on the candidates, so a step list without such a step is refused."""

    @property
    def name(self) -> str: ...

    async def run(self, state: SelectionState, record: StepRecord) -> None: ...


def provides_candidates(step: SelectionStep) -> bool:
    """Whether ``step`` declares that it puts candidates in the state (an optional attribute,
    so a step written before it, which puts none, needs no change)."""
    return getattr(step, "provides_candidates", False) is True


StepFactory = Callable[[SelectionSettings], SelectionStep]
"""What ``register_selection_steps`` registers under a name: the domain's selection settings
in, the step out (built once per domain)."""


def fixed(step: SelectionStep) -> StepFactory:
    """The factory of a step that needs no settings."""
    return lambda _settings: step
