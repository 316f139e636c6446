"""``english.several_requests`` (after ``confirm``): a task that joins several requests ("What is
its volume, and how long is its equator?") of which one tool was confirmed gets a second choice.

Read from the task's English words (:data:`SEVERAL_REQUESTS`), with no model call: a small model
names one tool for such a task far more often than two; asked again without the tool selected
and the tools it has answered for, it names the second request's. The first tool the second
choice names is asked its own question (a single one left is asked without a choice). A failed
call leaves the confirmed tool to run alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from toolwire.llm.base import Purpose
from toolwire.selection.state import SelectionState
from toolwire.selection.trace import StepRecord

SEVERAL_REQUESTS = (
    r"\?\s*\S.*\?"  # two questions
    r"|;\s"
    r"|,\s*(and|then|plus)\s"
    r"|\b(also|then|as well|too|while you're at it|besides)\b"
    r"|\band\s+(what|how|when|where|which|who|whether|"
    r"tell|give|show|find|send|book|add|set|remind|email|check|convert|look)\b"
    # a question's inverted verb ("and is it safe …?"), not a statement's ("and can pay 300")
    r"|\band\s+(is|are|can|could|do|does|will|would)\s+"
    r"(i|you|it|he|she|we|they|there|this|that|my|your|the)\b"
)
"""English words and signs that join a second request to a first (a second question, "…, and
…", "also", "then", "and what …", "and is it …", "and send …"; not a statement's "and can pay
…"), matched case-insensitively anywhere in the task."""

PATTERN = re.compile(SEVERAL_REQUESTS, re.IGNORECASE)


def reads_as_several(task_prompt: str) -> bool:
    return PATTERN.search(task_prompt) is not None


@dataclass(frozen=True)
class SeveralRequests:
    name: str = "english.several_requests"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        selected = state.selected or []
        if len(selected) != 1 or not reads_as_several(state.task_prompt):
            return
        # neither a tool answered for nor the one selected: without a confirm before this step
        # the selected tool has no answer, and the second choice could name it again
        done = {*state.record.answers, selected[0].qualified_name}
        rest = [tool for tool in state.candidate_tools if tool.qualified_name not in done]
        if not rest:
            return
        record.note = "read as several requests"
        named = rest
        if len(rest) > 1:
            names = await state.ask(
                Purpose.CHOICE,
                partial(state.llm.choose, state.task_prompt, [tool.option() for tool in rest]),
                "the second choice failed, the confirmed tool runs alone",
            )
            named = state.named(names, rest)
        if not named:
            return
        second = named[0]
        confirmed = (await state.confirm([second]))[second.qualified_name]
        verdict = "confirmed" if confirmed else "refused"
        record.verdicts[second.qualified_name] = (
            f"named by the second choice, {verdict} on its question"
        )
        if confirmed:
            state.select([*selected, second])
