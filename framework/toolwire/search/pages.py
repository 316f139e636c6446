"""Documents split into pages, and the sources that supply them.

A :class:`Page` is the unit the search tools retrieve, check and hand on (the original platform's
``UniqueTextDocument``): a document id, the page number within that document, a title and the
text. Pages of one document are numbered from 1 so that "the page next to a hit" is well defined.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from toolwire.context_buffer import PageRef

DEFAULT_PAGE_CHARS = 1500
"""Target page length: a few paragraphs, small enough for a small model's relevance check."""

class Page(BaseModel):
    """One page of a document (the original's ``UniqueTextDocument``)."""

    model_config = ConfigDict(frozen=True)

    doc_id: str = Field(pattern=r"^[^\s\]#]+$")
    """Stable id of the document; no whitespace, ``#`` or ``]`` (they delimit page references)."""
    page_no: int = Field(ge=1)
    title: str
    text: str

    @property
    def id(self) -> str:
        """Unique page id, ``"<doc_id>#<page_no>"``."""
        return f"{self.doc_id}#{self.page_no}"

    @property
    def ref(self) -> PageRef:
        """The page by reference: what a search tool's result carries as data."""
        return PageRef(doc_id=self.doc_id, page_no=self.page_no)

    def render(self) -> str:
        """The page as search tools return it to the model: a reference header, then the text."""
        return f"{self.ref.label} {self.title}\n{self.text}"


def render_pages(pages: Iterable[Page]) -> str:
    """Pages as one context text (the model's; the pages themselves travel as
    ``ToolExecutionResult.pages``)."""
    return "\n\n".join(page.render() for page in pages)


def split_into_pages(
    doc_id: str, title: str, text: str, *, max_chars: int = DEFAULT_PAGE_CHARS
) -> list[Page]:
    """Split a document into pages of at most about ``max_chars``, on paragraph boundaries.

    A paragraph longer than a page is split on line boundaries, and a single overlong line is cut
    hard, so no page grows without bound. A document with no text yields no pages.
    """
    chunks: list[str] = []
    current = ""
    for block in _blocks(text, max_chars):
        if current and len(current) + 2 + len(block) > max_chars:
            chunks.append(current)
            current = block
        else:
            current = f"{current}\n\n{block}" if current else block
    if current:
        chunks.append(current)
    return [
        Page(doc_id=doc_id, page_no=number, title=title, text=chunk)
        for number, chunk in enumerate(chunks, start=1)
    ]


def _blocks(text: str, max_chars: int) -> Iterable[str]:
    """Paragraphs of ``text``, each cut into pieces no longer than ``max_chars``."""
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        paragraph = paragraph.rstrip()
        if not paragraph.strip():
            continue
        if len(paragraph) <= max_chars:
            yield paragraph
            continue
        piece = ""
        for line in paragraph.splitlines():
            while len(line) > max_chars:
                if piece:
                    yield piece
                    piece = ""
                yield line[:max_chars]
                line = line[max_chars:]
            if piece and len(piece) + 1 + len(line) > max_chars:
                yield piece
                piece = line
            else:
                piece = f"{piece}\n{line}" if piece else line
        if piece.strip():
            yield piece


class PageSource(ABC):
    """Where an index's pages come from.

    ``fingerprint()`` decides whether a cached index is still valid: the default hashes every
    page, which is exact; override it with something cheaper (a version, a file's hash) when
    loading the pages is expensive.
    """

    name: str
    """Names the cache file; lower case letters, digits, ``-`` and ``_``."""

    @abstractmethod
    def load_pages(self) -> Iterable[Page]:
        """Every page, in a stable order."""

    def fingerprint(self) -> str:
        return fingerprint_pages(self.load_pages())


class StaticPageSource(PageSource):
    """Pages given up front (tests, small in-memory corpora)."""

    def __init__(self, name: str, pages: Sequence[Page]) -> None:
        self.name = name
        self._pages = tuple(pages)

    def load_pages(self) -> Iterable[Page]:
        return self._pages


def fingerprint_pages(pages: Iterable[Page]) -> str:
    """A sha256 over every page's id, title and text."""
    digest = hashlib.sha256()
    for page in pages:
        for part in (page.id, page.title, page.text):
            encoded = part.encode()
            digest.update(len(encoded).to_bytes(8, "big"))
            digest.update(encoded)
    return digest.hexdigest()
