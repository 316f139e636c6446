"""The ``decisive_words`` selection step (before ``choose``): a best match the task's words
point at clearly is asked its own question before any choice, with the scripted model. Steps
``[retrieve, decisive_words, choose, confirm]``."""

from __future__ import annotations

from typing import Any

import pytest

from orchestration_kit import EchoTool, domain, selection_of
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.selection.lexical import Document, LexicalIndex
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for

WORDS = ["retrieve", "decisive_words", "choose", "confirm"]

FLIGHTS_TASK = "Search flights from Paris to Rome on Friday."
RUNNER_UP_TASK = "Search flights near a hotel."
"""Two words for the flights, one for the hotels: decisive."""


def travel(model: ScriptedModel, steps: list[str] = WORDS) -> Any:
    tools = (
        EchoTool(
            "flights",
            "AF 1234",
            about="Searches flights between two cities on a date.",
            question="Does the message ask to search for flights?",
        ),
        EchoTool(
            "weather",
            "sunny",
            about="The current weather in a city.",
            question="Does the message ask for the current weather?",
        ),
        EchoTool(
            "forecast",
            "rain",
            about="The weather forecast for the coming days.",
            question="Does the message ask for a weather forecast?",
        ),
        EchoTool(
            "hotels",
            "Hotel Roma",
            about="Finds hotels in a city.",
            question="Does the message ask to find a hotel?",
        ),
    )
    settings = OrchestratorSettings(selection=SelectionSettings(steps=steps))
    return conversation_for(domain(), *tools, model=model, settings=settings)


async def test_a_match_the_words_point_at_is_asked_its_question_without_a_choice() -> None:
    model = ScriptedModel().on_suitability(["flights"]).on_answer()

    answer = await travel(model).ask(FLIGHTS_TASK)

    assert model.purposes == [Purpose.SUITABILITY, Purpose.ANSWER]  # confirm asks it no more
    [confirmation] = model.calls_for(Purpose.SUITABILITY)
    assert confirmation.inputs["tool_names"] == ["demo.flights"]
    selection = selection_of(answer)
    assert selection.step("choose") is None  # no choice made
    assert selection.activated == ["demo.flights"]
    assert selection.why("demo.flights") == "its words decided, confirmed on its question"
    assert selection.why("demo.hotels") == "not chosen among the candidates"
    assert selection.describe() == "retrieve (4 candidate(s), all) → decisive_words"
    assert [run.tool_name for run in answer.trace.tools] == ["demo.flights"]


async def test_more_shared_words_well_ahead_of_the_runner_up_decide() -> None:
    model = ScriptedModel().on_suitability(["flights"]).on_answer()

    answer = await travel(model).ask(RUNNER_UP_TASK)

    assert selection_of(answer).why("demo.flights").startswith("its words decided")
    assert Purpose.CHOICE not in model.purposes


async def test_refused_the_model_chooses_and_the_refused_answer_stands() -> None:
    model = ScriptedModel().on_choose(["flights", "hotels"]).on_answer()
    model.on_suitability(["hotels"])

    answer = await travel(model).ask(FLIGHTS_TASK)

    assert model.purposes[:3] == [Purpose.SUITABILITY, Purpose.CHOICE, Purpose.SUITABILITY]
    asked = [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)]
    assert asked == [["demo.flights"], ["demo.hotels"]]  # the refused one is not asked again
    selection = selection_of(answer)
    assert selection.answers == {"demo.flights": False, "demo.hotels": True}
    assert selection.activated == ["demo.hotels"]
    assert selection.why("demo.flights") == (
        "its words pointed at it, refused on its question; named by the choice"
    )
    assert selection.why("demo.hotels") == "named by the choice; confirmed on its question"


async def test_refused_and_chosen_alone_nothing_runs_and_nothing_is_asked_again() -> None:
    model = ScriptedModel().on_choose(["flights"]).on_suitability([]).on_answer("no tool")

    answer = await travel(model).ask(FLIGHTS_TASK)

    assert model.purposes == [Purpose.SUITABILITY, Purpose.CHOICE, Purpose.ANSWER]
    assert selection_of(answer).activated == []
    assert answer.trace.tools == []


