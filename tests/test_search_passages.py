"""A search hands on the passage of each hit that matches the query, not the whole page
(issue 33): fewer tokens for the relevance check, the gatekeeper and the answer to read."""

from __future__ import annotations

from pathlib import Path

from toolwire.llm import Purpose
from toolwire.search import AbstractContextSearchTool, Page, PageIndex, StaticPageSource
from toolwire.search.passages import ELLIPSIS, passage
from toolwire.search.relevance import PageRelevance
from toolwire.testing import ScriptedModel

FILLER = ["Unrelated text about gardening and the weather. " * 5 for _ in range(4)]
ANSWER = "To sort the keys, pass sort_keys=True to json.dumps."


def _page(*paragraphs: str) -> Page:
    return Page(doc_id="lib-json", page_no=2, title="json", text="\n\n".join(paragraphs))


def test_a_short_page_is_its_own_passage() -> None:
    page = _page("json.dumps sorts keys with sort_keys.")
    assert passage(page, "sort keys json", 700) is page


def test_the_paragraph_with_the_query_terms_is_kept_and_the_cuts_are_marked() -> None:
    page = _page(FILLER[0], FILLER[1], ANSWER, FILLER[2], FILLER[3])
    cut = passage(page, "How do I sort the keys when I serialize to JSON?", 300)
    assert ANSWER in cut.text and len(cut.text) <= 300 + 2 * len(ELLIPSIS) + 2
    assert cut.text.startswith(f"{ELLIPSIS}\n") and cut.text.endswith(f"\n{ELLIPSIS}")
    assert cut.ref == page.ref and cut.title == page.title  # still the page, by reference


def test_neighbouring_paragraphs_fill_the_passage_up_to_its_size() -> None:
    page = _page(ANSWER, "The indent argument pretty-prints json output.", *FILLER)
    cut = passage(page, "json sort keys indent", 400)
    assert cut.text.startswith(ANSWER) and "indent argument" in cut.text
    assert not cut.text.startswith(ELLIPSIS) and cut.text.endswith(ELLIPSIS)


def test_a_page_without_any_query_term_stays_whole() -> None:
    page = _page(*FILLER)
    assert passage(page, "heapq nsmallest", 200) is page


def test_one_overlong_paragraph_is_cut_around_its_first_match() -> None:
    long = "word " * 200 + "nsmallest returns the n smallest elements. " + "more " * 200
    cut = passage(_page(long), "heapq nsmallest", 300)
    assert "nsmallest returns" in cut.text
    assert cut.text.startswith(ELLIPSIS) and cut.text.endswith(ELLIPSIS)
    assert len(cut.text) <= 300 + 2 * (len(ELLIPSIS) + 1)


class _Search(AbstractContextSearchTool):
    index: PageIndex

    def get_index(self) -> PageIndex:
        return self.index


async def test_the_search_judges_and_hands_on_passages(tmp_path: Path) -> None:
    page = _page(FILLER[0], FILLER[1], ANSWER, FILLER[2], FILLER[3])
    _Search.index = PageIndex.open(StaticPageSource("passages", [page]), cache_dir=tmp_path)
    judged: list[str] = []

    def relevant(text: str, instruction: str) -> dict[str, bool]:
        judged.append(text)
        return {"relevant": True}

    model = ScriptedModel().on_extract(PageRelevance, relevant, purpose=Purpose.RELEVANCE)
    tool = _Search(model)
    tool.passage_chars = 200  # the answer fits, no filler paragraph besides it
    outcome = await tool.search_pages("sort keys json", "How do I sort the keys?")
    [kept] = outcome.pages
    assert ANSWER in kept.text and "gardening" not in kept.text
    assert "gardening" not in judged[0] and ANSWER in judged[0]

    whole = _Search(model)
    whole.passage_chars = None
    assert (await whole.search_pages("sort keys json", "q")).pages == [page]
