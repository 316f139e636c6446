"""``confirm``: each selected tool's own yes/no question (the seed's ``executable_instruction``),
one call per tool; the tools answered yes run.

A small model that rarely answers "none" to a choice refuses well on a single question, so the
question is where a request no tool does is turned away. With nothing selected before it (no
``choose`` or ``call`` step), every candidate is asked. A tool an earlier step already asked
keeps its answer. When a call fails, the tools a model chose run unconfirmed; tools no model
chose (a lone candidate, every candidate) do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.selection.state import SelectionState, StepFailed
from toolwire.selection.trace import StepRecord


@dataclass(frozen=True)
class Confirm:
    name: str = "confirm"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        model_chose = state.model_selected
        tools = state.open_tools
        asked = [tool for tool in tools if tool.qualified_name not in state.record.answers]
        try:
            await state.confirm(asked)
        except StepFailed as failure:
            if not model_chose:
                state.select(
                    [tool for tool in tools if state.record.answers.get(tool.qualified_name)]
                )
                raise
            answers = state.record.answers
            state.select([tool for tool in tools if answers.get(tool.qualified_name) is not False])
            raise StepFailed(f"{failure}; the chosen tools run unconfirmed") from failure
        finally:
            for tool in asked:
                answer = state.record.answers.get(tool.qualified_name)
                if answer is not None:
                    record.verdicts[tool.qualified_name] = (
                        "confirmed on its question" if answer else "refused on its question"
                    )
        state.select([tool for tool in tools if state.record.answers.get(tool.qualified_name)])