@pytest.mark.parametrize(
    ("task", "steps"),
    [
        ("Any hotel in Rome?", WORDS),  # one shared word
        (FLIGHTS_TASK, ["retrieve", "choose", "confirm"]),  # the step not listed
        ("Search flights, find hotels.", WORDS),  # two words each
        ("Weather forecast or current weather in Rome?", WORDS),  # two words each, close scores
    ],
    ids=["one-shared-word", "not-listed", "as-many-words-elsewhere", "two-words-each"],
)
async def test_without_decisive_words_the_model_chooses(task: str, steps: list[str]) -> None:
    model = ScriptedModel().on_choose(["weather"]).on_suitability(["weather"]).on_answer()

    answer = await travel(model, steps).ask(task)

    assert model.purposes[:2] == [Purpose.CHOICE, Purpose.SUITABILITY]
    selection = selection_of(answer)
    assert selection.step("decisive_words") is None
    assert selection.activated == ["demo.weather"]


async def test_without_a_confirmation_step_the_words_still_ask_their_question() -> None:
    model = ScriptedModel().on_suitability(["flights"]).on_answer()

    answer = await travel(model, ["retrieve", "decisive_words", "choose"]).ask(FLIGHTS_TASK)

    assert model.purposes == [Purpose.SUITABILITY, Purpose.ANSWER]
    assert selection_of(answer).activated == ["demo.flights"]


async def test_a_task_of_several_requests_gets_its_second_choice_after_the_words() -> None:
    model = ScriptedModel().on_choose(["hotels"]).on_suitability(["flights", "hotels"])
    model.on_answer()
    steps = [*WORDS, "english.several_requests"]

    answer = await travel(model, steps).ask(FLIGHTS_TASK + " Also a room for two nights?")

    assert model.purposes[:3] == [Purpose.SUITABILITY, Purpose.CHOICE, Purpose.SUITABILITY]
    [second] = model.calls_for(Purpose.CHOICE)
    assert "flights" not in second.inputs["options"]  # answered already
    selection = selection_of(answer)
    assert selection.why("demo.hotels") == "named by the second choice, confirmed on its question"
    assert selection.activated == ["demo.flights", "demo.hotels"]


async def test_a_failing_question_is_recorded_and_the_choice_runs_as_usual() -> None:
    model = ScriptedModel().on_suitability(ModelError(Purpose.SUITABILITY, "server down"), times=1)
    model.on_choose(["hotels"]).on_suitability(["hotels"]).on_answer()

    answer = await travel(model).ask(FLIGHTS_TASK)

    selection = selection_of(answer)
    assert selection.failure == (
        "decisive_words: a confirmation failed: model call for 'suitability' failed: server "
        "down (after 1 attempt(s))"
    )
    assert answer.failures == [f"task 1: {selection.failure}"]
    assert model.purposes[:3] == [Purpose.SUITABILITY, Purpose.CHOICE, Purpose.SUITABILITY]
    assert selection.activated == ["demo.hotels"]
    assert selection.why("demo.flights") == "not chosen among the candidates"


def test_shared_terms_counts_different_words_a_keys_documents_match() -> None:
    index = LexicalIndex(
        [
            Document("a", {"text": "search flights"}),
            Document("a", {"text": "cheap fares"}),
            Document("b", {"text": "flights status"}),
        ],
        {"text": 1.0},
    )

    assert index.shared_terms("Search cheap flights, flights!", "a") == [3]
    assert index.shared_terms("Search cheap flights", "b") == [1]
    assert index.shared_terms("Search cheap flights", "unknown") == [0]
    assert index.shared_terms("the of", "a") == [0]  # stopwords only
    assert index.shared_terms("Search cheap flights", "b", "unknown", "a") == [1, 0, 3]
    assert index.shared_terms("Search cheap flights", "a", "b", "a") == [3, 1, 3]  # a repeated key
