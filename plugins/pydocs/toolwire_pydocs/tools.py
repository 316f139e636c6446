"""The pydocs tools: the search (also the domain's RAG tool), the neighbour search and the deep
search coordinator, wired to each other by constructor type hints."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwire import ChatbotTool
from toolwire.llm import LanguageModel
from toolwire.search import (
    AbstractContextSearchTool,
    AbstractDeepSearchCoordinatorTool,
    AbstractNeighborPageSearchTool,
    DeepSearchSettings,
    PageIndex,
)
from toolwire_pydocs.corpus import PydocsSource


class DocsSearchSettings(BaseModel):
    """YAML ``settings`` of ``pydocs.docs_search``."""

    model_config = ConfigDict(extra="forbid")

    cache_dir: str | None = None
    """Where the index file lives; default ``$TOOLWIRE_CACHE_DIR/index`` or
    ``~/.cache/toolwire/index``."""
    max_brute_force_page_count: int | None = Field(default=200, ge=1)
    """The domain has ~700 pages: no full scan, and no per-page model check of a keyword hit set
    larger than this. None lifts the cap (a full scan then costs one model call per page)."""


class DocsSearchTool(AbstractContextSearchTool):
    """Keyword search over the Python documentation, each hit checked by the model.

    The domain's RAG tool on user questions, and the full search of deep search subtasks.
    """

    name = "docs_search"
    settings_model = DocsSearchSettings

    def __init__(self, llm: LanguageModel, settings: DocsSearchSettings | None = None) -> None:
        super().__init__(llm)
        self.settings = settings or DocsSearchSettings()
        self._index: PageIndex | None = None
        self._index_lock = threading.Lock()

    def get_index(self) -> PageIndex:
        """Opened on first use (a cache hit after the first run), then shared."""
        with self._index_lock:
            if self._index is None:
                cache_dir = Path(self.settings.cache_dir) if self.settings.cache_dir else None
                self._index = PageIndex.open(PydocsSource(), cache_dir=cache_dir)
            return self._index

    def get_max_brute_force_page_count(self) -> int | None:
        return self.settings.max_brute_force_page_count


class NeighborPagesTool(AbstractNeighborPageSearchTool):
    """Pages next to earlier hits; only ever runs on coordinator-designated subtasks."""

    name = "neighbor_pages"

    def __init__(self, llm: LanguageModel, docs_search: DocsSearchTool) -> None:
        super().__init__(llm)
        self.docs_search = docs_search

    def get_index(self) -> PageIndex:
        return self.docs_search.get_index()


class DeepSearchTool(AbstractDeepSearchCoordinatorTool):
    """The deep fallback of the how-to and comparison questions (see ``pydocs.yaml``)."""

    name = "deep_search"

    def __init__(
        self,
        docs_search: DocsSearchTool,
        neighbor_pages: NeighborPagesTool,
        settings: DeepSearchSettings | None = None,
    ) -> None:
        super().__init__(settings)
        self.docs_search = docs_search
        self.neighbor_pages = neighbor_pages

    def get_search_tool(self) -> ChatbotTool[Any]:
        return self.docs_search

    def get_neighbor_search_tool(self) -> ChatbotTool[Any] | None:
        return self.neighbor_pages
