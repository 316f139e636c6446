"""A small in-memory BM25 index over keyed documents with weighted fields (SQLite FTS5).

Tool selection and domain routing retrieve candidates with it: built once when an orchestrator is
built, queried once per task (in memory, with no model call, so its cost is negligible). The query
side is the page index's (:func:`toolwire.search.index.query_terms`: lower case, stopwords
dropped, each term quoted), and the tokenizer stems (``porter``), so "converting" finds "convert".
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass

from toolwire.search.index import match_expression, query_terms


@dataclass(frozen=True)
class Document:
    """One thing to find: a ``key`` (a tool's prefixed name, a domain) and its text by field."""

    key: str
    fields: Mapping[str, str]


@dataclass(frozen=True)
class Hit:
    """A document the query matched, with its BM25 score (higher is better)."""

    key: str
    score: float


class LexicalIndex:
    """BM25 over documents whose fields are weighted (a name match counts more than a field
    description); documents with the same key are kept apart and their best hit counts."""

    def __init__(self, documents: Sequence[Document], weights: Mapping[str, float]) -> None:
        self.fields = tuple(weights)
        self._weights = tuple(float(weights[name]) for name in self.fields)
        self._keys: list[str] = []
        self._rows_of: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(":memory:", check_same_thread=False)
        columns = ", ".join(self.fields)
        self._connection.execute(
            f"CREATE VIRTUAL TABLE docs USING fts5({columns}, tokenize='porter unicode61')"
        )
        rows = []
        for document in documents:
            unknown = set(document.fields) - set(self.fields)
            if unknown:
                raise ValueError(f"document {document.key!r} has unweighted fields {unknown}")
            self._keys.append(document.key)
            self._rows_of.setdefault(document.key, []).append(len(self._keys))
            rows.append(tuple(document.fields.get(name, "") for name in self.fields))
        placeholders = ", ".join("?" for _ in self.fields)
        self._connection.executemany(f"INSERT INTO docs ({columns}) VALUES ({placeholders})", rows)
        self._sql = (
            f"SELECT rowid, bm25(docs, {', '.join('?' for _ in self.fields)}) AS rank "
            "FROM docs WHERE docs MATCH ? ORDER BY rank, rowid"
        )

    def __len__(self) -> int:
        return len(self._keys)

    def search(self, query: str, *, limit: int) -> list[Hit]:
        """The best ``limit`` keys matching any term of ``query``, best first (each key once, by
        its best document).

        The rows are read best first until ``limit`` different keys are found, not a fixed
        number of rows: a key with many matching documents (a domain's tools) would otherwise
        fill them, and a runner-up left out would count as no match at all."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        best: dict[str, float] = {}
        with self._lock, closing(self._connection.cursor()) as rows:
            for rowid, rank in rows.execute(self._sql, (*self._weights, match_expression(terms))):
                best.setdefault(self._keys[rowid - 1], -float(rank))
                if len(best) == limit:
                    break
        return [Hit(key, score) for key, score in best.items()]

    def shared_terms(self, query: str, *keys: str) -> list[int]:
        """For each of ``keys``, how many different terms of ``query`` some document of it
        matches (one lookup per term): one match can be one word repeated, two different words
        are evidence of the topic."""
        owners: dict[int, list[int]] = {}  # a row → the positions of its key (a key may repeat)
        for index, key in enumerate(keys):
            for row in self._rows_of.get(key, []):
                owners.setdefault(row, []).append(index)
        counts = [0] * len(keys)
        if not owners:
            return counts
        placeholders = ", ".join("?" for _ in owners)
        sql = f"SELECT rowid FROM docs WHERE docs MATCH ? AND rowid IN ({placeholders})"
        with self._lock:
            for term in query_terms(query):
                found = self._connection.execute(sql, (match_expression([term]), *owners))
                for index in {index for (row,) in found for index in owners[row]}:
                    counts[index] += 1
        return counts

    def close(self) -> None:
        with self._lock:
            self._connection.close()
