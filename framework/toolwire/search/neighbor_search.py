"""``AbstractNeighborPageSearchTool``: the cheap search, pages next to earlier hits.

An answer cut off at a page boundary is usually on the next or previous page of a page already
found. This tool takes the pages earlier searches returned (``PromptAndContext.pages`` in the
context buffer it receives, and the pages the deep search round had consulted,
``ExecutionText.status``) and checks only their unseen neighbours: a handful of model calls
instead of a full search.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import structlog

from toolwire.context_buffer import ContextBuffer, PageRef
from toolwire.llm.base import LanguageModel
from toolwire.search.context_search import RemovedSettingsCheck, SearchParams
from toolwire.search.index import PageIndex
from toolwire.search.pages import Page, render_pages
from toolwire.search.relevance import relevant_pages
from toolwire.search.requests import search_request
from toolwire.task import ExecutionText
from toolwire.tools import (
    ContextConsumerTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
    coordinator_only_instruction,
)

log = structlog.get_logger(__name__)


def earlier_hits(prior_context: ContextBuffer, text: str = "") -> list[PageRef]:
    """The pages earlier results came from (in buffer order), then the pages the deep search
    round of ``text`` had consulted; no repeats."""
    refs = [
        page for results in prior_context.values() for result in results for page in result.pages
    ]
    if isinstance(text, ExecutionText) and text.status is not None:
        refs += text.status.consulted
    return list(dict.fromkeys(refs))


class AbstractNeighborPageSearchTool(
    RemovedSettingsCheck,
    OrchestratorActivatedTool[SearchParams],
    ContextConsumerTool[SearchParams],
    ABC,
):
    """Checks the unseen neighbours of earlier hit pages; subclasses implement :meth:`get_index`."""

    params_model = SearchParams
    neighbor_distance: ClassVar[int] = 1
    max_neighbor_pages: ClassVar[int] = 6
    """At most this many neighbour pages get a relevance check (nearest hits first)."""

    def __init__(self, llm: LanguageModel) -> None:
        self.llm = llm

    @abstractmethod
    def get_index(self) -> PageIndex:
        """The same index the domain's context search uses."""

    coordinator_only = True

    def executable_instruction(self) -> str:
        return coordinator_only_instruction(self.name)

    def neighbor_pages(self, hits: list[PageRef]) -> list[Page]:
        """Unseen neighbours of ``hits``, in hit order, at most ``max_neighbor_pages``."""
        index = self.get_index()
        seen = set(hits)
        found: list[Page] = []
        for hit in hits:
            for page in index.neighbors(hit.doc_id, hit.page_no, distance=self.neighbor_distance):
                if page.ref in seen:
                    continue
                seen.add(page.ref)
                found.append(page)
                if len(found) >= self.max_neighbor_pages:
                    return found
        return found

    def params_from_text(self, text: str) -> SearchParams | None:
        """No query: the neighbours of earlier hits are judged against the request itself, so
        no model call extracts one."""
        return SearchParams()

    async def execute_with_prior_context(
        self, params: SearchParams, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        question = search_request(text) or params.query
        hits = earlier_hits(prior_context, text)
        candidates = self.neighbor_pages(hits)
        pages = await relevant_pages(self.llm, question, candidates)
        log.info(
            "neighbor_search",
            tool=self.name,
            earlier_hits=len(hits),
            checked=len(candidates),
            pages=[page.id for page in pages],
        )
        return ToolExecutionResult.context(render_pages(pages), pages=[page.ref for page in pages])
