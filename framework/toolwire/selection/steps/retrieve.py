"""``retrieve``: the candidates, from the domain's tool index (BM25, built once).

The ``top_k`` best matches, best first, then the best match's closest siblings that did not
match, ``top_k`` in all; every tool of a domain of no more than ``top_k``, its matches first (a
small model leans to the first options). A match is evidence for a tool, but none against its
siblings: "50,000 yen in Swiss francs" matches an exchange-rate tool's example and no word of
the currency-conversion tool. Siblings are what the model must tell apart, so they are put to it
together. Its cost does not grow with the number of tools in the domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from toolwire.selection.state import Candidate, SelectionState
from toolwire.selection.trace import RetrievedTool, StepRecord


@dataclass(frozen=True)
class Retrieve:
    top_k: int
    name: str = "retrieve"
    provides_candidates: ClassVar[bool] = True

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        catalogue = state.catalogue
        hits = catalogue.index.search(state.task_prompt, limit=self.top_k)
        scores = {hit.key: hit.score for hit in hits}
        matched = [catalogue.by_name[hit.key] for hit in hits]
        if len(catalogue.tools) <= self.top_k:
            tools = matched + [
                tool for tool in catalogue.tools if tool.qualified_name not in scores
            ]
        else:
            siblings = [name for tool in matched[:1] for name in catalogue.siblings_of(tool)]
            names = [*scores, *(name for name in siblings if name not in scores)]
            tools = [catalogue.by_name[name] for name in names[: self.top_k]]
            state.record.retrieved = True
        state.candidates = [
            Candidate(tool, round(scores.get(tool.qualified_name, 0.0), 3)) for tool in tools
        ]
        state.record.candidates = [
            RetrievedTool(tool_name=candidate.name, score=candidate.score)
            for candidate in state.candidates
        ]
        how = "retrieved" if state.record.retrieved else "all"
        record.note = f"{len(tools)} candidate(s), {how}"
