"""Search building blocks (seed 6.10): pages, the embedded full-text index, the search tools and
the deep search coordinator."""

from toolwire.context_buffer import PageRef
from toolwire.search.context_search import (
    AbstractContextSearchTool,
    SearchOutcome,
    SearchParams,
    SearchStrategy,
)
from toolwire.search.deep_search import (
    AbstractDeepSearchCoordinatorTool,
    DeepSearchParams,
    DeepSearchSettings,
)
from toolwire.search.index import PageIndex, SearchHit, default_cache_dir, query_terms
from toolwire.search.neighbor_search import AbstractNeighborPageSearchTool, earlier_hits
from toolwire.search.pages import (
    Page,
    PageSource,
    StaticPageSource,
    fingerprint_pages,
    render_pages,
    split_into_pages,
)
from toolwire.search.relevance import PageRelevance, relevant_pages
from toolwire.search.requests import search_query, search_request
from toolwire.tools import coordinator_only_instruction

__all__ = [
    "AbstractContextSearchTool",
    "AbstractDeepSearchCoordinatorTool",
    "AbstractNeighborPageSearchTool",
    "DeepSearchParams",
    "DeepSearchSettings",
    "Page",
    "PageIndex",
    "PageRef",
    "PageRelevance",
    "PageSource",
    "SearchHit",
    "SearchOutcome",
    "SearchParams",
    "SearchStrategy",
    "StaticPageSource",
    "coordinator_only_instruction",
    "default_cache_dir",
    "earlier_hits",
    "fingerprint_pages",
    "query_terms",
    "relevant_pages",
    "render_pages",
    "search_query",
    "search_request",
    "split_into_pages",
]
