"""The gatekeeper path through the real orchestrator, on a small in-memory domain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolwire
from toolwire import ChatbotTool, TaskStatus
from toolwire.app import App
from toolwire.errors import ModelError
from toolwire.events import CoordinatorFinished, DeepSearchRound, TaskStarted
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.orchestrator.streaming import Answered
from toolwire.search import (
    AbstractContextSearchTool,
    AbstractDeepSearchCoordinatorTool,
    AbstractNeighborPageSearchTool,
    DeepSearchSettings,
    Page,
    PageIndex,
    PageRelevance,
    StaticPageSource,
)
from toolwire.testing import ScriptedModel

PAGES = [
    Page(doc_id="manual", page_no=1, title="Manual", text="Widgets are configured in one file."),
    Page(doc_id="manual", page_no=2, title="Manual", text="The timeout setting defaults to 30."),
    Page(doc_id="faq", page_no=1, title="FAQ", text="Gadgets are unrelated to widgets."),
]


class _Corpus:
    """The index the tools below search; set by the ``app`` fixture (tools take no index arg)."""

    index: PageIndex


class Search(AbstractContextSearchTool):
    def get_index(self) -> PageIndex:
        return _Corpus.index


class Neighbors(AbstractNeighborPageSearchTool):
    def get_index(self) -> PageIndex:
        return _Corpus.index


class Deep(AbstractDeepSearchCoordinatorTool):
    def __init__(
        self, search: Search, neighbors: Neighbors, settings: DeepSearchSettings | None = None
    ) -> None:
        super().__init__(settings)
        self.search, self.neighbors = search, neighbors

    def get_search_tool(self) -> ChatbotTool[Any]:
        return self.search

    def get_neighbor_search_tool(self) -> ChatbotTool[Any] | None:
        return self.neighbors


class DocsPlugin:
    @toolwire.hookimpl
    def register_domains(self, register: Any) -> None:
        register(
            toolwire.DomainSpec(
                name="docs",
                prompt_types=["definition", "how_to"],
                rag_tool="search",
                deep_fallback={"how_to": "deep"},
            )
        )

    @toolwire.hookimpl
    def register_tools(self, register: Any) -> None:
        register(Search, domain="docs", priority=10)
        register(Neighbors, domain="docs", priority=20)
        register(Deep, domain="docs", priority=30)


@pytest.fixture
def model(block_model_requests: None) -> ScriptedModel:
    model = ScriptedModel().on_suitability([])
    model.on_extract(
        PageRelevance,
        lambda text, _: {"relevant": "widgets" in text.lower() or "timeout" in text},
        purpose=Purpose.RELEVANCE,
    )
    return model.on_answer()


@pytest.fixture
def app(toolwire_app_factory: Any, model: ScriptedModel, tmp_path: Path) -> App:
    _Corpus.index = PageIndex.open(StaticPageSource("gate", PAGES), cache_dir=tmp_path)
    config = "default_domain: docs\nsessions:\n  store: memory\n"
    app: App = toolwire_app_factory(plugins=[DocsPlugin()], config=config, llm=model)
    return app


async def test_sufficient_context_ends_at_the_gatekeeper(app: App, model: ScriptedModel) -> None:
    model.on_classify("how_to").on_gatekeeper(True)
    answer = await app.ask("How do I configure widgets?")
    assert model.purposes.count(Purpose.GATEKEEPER) == 1
    assert answer.trace.sub_tasks == [] and [r.reason for r in answer.trace.tools] == ["rag"]


async def test_sufficient_context_needs_no_classification(app: App, model: ScriptedModel) -> None:
    """The prompt type only chooses the deep fallback: the question is classified once the
    gatekeeper found its context short, so a sufficient context costs no classification call
    (a domain without a fallback for some type used to classify every question first)."""
    model.on_gatekeeper(True)
    answer = await app.ask("What is a widget?")
    assert model.purposes == [Purpose.GATEKEEPER, Purpose.ANSWER]
    assert answer.trace.prompt_type == ""


async def test_a_short_context_of_a_type_without_deep_fallback_ends_at_its_classification(
    app: App, model: ScriptedModel
) -> None:
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["more"]))
    model.on_classify("definition")
    answer = await app.ask("What is a widget?")
    assert model.purposes == [Purpose.GATEKEEPER, Purpose.CLASSIFICATION, Purpose.ANSWER]
    assert answer.trace.prompt_type == "definition" and answer.trace.sub_tasks == []
    [classified] = model.calls_for(Purpose.CLASSIFICATION)
    assert classified.inputs["text"] == "What is a widget?"


async def test_a_failed_classification_leaves_the_type_empty_and_runs_no_deep_search(
    app: App, model: ScriptedModel
) -> None:
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["more"]))
    model.on_classify(lambda text, allowed: ModelError("classification", "down"))
    answer = await app.ask("How do I configure widgets?")
    assert answer.kind == "answer" and answer.trace.sub_tasks == []
    assert any("prompt type classification failed" in line for line in answer.failures)


async def test_insufficient_context_runs_the_cheap_search_and_skips_the_full_one(
    app: App, model: ScriptedModel
) -> None:
    model.on_classify("how_to")
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["timeout default"]), times=1)
    model.on_gatekeeper(True)
    answer = await app.ask("How do I configure widgets?")  # the keywords miss the timeout page
    deep = answer.trace.sub_tasks
    assert [(t.task_no, t.status, t.required_tool_names) for t in deep] == [
        ("1.1.n", TaskStatus.DONE, ["docs.neighbors"]),
        ("1.1.s", TaskStatus.SKIPPED, ["docs.search"]),
    ]
    assert deep[1].owner_coordinator_name == "docs.deep"
    assert "The timeout setting defaults to 30." in answer.text  # the neighbour page reached it
    assert "- timeout default: found on [page manual#2]" in answer.text
    assert [r.reason for r in answer.trace.tools] == ["rag", "deep_fallback"]


async def test_a_watched_deep_search_streams_its_round_and_the_gatekeepers_gap(
    app: App, model: ScriptedModel
) -> None:
    model.on_classify("how_to")
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["timeout default"]), times=1)
    model.on_gatekeeper(True)

    events = [event async for event in app.ask_stream("How do I configure widgets?")]

    rounds = [event for event in events if isinstance(event, DeepSearchRound)]
    assert [(e.task_no, e.round, e.tool_name, e.missing) for e in rounds] == [
        ("1", 1, "docs.deep", ["timeout default"])
    ]
    # the deep fallback decomposes after the round is announced, then its subtasks run
    after = events[events.index(rounds[0]) :]
    decomposed = [e for e in after if isinstance(e, CoordinatorFinished)]
    assert [(e.record.coordinator_name, e.new_subtasks) for e in decomposed] == [
        ("docs.deep", ["1.1.n", "1.1.s"])
    ]
    subtasks = [e.task_no for e in events if isinstance(e, TaskStarted)]
    assert subtasks == ["1", "1.1.n"]  # 1.1.s was skipped: the neighbour page was enough
    assert isinstance(events[-1], Answered)


async def test_the_rag_search_the_gatekeeper_judges_makes_no_relevance_call(
    app: App, model: ScriptedModel
) -> None:
    """The gatekeeper reads the search's passages anyway: the search hands on its best ones and
    leaves the judgement to it (issue 33), all of them, the page no relevance check kept too."""
    model.on_gatekeeper(True)
    answer = await app.ask("What is a widget?")
    assert Purpose.RELEVANCE not in model.purposes
    [gatekeeper] = model.calls_for(Purpose.GATEKEEPER)
    assert "Gadgets are unrelated to widgets." in str(gatekeeper.inputs)
    assert answer.kind == "answer"


async def test_the_deep_searchs_own_searches_keep_their_relevance_calls(
    app: App, model: ScriptedModel
) -> None:
    """Only the RAG tool's result is judged by the gatekeeper as it stands; a deep search's
    targeted searches still check their pages."""
    model.on_classify("how_to")
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["timeout default"]), times=1)
    model.on_gatekeeper(True)
    await app.ask("How do I configure widgets?")
    first_relevance = model.purposes.index(Purpose.RELEVANCE)
    assert first_relevance > model.purposes.index(Purpose.GATEKEEPER)


async def test_a_domain_without_a_deep_fallback_keeps_the_searchs_relevance_call(
    toolwire_app_factory: Any, model: ScriptedModel, tmp_path: Path
) -> None:
    """No gatekeeper judges the context there, so the search checks its pages itself."""

    class Plain(DocsPlugin):
        @toolwire.hookimpl
        def register_domains(self, register: Any) -> None:
            register(toolwire.DomainSpec(name="docs", rag_tool="search"))

    _Corpus.index = PageIndex.open(StaticPageSource("gate", PAGES), cache_dir=tmp_path)
    config = "default_domain: docs\nsessions:\n  store: memory\n"
    app = toolwire_app_factory(plugins=[Plain()], config=config, llm=model)
    await app.ask("What is a widget?")
    assert model.purposes == [Purpose.RELEVANCE, Purpose.ANSWER]


async def test_a_spent_call_budget_ends_the_deep_search_without_judging_again(
    toolwire_app_factory: Any, model: ScriptedModel, tmp_path: Path
) -> None:
    """The deep search stops itself once the question made ``call_budget`` model calls; the
    loop used to run its fallback anyway and ask the gatekeeper again, past the budget."""
    _Corpus.index = PageIndex.open(StaticPageSource("gate", PAGES), cache_dir=tmp_path)
    config = (
        "default_domain: docs\nsessions:\n  store: memory\n"
        "tools:\n  - {name: deep, domain: docs, settings: {call_budget: 1}}\n"
    )
    app = toolwire_app_factory(plugins=[DocsPlugin()], config=config, llm=model)
    model.on_classify("how_to")
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["timeout default"]))

    answer = await app.ask("How do I configure widgets?")

    assert model.purposes.count(Purpose.GATEKEEPER) == 1
    assert [r.reason for r in answer.trace.tools] == ["rag"] and answer.trace.sub_tasks == []
    assert [note.split(":")[0] for note in answer.trace.notes] == [
        "gatekeeper",
        "deep search stopped",
    ]
