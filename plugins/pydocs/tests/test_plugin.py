"""The plugin as toolwire sees it: found through its entry point, wired, and answering."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from toolwire_pydocs.tools import DeepSearchTool, DocsSearchTool, NeighborPagesTool

from toolwire import TaskStatus
from toolwire.app import App
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.search import PageRelevance, SearchStrategy
from toolwire.testing import ScriptedModel

CONFIG = "default_domain: pydocs\nsessions:\n  store: memory\n"


@pytest.fixture
def model(block_model_requests: None) -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def app(model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    """Built exactly as a user's app: the plugin comes in through its entry point."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pydocs")
    config = tmp_path / "toolwire.yaml"
    config.write_text(CONFIG)
    yield App.load(config, llm=model)


def test_the_entry_point_contributes_the_domain_and_its_yaml_tools(app: App) -> None:
    domain = app.domains["pydocs"]
    assert domain.prompt_types == ["definition", "how_to", "comparison"]
    assert domain.rag_tool == "docs_search"
    assert sorted(app.tools) == [
        "pydocs.deep_search",
        "pydocs.docs_search",
        "pydocs.neighbor_pages",
    ]
    deep = app.tool("deep_search", "pydocs")
    assert isinstance(deep, DeepSearchTool)
    assert deep.get_search_tool() is app.tool("docs_search", "pydocs")  # injected by type
    assert isinstance(deep.get_neighbor_search_tool(), NeighborPagesTool)
    assert deep.settings.max_items_per_round == 2  # from the shipped YAML
    search = app.tool("docs_search", "pydocs")
    assert isinstance(search, DocsSearchTool) and search.get_max_brute_force_page_count() == 200


def test_no_pydocs_tool_ever_volunteers_for_a_user_question(app: App) -> None:
    for tool in app.tools.values():
        assert "always false – runs only on coordinator-designated tasks" in (
            tool.executable_instruction()
        )


def _relevant_if(word: str):  # type: ignore[no-untyped-def]
    def verdict(text: str, instruction: str) -> dict[str, bool]:
        return {"relevant": word in text.rpartition("\n\nQuestion: ")[0]}

    return verdict


def _script_search(model: ScriptedModel, kind: str, words: list[str], relevance: object) -> None:
    """A question no tool volunteers for, classified as ``kind`` (when the type is needed);
    the search looks for the request itself (no parameter call)."""
    model.on_suitability([])  # nothing volunteers
    model.on_classify(kind, words)
    model.on_extract(PageRelevance, relevance, purpose=Purpose.RELEVANCE)


async def test_a_sufficient_context_needs_neither_classification_nor_parameters(
    app: App, model: ScriptedModel
) -> None:
    """Two calls: the gatekeeper, which judges the search's passages, and the answer (the
    search looks for the request itself and leaves the judgement to the gatekeeper; the type
    would only have chosen a deep fallback)."""
    _script_search(model, "definition", ["nonlocal"], _relevant_if("nonlocal"))
    model.on_gatekeeper(True).on_answer()
    answer = await app.ask("What does the nonlocal statement do?")
    assert answer.kind == "answer" and '"nonlocal" statement' in answer.text
    assert model.purposes == [Purpose.GATEKEEPER, Purpose.ANSWER]
    assert [run.reason for run in answer.trace.tools] == ["rag"]


async def test_definition_questions_get_no_deep_search(app: App, model: ScriptedModel) -> None:
    _script_search(model, "definition", ["nonlocal"], _relevant_if("nonlocal"))
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["an example"]))
    model.on_answer()
    answer = await app.ask("What does the nonlocal statement do?")
    assert answer.kind == "answer" and '"nonlocal" statement' in answer.text
    assert model.purposes[-2:] == [Purpose.CLASSIFICATION, Purpose.ANSWER]
    assert answer.trace.prompt_type == "definition"
    assert [run.reason for run in answer.trace.tools] == ["rag"]
    assert answer.trace.sub_tasks == []


