"""Pages and the cached FTS5 index: splitting, build and reuse, BM25 order, neighbours."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from toolwire.errors import ConfigError
from toolwire.llm.local import model_cache_dir
from toolwire.search import (
    Page,
    PageIndex,
    PageRef,
    StaticPageSource,
    query_terms,
    render_pages,
    split_into_pages,
)
from toolwire.search.index import default_cache_dir


def _pages() -> list[Page]:
    return [
        Page(doc_id="sorting", page_no=1, title="Sorting HOW TO", text="Use sorted() on a list."),
        Page(doc_id="sorting", page_no=2, title="Sorting HOW TO", text="Key functions for sort."),
        Page(doc_id="sorting", page_no=3, title="Sorting HOW TO", text="Stability of the sort."),
        Page(doc_id="json", page_no=1, title="json", text="Encode objects; sort_keys sorts keys."),
        Page(doc_id="zip", page_no=1, title="zipfile", text="Read and write archives."),
    ]


class CountingSource(StaticPageSource):
    def __init__(self, pages: list[Page]) -> None:
        super().__init__("demo", pages)
        self.loads = 0

    def load_pages(self):  # type: ignore[no-untyped-def]
        self.loads += 1
        return super().load_pages()


def test_split_into_pages_keeps_paragraphs_and_numbers_pages() -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 40 for n in range(6)]
    pages = split_into_pages("doc", "Doc", "\n\n".join(paragraphs), max_chars=500)
    assert [page.page_no for page in pages] == list(range(1, len(pages) + 1))
    assert all(len(page.text) <= 500 for page in pages)
    assert "\n\n".join(page.text for page in pages) == "\n\n".join(p.rstrip() for p in paragraphs)
    assert pages[0].id == "doc#1"


def test_split_cuts_an_overlong_line_and_yields_nothing_for_blank_text() -> None:
    pages = split_into_pages("doc", "Doc", "x" * 1200, max_chars=500)
    assert [len(page.text) for page in pages] == [500, 500, 200]
    assert split_into_pages("doc", "Doc", "  \n\n  ") == []


def test_a_rendered_page_starts_with_its_reference_label() -> None:
    first, second = _pages()[:2]
    assert first.ref == PageRef(doc_id="sorting", page_no=1)
    assert render_pages([first, second]) == (
        f"{first.ref.label} {first.title}\n{first.text}\n\n{second.ref.label} {second.title}"
        f"\n{second.text}"
    )
    assert first.ref.label == "[page sorting#1]"


def test_page_ids_cannot_contain_reference_delimiters() -> None:
    with pytest.raises(ValueError):
        Page(doc_id="a#b", page_no=1, title="t", text="x")


def test_second_open_is_a_cache_hit_and_does_not_rebuild(tmp_path: Path) -> None:
    source = CountingSource(_pages())
    first = PageIndex.open(source, cache_dir=tmp_path)
    assert not first.reused and first.page_count == 5
    mtime = first.path.stat().st_mtime_ns
    second = PageIndex.open(source, cache_dir=tmp_path)
    assert second.reused
    assert second.path == first.path and second.path.stat().st_mtime_ns == mtime
    assert [hit.page.id for hit in second.search("archives")] == ["zip#1"]


def test_a_changed_source_rebuilds_the_index(tmp_path: Path) -> None:
    PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    changed = [*_pages(), Page(doc_id="new", page_no=1, title="New", text="Brand new archives")]
    rebuilt = PageIndex.open(StaticPageSource("demo", changed), cache_dir=tmp_path)
    assert not rebuilt.reused and rebuilt.page_count == 6
    assert {hit.page.id for hit in rebuilt.search("archives")} == {"zip#1", "new#1"}
    assert list(tmp_path.iterdir()) == [rebuilt.path], "no temporary files left behind"


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_the_index_file_is_readable_as_the_umask_allows(
    tmp_path: Path, umask: int, mode: int
) -> None:
    """It was written owner-only whatever the umask: an index built while building a container
    image as root could not be read by the user who ran it."""
    previous = os.umask(umask)
    try:
        index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(index.path.stat().st_mode) == mode


def test_a_corrupt_cache_file_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / "demo.sqlite3").write_bytes(b"not a database at all" * 100)
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    assert not index.reused and index.page_count == 5


def test_duplicate_page_ids_are_a_clear_error(tmp_path: Path) -> None:
    pages = [*_pages(), _pages()[0]]
    with pytest.raises(ConfigError, match="same \\(doc_id, page_no\\) twice"):
        PageIndex.open(StaticPageSource("demo", pages), cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_bad_source_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot name an index file"):
        PageIndex.open(StaticPageSource("../evil", _pages()), cache_dir=tmp_path)


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "index"
    index = PageIndex.open(StaticPageSource("demo", _pages()))
    assert index.path == tmp_path / "index" / "demo.sqlite3"


@pytest.mark.parametrize(
    ("environment", "root"),
    [
        ({"TOOLWIRE_CACHE_DIR": "~/tw", "XDG_CACHE_HOME": "~/xdg"}, "home/tw"),
        ({"XDG_CACHE_HOME": "~/xdg"}, "home/xdg/toolwire"),
        ({}, "home/.cache/toolwire"),
    ],
    ids=["toolwire", "xdg", "default"],
)
def test_the_index_and_the_model_share_one_cache_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environment: dict[str, str], root: str
) -> None:
    """The index read the environment on its own: ``~`` stayed a directory named ``~`` under
    the working directory, and XDG_CACHE_HOME was ignored."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("TOOLWIRE_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    assert default_cache_dir() == tmp_path / root / "index"
    assert model_cache_dir() == tmp_path / root / "models"


