"""``choose``: one call, constrained to the candidates' names, names the ones that fit.

Small models name the one best option well but rarely answer "none" to a choice: a later
``confirm`` asks each named tool its own question. A single candidate is the choice already
(selected with no call); a selection an earlier step made stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from toolwire.selection.state import SelectionState
from toolwire.selection.trace import StepRecord


@dataclass(frozen=True)
class Choose:
    name: str = "choose"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        if state.selected is not None or not state.candidates:
            return
        tools = state.candidate_tools
        if len(tools) == 1:
            state.select(tools)
            record.verdicts[tools[0].qualified_name] = "the only candidate"
            return
        options = [tool.option() for tool in tools]
        chosen = await state.model_selects(
            partial(state.llm.choose, state.task_prompt, options),
            "the choice failed, no tool chosen by it",
        )
        for tool in chosen:
            record.verdicts[tool.qualified_name] = "named by the choice"
        if not chosen:
            record.note = "none named"
