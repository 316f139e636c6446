"""The English pack's selection steps, listed in ``orchestrator.selection.steps`` after
``confirm``: ``english.several_requests`` (a task that joins several requests, one tool
confirmed, gets a second choice among the candidates not yet asked) and
``english.leading_action`` (a single selected tool whose text lacks the task's first word is put
against that bare action), with the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from orchestration_kit import EchoTool, Query, QueryTool, domain, selection_of
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.orchestrator import ConversationService
from toolwire.selection.english.leading_action import OTHER_REQUEST, action_option, leading_action
from toolwire.selection.english.several_requests import reads_as_several
from toolwire.selection.pipeline import ToolSelector
from toolwire.selection.selectable import ToolCatalogue
from toolwire.selection.steps import builtin_steps
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for

CORE = ["retrieve", "choose", "confirm"]
SEVERAL_STEPS = [*CORE, "english.several_requests"]
ACTION_STEPS = [*CORE, "english.leading_action"]
ENGLISH = [*CORE, "english.several_requests", "english.leading_action"]


def asking(model: ScriptedModel, *tools: Any, steps: list[str] = ENGLISH) -> ConversationService:
    settings = OrchestratorSettings(selection=SelectionSettings(steps=steps))
    return conversation_for(domain(), *tools, model=model, settings=settings)


def choices(model: ScriptedModel) -> list[list[str]]:
    """The options put to each choice call."""
    return [call.inputs["options"] for call in model.calls_for(Purpose.CHOICE)]


def confirmations(model: ScriptedModel) -> list[list[str]]:
    """The tools asked their own question, one call each."""
    return [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)]


# == english.several_requests =================================================================

SEVERAL = "What is the sphere's volume, and how long is its equator?"
ONE = "What is the volume of a sphere with a 15 cm radius?"


def tools() -> tuple[EchoTool, EchoTool, EchoTool]:
    return EchoTool("volume", "v"), EchoTool("circumference", "c"), EchoTool("area", "a")


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
    assert reads_as_several(task)


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
    assert not reads_as_several(task)


async def test_a_second_choice_adds_the_second_request_s_tool() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["circumference"])
    model.on_suitability(["volume", "circumference"]).on_answer()

    answer = await asking(model, volume, circumference, area, steps=SEVERAL_STEPS).ask(SEVERAL)

    assert model.purposes[:4] == [
        Purpose.CHOICE,
        Purpose.SUITABILITY,
        Purpose.CHOICE,
        Purpose.SUITABILITY,
    ]
    assert choices(model)[1] == ["circumference", "area"]  # the tools not asked yet
    assert confirmations(model) == [["demo.volume"], ["demo.circumference"]]
    selection = selection_of(answer)
    step = selection.step("english.several_requests")
    assert step is not None and step.note == "read as several requests"
    assert selection.activated == ["demo.volume", "demo.circumference"]
    assert selection.why("demo.circumference") == (
        "named by the second choice, confirmed on its question"
    )
    assert selection.describe() == (
        "retrieve (3 candidate(s), all) → choose → confirm → "
        "english.several_requests (read as several requests)"
    )
    assert volume.texts and circumference.texts and not area.texts


async def test_a_second_choice_refused_on_its_question_does_not_run() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["area", "circumference"])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [["demo.volume"], ["demo.area"]]  # the first named only
    selection = selection_of(answer)
    assert selection.activated == ["demo.volume"]
    assert selection.why("demo.area") == "named by the second choice, refused on its question"
    assert selection.why("demo.circumference") == "not chosen among the candidates"
    assert volume.texts and not area.texts and not circumference.texts


async def test_a_second_choice_that_names_nothing_leaves_the_confirmed_tool() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose([])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [["demo.volume"]]
    assert len(choices(model)) == 2
    assert selection_of(answer).activated == ["demo.volume"]


async def test_a_second_choice_naming_a_tool_already_asked_ignores_it() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["volume"])
    model.on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [["demo.volume"]]  # not asked twice
    selection = selection_of(answer)
    assert selection.ignored == ["volume"]
    assert selection.activated == ["demo.volume"]


async def test_without_confirm_the_second_choice_leaves_out_the_tool_chosen() -> None:
    """Before ``confirm`` the chosen tool has no answer: the second choice must still leave it
    out, or the same tool would run twice."""
    catalogue = ToolCatalogue.build([(f"demo.{tool.name}", tool, ()) for tool in tools()])
    settings = SelectionSettings(steps=["retrieve", "choose", "english.several_requests"])
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume"])

    selection = await ToolSelector(catalogue, builtin_steps(settings)).select(
        SEVERAL, model, attempts=1
    )

    assert choices(model)[1] == ["circumference", "area"]
    assert selection.record.activated == ["demo.volume"]
    assert selection.record.ignored == ["volume"]


async def test_the_one_candidate_left_is_asked_without_a_choice() -> None:
    volume, circumference = EchoTool("volume", "v"), EchoTool("circumference", "c")
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume", "circumference"])
    model.on_answer()

    answer = await asking(model, volume, circumference).ask(SEVERAL)

    assert model.purposes[:3] == [Purpose.CHOICE, Purpose.SUITABILITY, Purpose.SUITABILITY]
    assert selection_of(answer).activated == ["demo.volume", "demo.circumference"]


async def test_two_confirmed_tools_get_no_second_choice() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume", "circumference"])
    model.on_suitability(["volume", "circumference"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    assert confirmations(model) == [["demo.volume"], ["demo.circumference"]]
    assert len(choices(model)) == 1
    selection = selection_of(answer)
    assert selection.step("english.several_requests") is None
    assert selection.activated == ["demo.volume", "demo.circumference"]


@pytest.mark.parametrize(
    ("task", "steps"), [(ONE, ENGLISH), (SEVERAL, CORE)], ids=["one-request", "step-not-listed"]
)
async def test_no_second_choice_for_one_request_or_without_the_step(
    task: str, steps: list[str]
) -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"]).on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area, steps=steps).ask(task)

    assert len(choices(model)) == 1
    assert selection_of(answer).step("english.several_requests") is None
    assert selection_of(answer).activated == ["demo.volume"]


async def test_a_failing_second_choice_runs_the_confirmed_tool_alone() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1)
    model.on_choose(ModelError("choice", "timeout")).on_suitability(["volume"]).on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    selection = selection_of(answer)
    assert selection.activated == ["demo.volume"]
    assert answer.failures == [
        "task 1: english.several_requests: the second choice failed, the confirmed tool runs "
        "alone: model call for 'choice' failed: timeout (after 1 attempt(s))"
    ]
    assert answer.failures == [f"task 1: {selection.failure}"]
    assert volume.texts and not circumference.texts and not area.texts


async def test_a_failing_second_confirmation_runs_the_confirmed_tool_alone() -> None:
    volume, circumference, area = tools()
    model = ScriptedModel().on_choose(["volume"], times=1).on_choose(["circumference"])
    model.on_suitability(["volume"], times=1).on_suitability(ModelError("suitability", "timeout"))
    model.on_answer()

    answer = await asking(model, volume, circumference, area).ask(SEVERAL)

    selection = selection_of(answer)
    assert selection.activated == ["demo.volume"]
    assert selection.why("demo.circumference") == "not chosen among the candidates"
    assert answer.failures == [
        "task 1: english.several_requests: a confirmation failed: model call for 'suitability' "
        "failed: timeout (after 1 attempt(s))"
    ]
    assert volume.texts and not circumference.texts


# == english.leading_action ===================================================================

CANCEL_TASK = "Cancel my hotel reservation in Vienna."

TRAVEL = {
    "hotels": ("Finds hotels in a city.", "Does the message ask to find a hotel?"),
    "flights": (
        "Searches flights between two cities.",
        "Does the message ask to search for flights?",
    ),
}
"""Name → (description, question): neither text says cancel, reserve, book or plan."""


def travel(model: ScriptedModel, steps: list[str] = ACTION_STEPS) -> ConversationService:
    tools = [
        EchoTool(name, name, about=about, question=asks) for name, (about, asks) in TRAVEL.items()
    ]
    return asking(model, *tools, steps=steps)


def bare_action_wins(_prompt: str, names: list[str]) -> list[str]:
    """The choice names the hotels; the check names the bare action."""
    return [OTHER_REQUEST] if OTHER_REQUEST in names else ["hotels"]


def checks(model: ScriptedModel) -> list[list[str]]:
    """The options of each choice that put a tool against a bare action."""
    return [options for options in choices(model) if OTHER_REQUEST in options]


@pytest.mark.parametrize(
    ("task", "action"),
    [
        (CANCEL_TASK, "cancel"),
        ("Please cancel the hotel number 1003 for me.", "cancel"),
        ("  pls  Delete the meeting", "delete"),
        ("Cancel my hotel reservation?", None),  # a question
        ("What's the weather in Rome.", None),  # a stopword first
        ("I'm flying tomorrow.", None),
        ("500 euros in dollars", None),  # a number first
        ("x marks the spot", None),  # one letter
        ("please", None),
        ('{"city": "Paris"}', None),  # a coordinator's task prompt
        ("'Cancel' is what I said.", None),
        ("", None),
    ],
)
def test_the_leading_action_is_a_requests_first_word(task: str, action: str | None) -> None:
    assert leading_action(task) == action


def test_the_bare_action_is_named_apart_from_the_tool() -> None:
    option = action_option("cancel", {OTHER_REQUEST})
    assert option.name == f"{OTHER_REQUEST}_"
    assert option.question == "Does the message ask to cancel something?"
    assert action_option("cancel", {"hotels"}).name == OTHER_REQUEST


async def test_a_tool_the_model_does_not_name_over_the_bare_action_is_dropped() -> None:
    model = ScriptedModel().on_choose(bare_action_wins).on_suitability(["hotels"])
    model.on_answer("no tool cancels bookings")

    answer = await travel(model).ask(CANCEL_TASK)

    assert checks(model) == [["hotels", OTHER_REQUEST]]
    [check] = [c for c in model.calls_for(Purpose.CHOICE) if OTHER_REQUEST in c.inputs["options"]]
    assert check.inputs["several"] is False
    selection = selection_of(answer)
    assert selection.answers == {"demo.hotels": True}
    assert selection.activated == []
    assert selection.why("demo.hotels") == (
        "named by the choice; confirmed on its question; dropped: the model named the bare "
        "action 'cancel' over it"
    )
    assert answer.trace.tools == []


async def test_a_tool_the_model_names_over_the_bare_action_runs() -> None:
    model = ScriptedModel().on_suitability(["hotels"]).on_answer()

    answer = await travel(model).ask("Reserve a hotel in Vienna for Friday.")

    assert checks(model) == [["hotels", OTHER_REQUEST]]
    selection = selection_of(answer)
    assert selection.activated == ["demo.hotels"]
    assert selection.why("demo.hotels").endswith(
        "confirmed on its question; named over the task's bare action 'reserve'"
    )
    assert [run.tool_name for run in answer.trace.tools] == ["demo.hotels"]


@pytest.mark.parametrize("answer", [[], ["made_up"]], ids=["none-fits", "outside-name"])
async def test_a_model_that_names_neither_option_drops_the_tool(answer: list[str]) -> None:
    """The check is a choice: none fits, or only a name outside its options, drops the tool
    (the outside name is recorded as ignored, as in the choice step)."""
    model = ScriptedModel().on_choose(["hotels"], times=1).on_choose(answer)
    model.on_suitability(["hotels"]).on_answer("none")

    answered = await travel(model).ask(CANCEL_TASK)

    selection = selection_of(answered)
    assert checks(model) == [["hotels", OTHER_REQUEST]]
    assert selection.ignored == answer
    assert selection.activated == []
    assert "dropped: the model named the bare action 'cancel'" in selection.why("demo.hotels")


def lookup_selector() -> ToolSelector:
    """One lookup tool selected by a function call, then checked on the task's first word."""
    catalogue = ToolCatalogue.build([("demo.lookup", QueryTool("lookup"), ())])
    settings = SelectionSettings(steps=["retrieve", "call", "english.leading_action"])
    return ToolSelector(catalogue, builtin_steps(settings))


