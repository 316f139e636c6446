"""A task that reads as several requests (``orchestrator.selection.several_requests``): every
chosen tool is asked its own question, and when one tool is confirmed a second choice among the
candidates not yet asked may add one (the scripted model)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestration_kit import EchoTool, confirmations, domain, selection_of
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.orchestrator import ConversationService
from toolwire.selection.requests import SEVERAL_REQUESTS, several_requests_pattern
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for

SEVERAL = "What is the sphere's volume, and how long is its equator?"
ONE = "What is the volume of a sphere with a 15 cm radius?"


def asking(model: ScriptedModel, *tools: EchoTool, **selection: object) -> ConversationService:
    settings = OrchestratorSettings(selection=SelectionSettings.model_validate(selection))
    return conversation_for(domain(), *tools, model=model, settings=settings)


def choices(model: ScriptedModel) -> list[list[str]]:
    """The options put to each choice call."""
    return [call.inputs["options"] for call in model.calls_for(Purpose.CHOICE)]


def tools() -> tuple[EchoTool, EchoTool, EchoTool]:
    return EchoTool("volume", "v"), EchoTool("circumference", "c"), EchoTool("area", "a")


# -- reading the task -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "task",
    [
        SEVERAL,
        "Is KL 1001 on time? How much luggage does KLM allow?",
        "Show me my to-do list, then add 'call the bank' to it.",
        "What meetings do I have on Monday? Also remind me on Sunday.",
        "Look up Peter's address and send him a note.",
        "Trains to Prague on Sunday, please; a hotel there too.",
        "How far is Graz from Vienna and is there a night train?",
    ],
)
def test_joined_requests_read_as_several(task: str) -> None:
    pattern = several_requests_pattern(SEVERAL_REQUESTS)
    assert pattern is not None and pattern.search(task)


@pytest.mark.parametrize(
    "task",
    [
        ONE,
        "Cancel my hotel reservation in Vienna.",
        "Convert 12 ft to metres and centimetres",
        "I have 2,000 saved and can add 100 a month. When do I reach 5,000?",
    ],
)
def test_a_single_request_reads_as_one(task: str) -> None:
    pattern = several_requests_pattern(SEVERAL_REQUESTS)
    assert pattern is not None and not pattern.search(task)


def test_an_empty_pattern_reads_every_task_as_one_request() -> None:
    assert several_requests_pattern("") is None


def test_a_pattern_that_does_not_compile_is_a_clear_configuration_error() -> None:
    with pytest.raises(ValidationError, match="several_requests is not a regular expression"):
        SelectionSettings(several_requests="(and")


# -- the second choice ------------------------------------------------------------------------


async def test_a_second_choice_adds_the_second_request_s_tool() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["circumference"])
    model.on_suitability(["volume", "circumference"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert model.purposes[:4] == [
        Purpose.CHOICE,
        Purpose.SUITABILITY,
        Purpose.CHOICE,
        Purpose.SUITABILITY,
    ]
    assert choices(model)[1] == ["circumference", "area"]  # the tools not asked yet
    assert confirmations(model) == [(["demo.volume"], None), (["demo.circumference"], None)]
    selection = selection_of(answer)
    assert selection.several_requests
    assert selection.second_choice == ["demo.circumference"]
    assert selection.activated == ["demo.volume", "demo.circumference"]
    assert selection.why("demo.circumference") == (
        "named by the second choice, confirmed on its question"
    )
    assert volume.texts and circumference.texts and not area.texts


async def test_a_second_choice_refused_on_its_question_does_not_run() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["area", "circumference"])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [(["demo.volume"], None), (["demo.area"], None)]  # first only
    selection = selection_of(answer)
    assert selection.second_choice == ["demo.area", "demo.circumference"]
    assert selection.activated == ["demo.volume"]
    assert selection.why("demo.area") == "named by the second choice, refused on its question"
    assert selection.why("demo.circumference") == "not chosen among the candidates"
    assert volume.texts and not area.texts and not circumference.texts


async def test_a_second_choice_that_names_nothing_leaves_the_confirmed_tool() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose([])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [(["demo.volume"], None)]
    assert selection_of(answer).second_choice == []
    assert selection_of(answer).activated == ["demo.volume"]


async def test_a_second_choice_naming_a_tool_already_asked_ignores_it() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["volume"])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [(["demo.volume"], None)]  # not asked twice
    selection = selection_of(answer)
    assert selection.ignored == ["volume"] and selection.second_choice == []
    assert selection.activated == ["demo.volume"]


async def test_the_one_candidate_left_is_asked_without_a_choice() -> None:
    volume, circumference = EchoTool("volume", "v"), EchoTool("circumference", "c")
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume", "circumference"])
    model.on_answer()

    answer = await asking(model, volume, circumference).ask(SEVERAL)

    assert model.purposes[:3] == [Purpose.CHOICE, Purpose.SUITABILITY, Purpose.SUITABILITY]
    assert selection_of(answer).activated == ["demo.volume", "demo.circumference"]


async def test_every_tool_the_choice_named_is_asked_its_own_question() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume", "circumference"])
    model.on_suitability(["volume", "circumference"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    # alike or not, no later tool is asked as a further request besides the confirmed one
    assert confirmations(model) == [(["demo.volume"], None), (["demo.circumference"], None)]
    selection = selection_of(answer)
    assert selection.besides == {} and selection.second_choice is None  # two confirmed
    assert len(model.calls_for(Purpose.CHOICE)) == 1


async def test_a_task_read_as_one_request_gets_no_second_choice() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(ONE)

    assert len(model.calls_for(Purpose.CHOICE)) == 1
    selection = selection_of(answer)
    assert not selection.several_requests and selection.second_choice is None


@pytest.mark.parametrize(
    "selection",
    [{"several_requests": ""}, {"confirm": "batched"}],
    ids=["an empty pattern", "another confirmation"],
)
async def test_the_second_choice_is_off_with(selection: dict[str, str]) -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area, **selection).ask(SEVERAL)

    assert len(model.calls_for(Purpose.CHOICE)) == 1
    assert not selection_of(answer).several_requests


async def test_a_failing_second_choice_runs_the_confirmed_tool_alone() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1)
    model.on_choose(ModelError("choice", "timeout")).on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    selection = selection_of(answer)
    assert selection.activated == ["demo.volume"] and selection.second_choice is None
    assert answer.failures == [
        "task 1: second choice failed, the confirmed tool runs alone: model call for 'choice' "
        "failed: timeout (after 1 attempt(s))"
    ]
    assert volume.texts and not circumference.texts and not area.texts


async def test_a_failing_second_confirmation_runs_the_confirmed_tool_alone() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["circumference"])
    model.on_suitability(["volume"], times=1).on_suitability(ModelError("suitability", "timeout"))
    model.on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    selection = selection_of(answer)
    assert selection.activated == ["demo.volume"]
    assert selection.why("demo.circumference") == (
        "named by the second choice, not confirmed (it did not run)"
    )
    assert answer.failures[0].startswith("task 1: second choice failed, the confirmed tool runs")
    assert volume.texts and not circumference.texts
