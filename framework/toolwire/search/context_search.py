"""``AbstractContextSearchTool``: keyword search, then a model relevance check of the hit pages.

The search runs in up to two stages (seed 6.10):

1. *Keyword search*: BM25 over the domain's page index, each hit cut to its passage for the query
   (``passage_chars``). The top ``candidate_page_count`` hits get
   a relevance check (one model call for all of them, :mod:`toolwire.search.relevance`); the
   relevant ones are the context. When the model rejects every checked hit, the best BM25 page
   is kept, marked unverified (a small model often rejects the very page that answers; an empty
   context would leave the gatekeeper and the answer nothing to read). ``keep_best_unverified =
   False`` turns this off.
2. *Brute-force scan*: only when the keyword search matches nothing although the query has
   search terms, every page of the domain is checked in order, ``brute_force_batch`` pages a
   call, until ``result_page_count`` relevant pages are found.

Where the orchestrator's context gatekeeper judges the search's result anyway (the domain's RAG
tool on a task with a deep fallback: :attr:`toolwire.llm.base.RetrievalPlace.judged_after`), the
keyword search makes no relevance call: its best ``result_page_count`` passages go on, and the
gatekeeper reads them as a relevance check would have (a relevance call before it cost a call
and dropped pages that answered; bench/embedded/LOG.md).

``get_max_brute_force_page_count()`` caps both for large domains (seed 6.10): with a value set,
the unfiltered full scan never runs, and a keyword hit set larger than that gets no per-page model
calls (its best BM25 pages are returned unchecked instead).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, Field

from toolwire.llm.base import LanguageModel, current_retrieval_place
from toolwire.search.index import PageIndex, query_terms
from toolwire.search.pages import Page, render_pages
from toolwire.search.passages import passage
from toolwire.search.relevance import relevant_pages
from toolwire.search.requests import search_query, search_request
from toolwire.tools import (
    OrchestratorActivatedTool,
    ToolExecutionResult,
    coordinator_only_instruction,
)

log = structlog.get_logger(__name__)

UNVERIFIED_NOTE = "(The pages above are the best keyword matches, not confirmed relevant.)"
"""Follows unverified pages, so that the context begins with the page as its relevance check
read it (and the gatekeeper and the answer reuse that from the server's cache)."""


class SearchParams(BaseModel):
    """Parameters of the search tools."""

    query: str = Field(
        default="",
        description="A short search phrase naming the information to find (keywords, names)",
    )


def _handed_on_unchecked(hit_count: int, cap: int | None) -> SearchStrategy | None:
    """Why the best passages go on without a relevance call (None: they get one): too many
    hits to check, or the context gatekeeper judges them after the search."""
    if cap is not None and hit_count > cap:
        return SearchStrategy.KEYWORD_UNCHECKED
    if _judged_after():
        return SearchStrategy.KEYWORD_FOR_GATEKEEPER
    return None


def _judged_after() -> bool:
    """Whether a context gatekeeper judges what the running search returns."""
    place = current_retrieval_place()
    return place is not None and place.judged_after


class SearchStrategy(StrEnum):
    """Which path a context search took; logged and returned for tests and benchmarks."""

    KEYWORD_CHECKED = "keyword_checked"
    KEYWORD_UNCHECKED = "keyword_unchecked"
    """The hit set exceeded the cap: best BM25 pages returned without model calls."""
    KEYWORD_FOR_GATEKEEPER = "keyword_for_gatekeeper"
    """A context gatekeeper judges what the search returns: best BM25 passages, no model call
    of the search's own."""
    KEYWORD_UNVERIFIED = "keyword_unverified"
    """The model rejected every checked hit: the best BM25 page is kept, marked unverified."""
    BRUTE_FORCE = "brute_force"
    BRUTE_FORCE_REFUSED = "brute_force_refused"
    """Nothing matched and a cap is set: no unfiltered scan."""
    NO_QUERY = "no_query"
    """The query has no search terms (empty, or stopwords only): nothing to search for, and no
    model call; a brute-force scan would check the whole domain against it."""


@dataclass(frozen=True)
class SearchOutcome:
    pages: list[Page]
    strategy: SearchStrategy
    hit_count: int
    """Pages the keyword search matched (0 for a brute-force scan)."""
    checked: int
    """Pages that got a model relevance check."""

    @property
    def verified(self) -> bool:
        """Whether the model judged every returned page relevant."""
        return self.strategy in (SearchStrategy.KEYWORD_CHECKED, SearchStrategy.BRUTE_FORCE)

    def render(self) -> str:
        """The pages as context; unverified pages followed by a line that says so."""
        if not self.pages or self.verified:
            return render_pages(self.pages)
        return f"{render_pages(self.pages)}\n\n{UNVERIFIED_NOTE}"


class RemovedSettingsCheck:
    """First base of the search tool bases: a subclass that still sets ``relevance_concurrency``,
    which no longer has an effect, is warned instead of silently ignored."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "relevance_concurrency" in vars(cls):
            batch = (
                "; a brute-force scan checks brute_force_batch pages at a time"
                if hasattr(cls, "brute_force_batch")
                else ""
            )
            warnings.warn(
                f"{cls.__qualname__}.relevance_concurrency was removed and has no effect: a "
                f"search's pages are checked in one call{batch}",
                UserWarning,
                stacklevel=3,  # this hook, ABCMeta.__new__, the class statement
            )


class AbstractContextSearchTool(RemovedSettingsCheck, OrchestratorActivatedTool[SearchParams], ABC):
    """Keyword search plus per-page relevance check over a domain's :class:`PageIndex`.

    Subclasses implement :meth:`get_index` and, for a large domain,
    :meth:`get_max_brute_force_page_count`. The model is injected by type (``LanguageModel``).
    """

    params_model = SearchParams
    candidate_page_count: ClassVar[int] = 4
    """Keyword hits that get a relevance check."""
    result_page_count: ClassVar[int] = 3
    """Relevant pages after which a brute-force scan stops (and unchecked hits returned)."""
    brute_force_batch: ClassVar[int] = 4
    """Pages a brute-force scan checks before it looks at how many were relevant."""
    keep_best_unverified: ClassVar[bool] = True
    """Keep the best BM25 page, marked unverified, when the model rejects every checked hit."""
    passage_chars: ClassVar[int | None] = 700
    """What of each keyword hit is judged and handed on: the run of its paragraphs that holds
    the most query terms, at most this many characters (:mod:`toolwire.search.passages`; None:
    the whole page). On the pydocs evaluation 700 keeps every answering page's phrase that whole
    pages had, in half the characters."""

    def __init__(self, llm: LanguageModel) -> None:
        self.llm = llm

    @abstractmethod
    def get_index(self) -> PageIndex:
        """The domain's page index (build it once, e.g. with ``PageIndex.open`` in a cache)."""

    def get_max_brute_force_page_count(self) -> int | None:
        """None: no cap. A number: no unfiltered full scan at all, and no per-page model calls
        for a keyword hit set larger than this (seed 6.10, "large domain")."""
        return None

    coordinator_only = True

    def executable_instruction(self) -> str:
        return coordinator_only_instruction(self.name)

    def params_from_text(self, text: str) -> SearchParams | None:
        """No query: the request itself is the search phrase (BM25 weighs its rare words; the
        stopwords go), so no model call extracts one. Return None in a subclass to have the
        model extract ``query`` (then read through :func:`search_query`)."""
        return SearchParams()

    async def execute_with_result(self, params: SearchParams, text: str) -> ToolExecutionResult:
        question = search_request(text)
        query = search_query(params.query, text).strip() or question
        outcome = await self.search_pages(query, question or query)
        return ToolExecutionResult.context(
            outcome.render(), pages=[page.ref for page in outcome.pages]
        )

    async def search_pages(self, query: str, question: str) -> SearchOutcome:
        """Run the search for ``query`` and check pages against ``question``."""
        index = self.get_index()
        cap = self.get_max_brute_force_page_count()
        hit_count = index.count(query)
        if hit_count:
            outcome = await self._keyword_search(index, query, question, hit_count, cap)
        elif not query_terms(query):
            outcome = SearchOutcome([], SearchStrategy.NO_QUERY, 0, 0)
        elif cap is not None:
            outcome = SearchOutcome([], SearchStrategy.BRUTE_FORCE_REFUSED, 0, 0)
        else:
            outcome = await self._brute_force(index, question)
        log.info(
            "context_search",
            tool=self.name,
            strategy=outcome.strategy.value,
            hits=outcome.hit_count,
            checked=outcome.checked,
            pages=[page.id for page in outcome.pages],
        )
        return outcome

    async def _keyword_search(
        self, index: PageIndex, query: str, question: str, hit_count: int, cap: int | None
    ) -> SearchOutcome:
        limit = max(self.candidate_page_count, self.result_page_count)
        hits = [self._passage(hit.page, query) for hit in index.search(query, limit=limit)]
        unchecked = _handed_on_unchecked(hit_count, cap)
        if unchecked is not None:
            return SearchOutcome(hits[: self.result_page_count], unchecked, hit_count, 0)
        candidates = hits[: self.candidate_page_count]
        pages = await relevant_pages(self.llm, question, candidates)
        if pages or not self.keep_best_unverified:
            return SearchOutcome(pages, SearchStrategy.KEYWORD_CHECKED, hit_count, len(candidates))
        return SearchOutcome(
            candidates[:1], SearchStrategy.KEYWORD_UNVERIFIED, hit_count, len(candidates)
        )

    def _passage(self, page: Page, query: str) -> Page:
        return page if self.passage_chars is None else passage(page, query, self.passage_chars)

    async def _brute_force(self, index: PageIndex, question: str) -> SearchOutcome:
        """Check every page in order, a batch at a time, until enough relevant ones are found."""
        found: list[Page] = []
        checked = 0
        pages = index.iter_pages()
        while len(found) < self.result_page_count:
            batch = list(islice(pages, max(1, self.brute_force_batch)))
            if not batch:
                break
            found += await relevant_pages(self.llm, question, batch)
            checked += len(batch)
        return SearchOutcome(
            found[: self.result_page_count], SearchStrategy.BRUTE_FORCE, 0, checked
        )
