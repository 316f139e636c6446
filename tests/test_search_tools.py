"""The context search and neighbour search tools: relevance checks, brute force, the cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire import AGENT_COORDINATOR_MARKER, PromptAndContext
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.search import (
    AbstractContextSearchTool,
    AbstractNeighborPageSearchTool,
    Page,
    PageIndex,
    PageRelevance,
    SearchParams,
    SearchStrategy,
    StaticPageSource,
    page_refs,
)
from toolwire.testing import ScriptedModel
from toolwire.tools import ResultKind, validate_tool_class


def _corpus() -> list[Page]:
    pages = [
        Page(doc_id="guide", page_no=n, title="Guide", text=f"Guide page {n} about widgets.")
        for n in range(1, 6)
    ]
    pages[2] = Page(doc_id="guide", page_no=3, title="Guide", text="Widgets: the answer is 42.")
    pages.append(Page(doc_id="other", page_no=1, title="Other", text="Gadgets, not the answer."))
    return pages


@pytest.fixture
def index(tmp_path: Path) -> PageIndex:
    return PageIndex.open(StaticPageSource("tools", _corpus()), cache_dir=tmp_path)


def _model(word: str = "answer") -> ScriptedModel:
    """Judges a page relevant when its text contains ``word``."""

    def verdict(text: str, instruction: str) -> dict[str, bool]:
        page = text.rpartition("\n\nQuestion: ")[0]
        return {"relevant": word in page}

    return ScriptedModel().on_extract(PageRelevance, verdict, purpose=Purpose.RELEVANCE)


def _search_tool(index: PageIndex, model: ScriptedModel, cap: int | None = None):  # type: ignore[no-untyped-def]
    class Search(AbstractContextSearchTool):
        candidate_page_count = 3

        def get_index(self) -> PageIndex:
            return index

        def get_max_brute_force_page_count(self) -> int | None:
            return cap

    validate_tool_class(Search)
    return Search(model)


def _neighbor_tool(index: PageIndex, model: ScriptedModel):  # type: ignore[no-untyped-def]
    class Neighbors(AbstractNeighborPageSearchTool):
        def get_index(self) -> PageIndex:
            return index

    validate_tool_class(Neighbors)
    return Neighbors(model)


async def test_keyword_hits_are_checked_one_call_per_page(index: PageIndex) -> None:
    model = _model()
    tool = _search_tool(index, model)
    outcome = await tool.search_pages("widgets answer", "What is the widget answer?")
    assert outcome.strategy is SearchStrategy.KEYWORD_CHECKED
    assert outcome.checked == 3 and model.purposes == [Purpose.RELEVANCE] * 3
    assert {page.id for page in outcome.pages} == {"guide#3", "other#1"}
    # every check: the page tagged as external content first, the question last
    for call in model.calls:
        assert call.inputs["text"].startswith('<external_content source="page ')
        assert call.inputs["text"].endswith(
            "</external_content>\n\nQuestion: What is the widget answer?"
        )


async def test_execute_returns_rendered_pages_and_uses_the_coordinator_task(
    index: PageIndex,
) -> None:
    model = _model()
    tool = _search_tool(index, model)
    text = f"The user's long original message{AGENT_COORDINATOR_MARKER}widget answer"
    result = await tool.execute_with_result(SearchParams(), text)
    assert result.kind is ResultKind.CONTEXT
    assert set(page_refs(result.text)) == {("guide", 3), ("other", 1)}
    assert model.calls[0].inputs["text"].endswith("Question: widget answer")


async def test_brute_force_scans_when_nothing_matches_and_stops_early(index: PageIndex) -> None:
    model = _model(word="42")
    tool = _search_tool(index, model)
    outcome = await tool.search_pages("zzz", "unmatched words")
    assert outcome.strategy is SearchStrategy.BRUTE_FORCE
    assert [page.id for page in outcome.pages] == ["guide#3"]
    assert outcome.checked == 6 == len(model.calls)  # all pages, in batches of 4


async def test_cap_refuses_the_full_scan_without_any_model_call(index: PageIndex) -> None:
    model = ScriptedModel()  # any call would raise UnscriptedCallError
    tool = _search_tool(index, model, cap=5)  # the domain has 6 pages
    outcome = await tool.search_pages("zzz", "unmatched words")
    assert outcome.strategy is SearchStrategy.BRUTE_FORCE_REFUSED
    assert outcome.pages == [] and model.calls == []


async def test_cap_skips_per_page_checks_for_a_large_hit_set(index: PageIndex) -> None:
    model = ScriptedModel()
    tool = _search_tool(index, model, cap=4)
    outcome = await tool.search_pages("widgets", "widgets?")  # 5 guide pages match
    assert outcome.strategy is SearchStrategy.KEYWORD_UNCHECKED and outcome.hit_count == 5
    assert len(outcome.pages) == tool.result_page_count and model.calls == []


async def test_hit_sets_within_the_cap_are_still_checked(index: PageIndex) -> None:
    model = _model()
    tool = _search_tool(index, model, cap=5)
    outcome = await tool.search_pages("widgets", "widgets?")
    assert outcome.strategy is SearchStrategy.KEYWORD_CHECKED and len(model.calls) == 3


async def test_small_domain_under_the_cap_may_still_brute_force(index: PageIndex) -> None:
    model = _model(word="42")
    tool = _search_tool(index, model, cap=100)
    outcome = await tool.search_pages("zzz", "unmatched")
    assert outcome.strategy is SearchStrategy.BRUTE_FORCE and outcome.pages


async def test_invalid_verdicts_drop_the_page_and_outages_raise(index: PageIndex) -> None:
    tool = _search_tool(index, ScriptedModel().on_extract(PageRelevance, None))
    assert (await tool.search_pages("widgets", "q")).pages == []
    failing = ScriptedModel().on_extract(PageRelevance, ModelError("relevance", "down"))
    with pytest.raises(ModelError):
        await _search_tool(index, failing).search_pages("widgets", "q")


def test_search_tools_never_volunteer(index: PageIndex) -> None:
    tool = _search_tool(index, ScriptedModel())
    assert tool.executable_instruction() == (
        "search: always false – runs only on coordinator-designated tasks"
    )


async def test_neighbors_of_earlier_hits_are_checked_and_seen_pages_skipped(
    index: PageIndex,
) -> None:
    model = _model()
    tool = _neighbor_tool(index, model)
    earlier = PromptAndContext(
        prompt="q",
        context=index.page("guide", 2).render() + "\n\n" + index.page("guide", 4).render(),  # type: ignore[union-attr]
        tool_name="search",
        task_no="1",
    )
    result = await tool.execute_with_prior_context(
        SearchParams(), f"original{AGENT_COORDINATOR_MARKER}the answer", {"1:search": [earlier]}
    )
    # neighbours of guide#2 and guide#4 not already seen: guide#1, guide#3, guide#5
    assert [page_refs(call.inputs["text"])[0] for call in model.calls] == [
        ("guide", 1),
        ("guide", 3),
        ("guide", 5),
    ]
    assert page_refs(result.text) == [("guide", 3)]


async def test_neighbor_search_reads_hits_from_its_execution_text_too(index: PageIndex) -> None:
    model = _model(word="Guide page 2")
    tool = _neighbor_tool(index, model)
    text = f"Pages consulted: [page guide#1] Guide{AGENT_COORDINATOR_MARKER}guide"
    result = await tool.execute_with_prior_context(SearchParams(), text, {})
    assert page_refs(result.text) == [("guide", 2)]


async def test_neighbor_search_without_earlier_hits_makes_no_call(index: PageIndex) -> None:
    model = ScriptedModel()
    tool = _neighbor_tool(index, model)
    result = await tool.execute_with_prior_context(SearchParams(), "question", {})
    assert result.text == "" and model.calls == []


async def test_neighbor_search_is_a_context_consumer(index: PageIndex) -> None:
    tool = _neighbor_tool(index, ScriptedModel())
    with pytest.raises(TypeError, match="context consumer"):
        tool.execute_with_result(SearchParams(), "x")