async def test_a_dropped_tool_keeps_no_arguments_its_call_carried() -> None:
    model = ScriptedModel().on_choose({"lookup": {"query": "Vienna"}}, times=1)
    model.on_choose([OTHER_REQUEST])

    selection = await lookup_selector().select(CANCEL_TASK, model, attempts=1)

    assert model.purposes == [Purpose.CHOICE, Purpose.CHOICE]  # called, then checked
    assert selection.record.why("demo.lookup") == (
        "called (its arguments carried); dropped: the model named the bare action 'cancel' over it"
    )
    assert selection.record.activated == []
    assert selection.parameters == {}


async def test_a_kept_tool_keeps_the_arguments_its_call_carried() -> None:
    model = ScriptedModel().on_choose({"lookup": {"query": "Vienna"}}, times=1)
    model.on_choose(["lookup"])

    selection = await lookup_selector().select(CANCEL_TASK, model, attempts=1)

    assert selection.record.activated == ["demo.lookup"]
    assert selection.parameters == {"demo.lookup": Query(query="Vienna")}


@pytest.mark.parametrize(
    ("task", "steps"),
    [
        ("Find a hotel in Vienna for Friday.", ACTION_STEPS),  # "find" is in the tool's text
        ("Booking a hotel in Vienna, any ideas.", CORE),  # the step not listed
        ("Can you cancel my hotel reservation in Vienna?", ACTION_STEPS),  # a question
        ("Cancel my hotel reservation, then find a new one.", ACTION_STEPS),  # several requests
    ],
    ids=["word-in-the-tool", "not-listed", "a-question", "several-requests"],
)
async def test_no_check_where_the_first_word_is_no_evidence(task: str, steps: list[str]) -> None:
    model = ScriptedModel().on_choose(bare_action_wins).on_suitability(["hotels"]).on_answer()

    answer = await travel(model, steps).ask(task)

    assert checks(model) == []
    selection = selection_of(answer)
    assert selection.step("english.leading_action") is None
    assert "demo.hotels" in selection.activated


