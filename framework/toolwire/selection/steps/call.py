"""``call``: the candidates offered to the model's native function calling; the ones it calls
are selected, and each call's arguments, when valid for the tool's parameter model, are carried
(the tool needs no extraction call of its own).

The task prompt is the user's message and nothing else: the format function-calling models are
trained on. The call sees each tool's description and parameter schema, not its
``parameter_instruction()``: a tool whose extraction needs that guidance gets its arguments
extracted as usual (give it no JSON schema description to lean on and the model leaves the
arguments out). Arguments are carried only on a task whose parameters come from its prompt alone.
A provider without tool calling gets a constrained choice (names, no arguments).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from toolwire.errors import PLUGIN_FAILURES, describe
from toolwire.llm.base import FunctionChoice
from toolwire.selection.selectable import SelectableTool
from toolwire.selection.state import SelectionState
from toolwire.selection.trace import StepRecord

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class CallFunctions:
    name: str = "call"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        if state.selected is not None or not state.candidates:
            return
        options = [tool.option() for tool in state.candidate_tools]
        arguments: dict[str, dict[str, Any] | None] = {}

        async def names_called() -> list[str]:
            calls = await state.llm.choose_functions(state.task_prompt, options)
            arguments.update(first_calls(calls))
            return [call.name for call in calls]

        called = await state.model_selects(names_called, "the function call failed, no tool called")
        for tool in called:
            carried = state.parameters_from_task and carry_arguments(
                tool, arguments.get(tool.short_name), state
            )
            verdict = "called" + (" (its arguments carried)" if carried else "")
            record.verdicts[tool.qualified_name] = verdict
        if not called:
            record.note = "no function called"


def first_calls(calls: Iterable[FunctionChoice]) -> dict[str, dict[str, Any] | None]:
    """The arguments of each function called, by name; one called more than once keeps its
    first call's (its tool runs once, with one set of parameters)."""
    arguments: dict[str, dict[str, Any] | None] = {}
    for call in calls:
        arguments.setdefault(call.name, call.arguments)
    return arguments


def carry_arguments(
    tool: SelectableTool, given: dict[str, Any] | None, state: SelectionState
) -> bool:
    """Keep ``given`` as the tool's parameters if they are valid: not when missing, when they
    use a name the parameters do not have (the model made it up), or when the model rejects
    them."""
    if given is None:
        return False
    unknown = set(given) - tool.parameter_names
    if unknown or (tool.parameter_names and not given):
        log.info("call_arguments_not_used", tool=tool.qualified_name, unknown=sorted(unknown))
        return False
    try:
        state.parameters[tool.qualified_name] = tool.tool.params_model.model_validate(given)
    except PLUGIN_FAILURES as error:  # invalid, or a plugin's validator raised
        log.info("call_arguments_not_used", tool=tool.qualified_name, error=describe(error))
        return False
    return True