async def test_how_to_falls_back_to_the_neighbor_search_and_skips_the_full_search(
    app: App, model: ScriptedModel
) -> None:
    _script_search(model, "how_to", ["json"], _relevant_if("allow_nan"))
    missing = GatekeeperVerdict(sufficient=False, missing=["json.dump indent parameter"])
    model.on_gatekeeper(missing, times=1).on_gatekeeper(True)
    model.on_answer()
    answer = await app.ask("How do I write JSON with sorted keys and indentation?")
    assert answer.kind == "answer", answer.failures
    assert answer.failures == []
    deep = answer.trace.sub_tasks
    assert [(task.task_no, task.status) for task in deep] == [
        ("1.1.n", TaskStatus.DONE),
        ("1.1.s", TaskStatus.SKIPPED),  # the cheap search answered
    ]
    assert deep[0].required_tool_names == ["pydocs.neighbor_pages"]
    assert deep[0].task_prompt == "json.dump indent parameter"  # the request, data apart
    # the searches look for their requests themselves: no parameter call in the whole question
    assert model.calls_for(Purpose.PARAMETERS) == []
    assert [run.reason for run in answer.trace.tools] == ["rag", "deep_fallback"]
    assert model.purposes.count(Purpose.GATEKEEPER) == 2  # insufficient, then sufficient
    assert "Deep search results:\n- json.dump indent parameter: found on [page lib-json#" in (
        answer.text
    )


async def test_how_to_runs_the_full_search_when_the_neighbors_found_nothing(
    app: App, model: ScriptedModel
) -> None:
    # Only heapq.merge's page counts as relevant: the rag hit's neighbours are rejected.
    _script_search(model, "how_to", ["heapq"], _relevant_if("heapq.merge"))
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["heapq merge sorted inputs"]))
    model.on_answer()
    answer = await app.ask("How do I merge sorted lists with heapq?")
    deep = answer.trace.sub_tasks
    assert [(task.task_no, task.status) for task in deep] == [
        ("1.1.n", TaskStatus.DONE),
        ("1.1.s", TaskStatus.DONE),
    ]
    assert "heapq merge sorted inputs: found on [page lib-heapq#" in answer.text


async def test_the_deep_search_is_bounded_in_rounds(app: App, model: ScriptedModel) -> None:
    _script_search(model, "comparison", [], {"relevant": False})
    rounds = iter(range(1, 100))
    model.on_gatekeeper(
        lambda question, contexts: GatekeeperVerdict(
            sufficient=False, missing=[f"difference number {next(rounds)}"]
        )
    )
    model.on_answer("no answer in the documentation")
    answer = await app.ask("Compare lists and tuples")
    assert model.purposes.count(Purpose.GATEKEEPER) == 3  # orchestrator.deep_search_max_rounds
    assert [task.task_no for task in answer.trace.sub_tasks] == [
        "1.1.n", "1.1.s", "1.2.n", "1.2.s", "1.3.n", "1.3.s",
    ]  # fmt: skip
    assert answer.trace.sub_tasks[4].task_prompt == "difference number 3"
    assert model.calls_for(Purpose.PARAMETERS) == []
    assert [run.reason for run in answer.trace.tools].count("deep_fallback") == 3


async def test_a_large_hit_set_gets_no_per_page_model_calls(app: App, model: ScriptedModel) -> None:
    search = app.tool("docs_search", "pydocs")
    assert isinstance(search, DocsSearchTool)
    outcome = await search.search_pages("list object method", "What methods does a list have?")
    assert outcome.strategy is SearchStrategy.KEYWORD_UNCHECKED
    assert outcome.hit_count > 200 and len(outcome.pages) == 3
    assert model.calls == []
    refused = await search.search_pages("qqqzzzx", "nonsense")
    assert refused.strategy is SearchStrategy.BRUTE_FORCE_REFUSED and model.calls == []
