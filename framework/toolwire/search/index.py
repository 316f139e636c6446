"""An embedded full-text index of pages: SQLite FTS5 with BM25 ranking, cached on disk.

The index is built once per source and kept in one SQLite file under the cache directory
(``index`` in :func:`~toolwire.cache_root.cache_root`, beside the embedded model). Opening it
again reuses the file when the source's fingerprint is unchanged and rebuilds it otherwise. A
build writes a temporary file and moves it into place atomically, so a reader never sees a
half-built index and two processes building at once both end with a complete one. One
connection per index, guarded by a lock, makes the object safe to query from several threads and
tasks at once (queries take milliseconds).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from toolwire.cache_root import cache_root, new_cache_file
from toolwire.errors import ConfigError
from toolwire.search.pages import Page, PageSource

log = structlog.get_logger(__name__)

SCHEMA_VERSION = "1"
"""Part of the cache key: a new layout of the file invalidates every cached index."""

TITLE_WEIGHT = 4.0
"""BM25 weight of a title match relative to a text match."""

_SOURCE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
WORD = re.compile(r"\w+")
"""A word of a query (and of a task's leading action,
:mod:`toolwire.selection.english.leading_action`)."""

_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been
    before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers how i if in into is it its itself just me more most my
    no nor not of off on once only or other our out over own same she should so some such than
    that the their them then there these they this those through to too under until up use used
    using very was we were what when where which while who whom why will with would you your"""

STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words dropped from queries: they match nearly every page and would only inflate hit sets."""


def default_cache_dir() -> Path:
    """``index`` in toolwire's cache directory (:func:`toolwire.cache_root.cache_root`)."""
    return cache_root() / "index"


def query_terms(query: str) -> list[str]:
    """The distinct search terms of a free-text query, in order (lower case, no stopwords)."""
    terms: dict[str, None] = {}
    for word in WORD.findall(query.lower()):
        word = word.strip("_")
        if len(word) > 1 and word not in STOPWORDS:
            terms[word] = None
    return list(terms)


def match_expression(terms: list[str]) -> str:
    """An FTS5 query matching any of ``terms``; each is quoted, so FTS5 query syntax in a
    question ("AND", "-", ":") is never interpreted."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


@dataclass(frozen=True)
class SearchHit:
    """A page the keyword search found, with its BM25 score (higher is better)."""

    page: Page
    score: float


class PageIndex:
    """A cached FTS5 index over one :class:`PageSource`; build or reuse it with :meth:`open`."""

    def __init__(self, path: Path, fingerprint: str, *, reused: bool) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.reused = reused
        """Whether :meth:`open` found a valid cached file (no build happened)."""
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False
        )
        self.page_count: int = self._connection.execute("SELECT count(*) FROM pages").fetchone()[0]

    @classmethod
    def open(cls, source: PageSource, *, cache_dir: Path | None = None) -> PageIndex:
        """The index of ``source``: the cached file if its fingerprint matches, else a new build."""
        if not _SOURCE_NAME.match(source.name):
            raise ConfigError(
                f"page source name {source.name!r} cannot name an index file; "
                "use lower case letters, digits, '-' and '_'"
            )
        directory = cache_dir if cache_dir is not None else default_cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{source.name}.sqlite3"
        fingerprint = f"{SCHEMA_VERSION}:{source.fingerprint()}"
        if _stored_fingerprint(path) == fingerprint:
            log.debug("index_reused", source=source.name, path=str(path))
            return cls(path, fingerprint, reused=True)
        page_count = _build(source, path, fingerprint)
        log.info("index_built", source=source.name, path=str(path), pages=page_count)
        return cls(path, fingerprint, reused=False)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def search(self, query: str, *, limit: int = 10) -> list[SearchHit]:
        """Pages matching any term of ``query``, best BM25 score first."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        sql = (
            "SELECT p.doc_id, p.page_no, p.title, p.text, bm25(pages_fts, ?, 1.0) AS rank "
            "FROM pages_fts JOIN pages p ON p.rowid = pages_fts.rowid "
            "WHERE pages_fts MATCH ? ORDER BY rank, p.rowid LIMIT ?"
        )
        with self._lock:
            rows = self._connection.execute(
                sql, (TITLE_WEIGHT, match_expression(terms), limit)
            ).fetchall()
        return [SearchHit(_page(row), -float(row[4])) for row in rows]

    def count(self, query: str) -> int:
        """How many pages match ``query`` (the size of the keyword hit set)."""
        terms = query_terms(query)
        if not terms:
            return 0
        with self._lock:
            row = self._connection.execute(
                "SELECT count(*) FROM pages_fts WHERE pages_fts MATCH ?",
                (match_expression(terms),),
            ).fetchone()
        return int(row[0])

    def page(self, doc_id: str, page_no: int) -> Page | None:
        with self._lock:
            row = self._connection.execute(
                "SELECT doc_id, page_no, title, text FROM pages WHERE doc_id = ? AND page_no = ?",
                (doc_id, page_no),
            ).fetchone()
        return _page(row) if row else None

    def neighbors(self, doc_id: str, page_no: int, *, distance: int = 1) -> list[Page]:
        """Pages of the same document within ``distance`` of the page, the page itself excluded."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT doc_id, page_no, title, text FROM pages WHERE doc_id = ? "
                "AND page_no BETWEEN ? AND ? AND page_no != ? ORDER BY page_no",
                (doc_id, page_no - distance, page_no + distance, page_no),
            ).fetchall()
        return [_page(row) for row in rows]

    def iter_pages(self) -> Iterator[Page]:
        """Every page in source order (the brute-force scan)."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT doc_id, page_no, title, text FROM pages ORDER BY rowid"
            ).fetchall()
        return (_page(row) for row in rows)


def _page(row: tuple[str, int, str, str, float] | tuple[str, int, str, str]) -> Page:
    return Page(doc_id=row[0], page_no=row[1], title=row[2], text=row[3])


def _stored_fingerprint(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        return None  # unreadable or foreign file: rebuild over it
    return str(row[0]) if row else None


def _build(source: PageSource, path: Path, fingerprint: str) -> int:
    temporary, descriptor = new_cache_file(path, prefix=".")  # readable by other users
    os.close(descriptor)  # sqlite opens it by name
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.executescript(
                """
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE pages (
                    rowid INTEGER PRIMARY KEY,
                    doc_id TEXT NOT NULL, page_no INTEGER NOT NULL,
                    title TEXT NOT NULL, text TEXT NOT NULL,
                    UNIQUE (doc_id, page_no)
                );
                CREATE VIRTUAL TABLE pages_fts USING fts5(
                    title, text, content='pages', content_rowid='rowid',
                    tokenize='porter unicode61'
                );
                """
            )
            try:
                connection.executemany(
                    "INSERT INTO pages (doc_id, page_no, title, text) VALUES (?, ?, ?, ?)",
                    ((p.doc_id, p.page_no, p.title, p.text) for p in source.load_pages()),
                )
            except sqlite3.IntegrityError as error:
                raise ConfigError(
                    f"page source {source.name!r} yields the same (doc_id, page_no) twice; "
                    "page ids must be unique"
                ) from error
            connection.execute("INSERT INTO pages_fts (pages_fts) VALUES ('rebuild')")
            count = int(connection.execute("SELECT count(*) FROM pages").fetchone()[0])
            connection.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("fingerprint", fingerprint), ("source", source.name)],
            )
            connection.commit()
        finally:
            connection.close()
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return count
