"""Tool selection and domain routing end to end on the embedded model (marked ``local_model``).

Messages from the labelled set's synthetic domains that a careful reader finds unambiguous; the
full measurement is ``bench/eval_selection.py``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from toolwire import App
from toolwire.llm import create_language_model
from toolwire.settings import LLMSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "selection"))

from labelled import selection_app

pytestmark = pytest.mark.local_model


CORE = ("retrieve", "choose", "confirm")
WORDS = ("retrieve", "decisive_words", "choose", "confirm")
ENGLISH = (*CORE, "english.several_requests", "english.leading_action")
CALL_CONFIRM = ("retrieve", "call", "confirm")
TRIANGLE = "What is the area of a triangle with a base of 10 cm and a height of 7 cm?"


@asynccontextmanager
async def app_with(directory: Path, steps: tuple[str, ...] = CORE) -> AsyncIterator[App]:
    """The labelled set's app on the embedded model, with these selection steps (and the
    project's default domain, which answers what fits no domain)."""
    config = directory / "toolwire.yaml"
    config.write_text(
        f"default_domain: pharma\norchestrator:\n  selection:\n    steps: [{', '.join(steps)}]\n"
    )
    model = create_language_model(LLMSettings(), environ={})
    built = selection_app(config, llm=model)
    try:
        yield built
    finally:
        await built.aclose()
        await model.aclose()


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    async with app_with(tmp_path) as built:
        yield built


@pytest.mark.parametrize(
    ("domain", "message", "expected"),
    [
        ("geometry", TRIANGLE, ["geometry.triangle_area"]),
        ("finance", "Write me a short poem about autumn leaves.", []),
    ],
)
async def test_the_embedded_model_selects_the_right_tools(
    app: App, domain: str, message: str, expected: list[str]
) -> None:
    answer = await app.ask(message, domain=domain)

    assert answer.trace.selection is not None
    assert answer.trace.selection.activated == expected
    assert [run.tool_name for run in answer.trace.tools] == expected


@pytest.mark.parametrize(
    ("domain", "message", "expected"),
    [
        (  # two requests joined by ", and": the second choice finds the second one's tool
            "geometry",
            "How far is the point (1, 1) from (4, 5), and how many miles is 5 km?",
            ["geometry.length_conversion", "geometry.point_distance"],
        ),
        (
            "finance",
            "I make 70,000 a year in Canada. How much income tax is that, and what's the sales "
            "tax on a 900 dollar phone in Ontario?",
            ["finance.income_tax", "finance.sales_tax"],
        ),
    ],
)
async def test_the_english_pack_selects_a_tool_for_each_joined_request(
    tmp_path: Path, domain: str, message: str, expected: list[str]
) -> None:
    async with app_with(tmp_path, ENGLISH) as app:
        answer = await app.ask(message, domain=domain)

    assert answer.trace.selection is not None
    assert sorted(answer.trace.selection.activated) == expected  # any order
    assert sorted(run.tool_name for run in answer.trace.tools) == expected


async def test_a_tool_its_words_point_at_runs_in_three_calls_without_a_choice(
    tmp_path: Path,
) -> None:
    async with app_with(tmp_path, WORDS) as app:
        answer = await app.ask(TRIANGLE, domain="geometry")

    selection = answer.trace.selection
    assert selection is not None
    assert selection.why("geometry.triangle_area").startswith("its words decided")
    assert selection.step("choose") is None
    assert selection.activated == ["geometry.triangle_area"]
    assert [call.purpose for call in answer.model_calls] == ["suitability", "parameters", "answer"]
    assert "35" in answer.text


async def test_a_request_to_cancel_is_not_taken_by_the_search_its_words_match(
    tmp_path: Path,
) -> None:
    """The hotel search's own question accepts it; the leading-action step drops it."""
    async with app_with(tmp_path, ENGLISH) as app:
        answer = await app.ask("Cancel my hotel reservation in Vienna.", domain="travel")

    selection = answer.trace.selection
    assert selection is not None
    assert selection.answers.get("travel.hotel_search") is True  # confirmed on its question …
    assert selection.why("travel.hotel_search").endswith(  # … and dropped
        "dropped: the model named the bare action 'cancel' over it"
    )
    assert selection.activated == [] and answer.trace.tools == []


async def test_a_message_naming_no_domain_is_routed_to_the_one_it_is_about(app: App) -> None:
    answer = await app.ask("How many euros do I get for 200 US dollars at today's rate?")

    assert answer.domain == "finance"
    assert answer.routing is not None and answer.routing.domain == "finance"


async def test_an_off_topic_message_sharing_a_word_with_a_domain_fits_none(app: App) -> None:
    answer = await app.ask("Tell me a joke about cats.")

    assert answer.routing is not None and answer.routing.domain is None
    assert answer.routing.decided_by in ("model", "no tool takes it")
    assert answer.domain == app.config.default_domain  # it answers what fits no domain


async def test_a_called_and_confirmed_tool_runs_and_an_off_topic_message_runs_none(
    tmp_path: Path,
) -> None:
    async with app_with(tmp_path, CALL_CONFIRM) as app:
        area = await app.ask(TRIANGLE, domain="geometry")
        poem = await app.ask("Write me a short poem about autumn leaves.", domain="finance")

    assert area.trace.selection is not None
    assert area.trace.selection.why("geometry.triangle_area").startswith("called")
    assert [run.tool_name for run in area.trace.tools] == ["geometry.triangle_area"]
    assert "35" in area.text
    assert poem.trace.selection is not None and poem.trace.selection.activated == []
