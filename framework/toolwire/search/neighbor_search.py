"""``AbstractNeighborPageSearchTool``: the cheap search, pages next to earlier hits.

An answer cut off at a page boundary is usually on the next or previous page of a page already
found. This tool reads the pages earlier searches returned (their ``[page <doc>#<n>]`` headers in
the context buffer it receives, and in its own execution text, which carries the deep search
round's status block) and checks only their unseen neighbours: a handful of model calls instead of
a full search.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import structlog

from toolwire.llm.base import LanguageModel
from toolwire.search.context_search import SearchParams
from toolwire.search.index import PageIndex
from toolwire.search.pages import Page, page_refs, render_pages
from toolwire.search.relevance import relevant_pages
from toolwire.search.requests import search_request
from toolwire.task import ContextBuffer
from toolwire.tools import (
    ContextConsumerTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
    coordinator_only_instruction,
)

log = structlog.get_logger(__name__)


def earlier_hits(prior_context: ContextBuffer, text: str = "") -> list[tuple[str, int]]:
    """Page references found in the buffer (in buffer order), then in ``text``; no repeats."""
    refs: dict[tuple[str, int], None] = {}
    for results in prior_context.values():
        for result in results:
            refs.update(dict.fromkeys(page_refs(result.context)))
    refs.update(dict.fromkeys(page_refs(text)))
    return list(refs)


class AbstractNeighborPageSearchTool(
    OrchestratorActivatedTool[SearchParams], ContextConsumerTool[SearchParams], ABC
):
    """Checks the unseen neighbours of earlier hit pages; subclasses implement :meth:`get_index`."""

    params_model = SearchParams
    neighbor_distance: ClassVar[int] = 1
    max_neighbor_pages: ClassVar[int] = 6
    """At most this many neighbour pages get a relevance check (nearest hits first)."""
    relevance_concurrency: ClassVar[int] = 4

    def __init__(self, llm: LanguageModel) -> None:
        self.llm = llm

    @abstractmethod
    def get_index(self) -> PageIndex:
        """The same index the domain's context search uses."""

    coordinator_only = True

    def executable_instruction(self) -> str:
        return coordinator_only_instruction(self.name)

    def neighbor_pages(self, hits: list[tuple[str, int]]) -> list[Page]:
        """Unseen neighbours of ``hits``, in hit order, at most ``max_neighbor_pages``."""
        index = self.get_index()
        seen = set(hits)
        found: list[Page] = []
        for doc_id, page_no in hits:
            for page in index.neighbors(doc_id, page_no, distance=self.neighbor_distance):
                if (page.doc_id, page.page_no) in seen:
                    continue
                seen.add((page.doc_id, page.page_no))
                found.append(page)
                if len(found) >= self.max_neighbor_pages:
                    return found
        return found

    async def execute_with_prior_context(
        self, params: SearchParams, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        question = search_request(text) or params.query
        hits = earlier_hits(prior_context, text)
        candidates = self.neighbor_pages(hits)
        pages = await relevant_pages(
            self.llm, question, candidates, concurrency=self.relevance_concurrency
        )
        log.info(
            "neighbor_search",
            tool=self.name,
            earlier_hits=len(hits),
            checked=len(candidates),
            pages=[page.id for page in pages],
        )
        return ToolExecutionResult.context(render_pages(pages))