async def test_two_selected_tools_are_not_checked() -> None:
    model = ScriptedModel().on_choose(["hotels", "flights"], times=1)
    model.on_choose(bare_action_wins).on_suitability(["hotels", "flights"]).on_answer()

    answer = await travel(model).ask("Plan Vienna: a hotel and flights from Paris.")

    assert checks(model) == []
    assert selection_of(answer).activated == ["demo.hotels", "demo.flights"]


async def test_a_failed_check_keeps_the_tool_and_says_so() -> None:
    model = ScriptedModel().on_choose(["hotels"], times=1)
    model.on_choose(ModelError(Purpose.CHOICE, "server down"))
    model.on_suitability(["hotels"]).on_answer()

    answer = await travel(model).ask(CANCEL_TASK)

    selection = selection_of(answer)
    assert selection.activated == ["demo.hotels"]
    assert selection.failure == (
        "english.leading_action: the leading-action check failed, the tool runs unchecked: "
        "model call for 'choice' failed: server down (after 1 attempt(s))"
    )
    assert [run.tool_name for run in answer.trace.tools] == ["demo.hotels"]


# == both steps ===============================================================================


def hotels_then_flights(_prompt: str, names: list[str]) -> list[str]:
    """The choice names the hotels, the second choice the flights, a check the bare action."""
    for name in (OTHER_REQUEST, "hotels", "flights"):
        if name in names:
            return [name]
    return []


async def test_with_both_steps_the_tool_a_second_choice_added_runs_unchecked() -> None:
    model = ScriptedModel().on_choose(hotels_then_flights)
    model.on_suitability(["hotels", "flights"]).on_answer()

    answer = await travel(model, ENGLISH).ask("Book a hotel in Vienna, and flights from Paris.")

    assert choices(model) == [["hotels", "flights"]]  # the one left is asked, not chosen
    assert checks(model) == []  # two tools selected: the first word is no evidence
    assert confirmations(model) == [["demo.hotels"], ["demo.flights"]]
    assert selection_of(answer).activated == ["demo.hotels", "demo.flights"]
