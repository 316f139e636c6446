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
from toolwire.selection.state import SelectionState, SelectionStep, StepFactory, StepFailed
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


def make_steps(
    names: Sequence[str],
    registered: Mapping[str, StepFactory],
    settings: SelectionSettings,
) -> tuple[SelectionStep, ...]:
    """The steps ``names`` lists, built from their registered factories (an unknown name is a
    ``ConfigError`` naming the closest registered one and every name registered)."""
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise ConfigError(
            [
                Problem(f"orchestrator.selection.steps: {unknown_step(name, registered)}")
                for name in unknown
            ]
        )
    return tuple(registered[name](settings) for name in names)
