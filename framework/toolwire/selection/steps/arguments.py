"""``arguments``: the selected tools' arguments from the model's native function calling.

After ``choose`` and ``confirm`` have decided which tools run, the selected tools alone are
offered as functions with the task as the user's message, and each call's arguments, when valid
for the tool's parameter model, are carried: the tool needs no extraction call of its own. This
takes from native function calling what it does well (filling a function's arguments from its
schema, the format the model was trained on) and leaves the choice and the refusal to the steps
before it. The step never changes which tools run: a tool the model does not call, or whose
arguments do not fit, has its parameters extracted as usual, and so does every tool of a task
whose parameters do not come from its prompt alone. It needs a model with native function
calling (the model profile's ``function_calling``): without it the call would be a constrained
choice of names, which carries nothing, so the step makes none and its record says why (a model
without ``offers_functions``, as a plugin's may be, is taken to offer them).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.llm.base import Purpose
from toolwire.selection.state import SelectionState
from toolwire.selection.steps.call import carry_arguments, first_calls
from toolwire.selection.trace import StepRecord


@dataclass(frozen=True)
class CallArguments:
    name: str = "arguments"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        if not state.parameters_from_task:
            return
        tools = [  # a tool without parameters has nothing to carry
            tool
            for tool in state.selected or []
            if tool.parameter_names and tool.qualified_name not in state.parameters
        ]
        if not tools:
            return
        if not getattr(state.llm, "offers_functions", True):
            record.note = (
                "skipped: the model is offered no functions (the profile's function_calling, or "
                "its server), so a call would carry no arguments"
            )
            return
        calls = await state.ask(
            Purpose.CHOICE,  # the purpose choose_functions records its call under
            lambda: state.llm.choose_functions(
                state.task_prompt, [tool.option() for tool in tools]
            ),
            "the arguments call failed; the tools' parameters are extracted as usual",
        )
        arguments = first_calls(calls)
        for tool in tools:
            given = arguments.get(tool.short_name)
            if given is not None and carry_arguments(tool, given, state):
                record.verdicts[tool.qualified_name] = "its arguments carried from a call"
        if not record.verdicts:
            record.note = "no arguments carried; the tools' parameters are extracted as usual"
