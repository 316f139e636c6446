"""The corpus: real documentation text, paged and indexed once per interpreter."""

from __future__ import annotations

from pathlib import Path
from pydoc_data.topics import topics

from toolwire_pydocs.corpus import MODULES, PydocsSource, module_pages, topic_pages

from toolwire.search import PageIndex


def test_every_reference_topic_and_module_contributes_pages() -> None:
    pages = list(PydocsSource().load_pages())
    doc_ids = {page.doc_id for page in pages}
    assert {f"ref-{topic}" for topic in topics} <= doc_ids
    assert {f"lib-{module}" for module in MODULES} <= doc_ids
    assert len(pages) > 500 and all(len(page.text) <= 1500 for page in pages)


def test_pages_carry_the_interpreters_own_text() -> None:
    for_pages = [page for page in topic_pages() if page.doc_id == "ref-for"]
    assert for_pages[0].title == 'The "for" statement (language reference)'
    assert for_pages[0].text.startswith(topics["for"].strip()[:200])
    json_text = "\n".join(page.text for page in module_pages("json"))
    assert "json.dumps(obj, *, skipkeys=False" in json_text and "sort_keys" in json_text


def test_fingerprint_is_cheap_and_depends_on_the_module_list() -> None:
    assert PydocsSource().fingerprint() == PydocsSource().fingerprint()
    assert PydocsSource(["json"]).fingerprint() != PydocsSource().fingerprint()


def test_the_index_is_built_once_then_reused(tmp_path: Path) -> None:
    source = PydocsSource(["json", "heapq"])
    first = PageIndex.open(source, cache_dir=tmp_path)
    assert not first.reused
    assert PageIndex.open(source, cache_dir=tmp_path).reused
    hits = first.search("heap push pop smallest item", limit=3)
    assert hits[0].page.doc_id == "lib-heapq"