def test_bm25_ranks_more_and_title_matches_first(tmp_path: Path) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    hits = index.search("how to sort a list", limit=10)
    ids = [hit.page.id for hit in hits]
    # "sorting#1" matches sort (title, stemmed), list; the others match "sort" only.
    assert ids[0] == "sorting#1"
    assert set(ids) == {"sorting#1", "sorting#2", "sorting#3", "json#1"}
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert index.count("how to sort a list") == 4
    assert len(index.search("sort", limit=2)) == 2


def test_queries_never_break_on_fts_syntax_and_stopwords_match_nothing(tmp_path: Path) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    assert query_terms('What is "sort" AND -NOT: the (key)?') == ["sort", "key"]
    assert index.search('"unbalanced AND (') == []
    assert index.search("what is the") == [] and index.count("what is the") == 0


@pytest.mark.parametrize(
    "query",
    [
        '"sort',
        'sort"',
        'sort "json"',
        "(sort OR",
        "sort)",
        "sort NEAR json",
        "NEAR(sort json, 2)",
        "sort*",
        "*",
        "-sort",
        "sort - json",
        "title:sort",
        "^sort",
        "sort AND NOT",
        "{sort json}",
    ],
)
def test_user_text_never_breaks_the_fts_query(tmp_path: Path, query: str) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    hits = index.search(query)
    assert index.count(query) == len(hits)
    if "sort" in query:
        assert {hit.page.id for hit in hits} >= {"sorting#1", "sorting#2", "sorting#3"}


def test_neighbors_stay_in_the_document(tmp_path: Path) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    assert [p.id for p in index.neighbors("sorting", 2)] == ["sorting#1", "sorting#3"]
    assert [p.id for p in index.neighbors("sorting", 1)] == ["sorting#2"]
    assert index.neighbors("zip", 1) == []
    assert index.page("json", 1) is not None and index.page("json", 2) is None
    assert [p.id for p in index.iter_pages()][:2] == ["sorting#1", "sorting#2"]


def test_concurrent_queries_from_threads(tmp_path: Path) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    errors: list[BaseException] = []
    results: list[list[str]] = []

    def worker() -> None:
        try:
            for _ in range(50):
                results.append([hit.page.id for hit in index.search("sort keys")])
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 200 and all(ids == results[0] for ids in results)


def test_the_index_file_is_read_only_for_queries(tmp_path: Path) -> None:
    index = PageIndex.open(StaticPageSource("demo", _pages()), cache_dir=tmp_path)
    with pytest.raises(sqlite3.OperationalError):
        index._connection.execute("DELETE FROM pages")
