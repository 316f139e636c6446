"""Which of a domain's tools suit a task (SPEC §3 step 5): the domain's steps, run in order.

The steps are named in ``orchestrator.selection.steps`` (or by the model's profile) and built
once per domain from what ``register_selection_steps`` registered. The selector sees only the
task prompt, never its prompt context (SPEC §3 step 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog
from pydantic import BaseModel

from toolwire.errors import PLUGIN_FAILURES, ConfigError, Problem, describe, did_you_mean
from toolwire.llm.base import LanguageModel
from toolwire.selection.selectable import ToolCatalogue
from toolwire.selection.state import (
    SelectionState,
    SelectionStep,
    StepFactory,
    StepFailed,
    provides_candidates,
)
from toolwire.selection.trace import SelectionRecord, StepRecord
from toolwire.settings import SelectionSettings

log = structlog.get_logger(__name__)


@dataclass
class Selection:
    """A selection's record (the trace's) and the parameters its steps carried."""

    task_prompt: str
    record: SelectionRecord
    parameters: dict[str, BaseModel] = field(default_factory=dict)
    """Parameters a step carried, by qualified name: that tool needs no extraction of its own."""


@dataclass(frozen=True)
class ToolSelector:
    """One domain's catalogue and its steps; built once."""

    catalogue: ToolCatalogue
    steps: tuple[SelectionStep, ...]

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(step.name for step in self.steps)

    async def select(
        self,
        task_prompt: str,
        llm: LanguageModel,
        attempts: int,
        *,
        parameters_from_task: bool = True,
    ) -> Selection:
        """The selection for one task prompt: every step in order, then what runs."""
        record = SelectionRecord(left_out=dict(self.catalogue.left_out))
        state = SelectionState(
            task_prompt, self.catalogue, llm, attempts, parameters_from_task, record
        )
        for step in self.steps:
            await _run(step, state)
        record.activated = [tool.qualified_name for tool in state.selected or []]
        log.info(
            "tools_selected",
            steps=self.step_names,
            candidates=len(state.candidates),
            activated=record.activated,
        )
        return Selection(task_prompt, record, state.parameters)


async def _run(step: SelectionStep, state: SelectionState) -> None:
    """One step; its record is kept when it decided, noted or failed anything."""
    record = StepRecord(step=step.name)
    try:
        await step.run(state, record)
    except StepFailed as failure:
        record.failure = str(failure)
    except PLUGIN_FAILURES as error:  # a plugin's step must not break the question
        record.failure = f"the step raised {describe(error)}; the selection goes on without it"
        log.warning("selection_step_raised", step=step.name, error=describe(error))
    if record.verdicts or record.note or record.failure:
        state.record.steps.append(record)


def unknown_step(name: str, registered: Iterable[str]) -> str:
    """The message for a step name nobody registered."""
    known = sorted(registered)
    return (
        f"orchestrator.selection.steps: unknown selection step {name!r}; "
        f"{did_you_mean(name, known)}registered: {', '.join(known)} (a plugin adds one with "
        "the register_selection_steps hook, docs/plugins.md)"
    )


def no_candidates(names: Sequence[str], *, from_profile: bool) -> str:
    """The message for a step list none of whose steps puts candidates in the selection."""
    listed = f"[{', '.join(names)}]"
    if from_profile:
        return (
            f"llm.profile: no step of the model profile's selection_steps {listed} puts "
            "candidates in the selection, so no tool would ever be selected; start that list "
            "with retrieve, or name the steps in orchestrator.selection.steps"
        )
    return (
        f"orchestrator.selection.steps: no step of {listed} puts candidates in the selection, "
        "so no tool would ever be selected; start the list with retrieve (or leave the setting "
        "out: the model profile's steps)"
    )


def make_steps(
    registered: Mapping[str, StepFactory],
    settings: SelectionSettings,
    profile_steps: Sequence[str],
    *,
    path: str | None = None,
    line: int | None = None,
) -> tuple[SelectionStep, ...]:
    """The steps ``settings.steps`` lists (None: ``profile_steps``, the model profile's), built
    from their registered factories. ``ConfigError`` for an unknown name (naming the closest
    registered one and every name registered) and for a list none of whose steps puts
    candidates (:func:`~toolwire.selection.state.provides_candidates`): every later step works
    on the candidates, so the selection would quietly select nothing. An empty list is such a
    list, not the profile's steps. ``path`` and ``line``: where the list was written (the
    app's configuration file), for the problems."""
    names = settings.steps if settings.steps is not None else profile_steps
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise ConfigError([Problem(unknown_step(name, registered), path, line) for name in unknown])
    steps = tuple(registered[name](settings) for name in names)
    if not any(provides_candidates(step) for step in steps):
        message = no_candidates(names, from_profile=settings.steps is None)
        raise ConfigError([Problem(message, path, line)])
    return steps
