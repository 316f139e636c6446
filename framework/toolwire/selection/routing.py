"""Which domain a message goes to when the caller names none: tool selection one level up.

Built once over every installed domain: its name and description, and the text of each of its
tools (name, description, suitability question, parameters, examples). A message is routed by:

1. retrieval (BM25): each domain scores its best-matching document;
2. one domain matches, or the best scores at least :data:`DECISIVE_RATIO` times the runner-up,
   and it shares at least :data:`DECISIVE_WORDS` words with the message: that domain (no model
   call; the lexical evidence is decisive);
3. otherwise (no match at all included) one call, constrained to the domain names or none,
   decides among every domain; none with no domain matching any word: nothing fits, and the
   default domain answers; none while some domain matched: the best-matching domain, if one of
   its tools takes the message (``select``: its tool selection activates one), else nothing fits.
   That selection is the one the message's first task would make: the decision carries it, so
   the task takes it instead of asking the model again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog
from pydantic import BaseModel, Field

from toolwire.errors import ModelError
from toolwire.llm.attempts import call_model
from toolwire.llm.base import LanguageModel, Option, Purpose
from toolwire.registry import DomainSpec
from toolwire.selection.lexical import Document, LexicalIndex
from toolwire.selection.pipeline import Selection
from toolwire.selection.selectable import FIELD_WEIGHTS, SelectableTool

log = structlog.get_logger(__name__)

DOMAIN_WEIGHTS = {**FIELD_WEIGHTS, "domain": 3.0}
"""A domain's own name and description count like a tool's name."""

DECISIVE_RATIO = 2.0
"""The best domain's retrieval score at least this many times the runner-up's decides without
a model call (with :data:`DECISIVE_WORDS`)."""
DECISIVE_WORDS = 2
"""How many different words of the message the best domain must share for the scores to decide
alone: one shared word ("Tell me a joke about cats") is weak evidence, and the model is asked."""


class DomainScore(BaseModel):
    """A domain and its best retrieval score for the message."""

    domain: str
    score: float


class RoutingRecord(BaseModel):
    """How a message that named no domain was routed, as the answer's trace shows it."""

    scores: list[DomainScore] = Field(default_factory=list)
    """Every domain that matched the message, best first."""
    decided_by: Literal["lexical", "model", "words over none", "no tool takes it", "failure"]
    """``words over none``: the model named no domain, but one shares words with the message
    and a tool of it takes the message; ``no tool takes it``: the same, but none of its tools
    does (the default domain answers)."""
    domain: str | None
    """The domain chosen; None: nothing fits (the default domain answers)."""
    failure: str | None = None


@dataclass(frozen=True)
class RoutingDecision:
    """Where a message goes, how that was decided, and the selection made on the way."""

    record: RoutingRecord
    selection: Selection | None = None
    """A domain's tool selection for the message, when routing made one (the model named no
    domain and words pointed at it): the message's first task takes it if it runs there."""
    selected_in: str | None = None
    """The domain ``selection`` was made in (the routed one, or the one no tool of took it)."""


@dataclass(frozen=True)
class DomainRouter:
    """The routing index over every installed domain; built once."""

    domains: Mapping[str, DomainSpec]
    index: LexicalIndex
    options: tuple[Option, ...]
    """How the model sees each domain when the words do not decide: its description. (With its
    tools' names added, routing did worse on the labelled samples, and slower.)"""

    @classmethod
    def build(
        cls,
        domains: Mapping[str, DomainSpec],
        tools: Mapping[str, Sequence[SelectableTool]],
    ) -> DomainRouter:
        """From each domain's spec and its tools' selection entries."""
        documents = [
            Document(name, {"domain": f"{name} {spec.description}"})
            for name, spec in domains.items()
        ]
        for name, entries in tools.items():
            for entry in entries:
                tool = entry.document()
                documents.append(Document(name, dict(tool.fields)))
        options = tuple(
            Option(name=name, question=spec.description or f"questions about {name}")
            for name, spec in domains.items()
        )
        return cls(dict(domains), LexicalIndex(documents, DOMAIN_WEIGHTS), options)

    async def route(
        self,
        message: str,
        llm: LanguageModel,
        attempts: int,
        *,
        select: Callable[[str, str], Awaitable[Selection | None]] | None = None,
    ) -> RoutingDecision:
        """The domain for ``message`` (None: nothing fits), how it was decided, and the
        selection made on the way.

        ``select(domain, message)``: that domain's tool selection for the message (None: the
        domain takes every message), asked only when the model named no domain and words point
        at one; the domain takes the message if a tool was activated or the selection failed
        (the words decide then). Without it, the words decide."""
        hits = self.index.search(message, limit=len(self.domains))
        scores = [DomainScore(domain=hit.key, score=round(hit.score, 3)) for hit in hits]
        best = scores[0] if scores else None
        runner_up = scores[1].score if len(scores) > 1 else 0.0
        if (
            best is not None
            and best.score > 0
            and best.score >= DECISIVE_RATIO * runner_up
            and self.index.shared_terms(message, best.domain)[0] >= DECISIVE_WORDS
        ):
            return self._done(
                RoutingRecord(scores=scores, decided_by="lexical", domain=best.domain)
            )
        try:
            named = await call_model(
                Purpose.ROUTING.value,
                attempts,
                lambda: llm.choose(message, self.options, purpose=Purpose.ROUTING, several=False),
            )
        except ModelError as error:
            fallback = best.domain if best is not None else None  # a better guess than nothing
            return self._done(
                RoutingRecord(
                    scores=scores,
                    decided_by="failure",
                    domain=fallback,
                    failure=f"domain routing failed, {fallback or 'the default domain'} answers: "
                    f"{error}",
                )
            )
        domain = next((name for name in named if name in self.domains), None)
        if domain is None and best is not None and best.score > 0:
            # The model's "none" against words a domain shares with the message: the domain
            # takes it if one of its tools does. Sent to the default domain, a question its
            # domain covers gets a wrong answer; an off-topic question that merely shares a word
            # ("Tell me a joke about cats") is taken by no tool (see docs/models.md).
            selection = await select(best.domain, message) if select is not None else None
            if selection is not None and not _takes(selection):
                record = RoutingRecord(scores=scores, decided_by="no tool takes it", domain=None)
            else:
                record = RoutingRecord(
                    scores=scores, decided_by="words over none", domain=best.domain
                )
            return self._done(record, selection, best.domain)
        return self._done(RoutingRecord(scores=scores, decided_by="model", domain=domain))

    @staticmethod
    def _done(
        record: RoutingRecord, selection: Selection | None = None, selected_in: str | None = None
    ) -> RoutingDecision:
        log.info("message_routed", domain=record.domain, decided_by=record.decided_by)
        return RoutingDecision(record, selection, selected_in if selection else None)


def _takes(selection: Selection) -> bool:
    """Whether a domain's selection takes the message: a tool was activated, or it failed."""
    return bool(selection.record.activated) or selection.record.failure is not None
