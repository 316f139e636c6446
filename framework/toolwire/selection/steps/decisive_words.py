"""``decisive_words`` (before ``choose``): when the best-matching candidate's words decide, its
own question is asked before any choice.

Its words decide when it scores :data:`RATIO` times the runner-up (or alone matches) and shares
:data:`WORDS` different words with the task, more than any other candidate. Confirmed, it is
selected and no choice is made; refused, the choice runs as usual and the refusal stands.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.selection.state import SelectionState
from toolwire.selection.trace import StepRecord

RATIO = 1.3
"""How many times the runner-up's score the best match must score."""
WORDS = 2
"""How many different words of the task the best match must share (one is weak evidence)."""


@dataclass(frozen=True)
class DecisiveWords:
    name: str = "decisive_words"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        if state.selected is not None or len(state.candidates) < 2 or not _decisive(state):
            return
        lead = state.candidates[0].tool
        answers = await state.confirm([lead])
        if answers[lead.qualified_name]:
            state.select([lead])
            record.verdicts[lead.qualified_name] = "its words decided, confirmed on its question"
        else:
            record.verdicts[lead.qualified_name] = (
                "its words pointed at it, refused on its question"
            )


def _decisive(state: SelectionState) -> bool:
    scores = [candidate.score for candidate in state.candidates]
    if scores[0] <= 0 or scores[0] < RATIO * scores[1]:
        return False
    names = [candidate.name for candidate in state.candidates]
    # every candidate: a word half a small domain shares scores next to nothing, but counts
    best, *others = state.catalogue.index.shared_terms(state.task_prompt, *names)
    return best >= WORDS and all(best > other for other in others)
