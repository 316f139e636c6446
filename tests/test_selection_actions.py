"""The leading-action check (``orchestrator.selection.action_check``): a single activated tool
whose text lacks the task's first word is put against that bare action, with the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from orchestration_kit import EchoTool, Query, QueryTool, domain, selection_of
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.selection.actions import OTHER_REQUEST, action_option, leading_action
from toolwire.selection.selector import ToolSelector
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for

CANCEL_TASK = "Cancel my hotel reservation in Vienna."


TOOLS = {
    "hotels": ("Finds hotels in a city.", "Does the message ask to find a hotel?"),
    "flights": (
        "Searches flights between two cities.",
        "Does the message ask to search for flights?",
    ),
}
"""Name → (description, question): neither text says cancel, reserve, book or plan."""


def travel(model: ScriptedModel, **selection: Any) -> Any:
    tools = [
        EchoTool(name, name, about=about, question=asks) for name, (about, asks) in TOOLS.items()
    ]
    settings = OrchestratorSettings(selection=SelectionSettings(**selection))
    return conversation_for(domain(), *tools, model=model, settings=settings)


def bare_action_wins(_prompt: str, names: list[str]) -> list[str]:
    """The choice names the hotels; the check names the bare action."""
    return [OTHER_REQUEST] if OTHER_REQUEST in names else ["hotels"]


def checks(model: ScriptedModel) -> list[list[str]]:
    """The options of each choice that put a tool against a bare action."""
    calls = model.calls_for(Purpose.CHOICE)
    return [call.inputs["options"] for call in calls if OTHER_REQUEST in call.inputs["options"]]


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
    selection = selection_of(answer)
    assert selection.answers == {"demo.hotels": True}
    assert selection.action == "cancel"
    assert selection.action_checks == {"demo.hotels": False}
    assert selection.activated == []
    assert selection.why("demo.hotels") == (
        "chosen and confirmed, then dropped: the model named the bare action 'cancel' over it"
    )
    assert answer.trace.tools == []


async def test_a_tool_the_model_names_over_the_bare_action_runs() -> None:
    model = ScriptedModel().on_suitability(["hotels"]).on_answer()

    answer = await travel(model).ask("Reserve a hotel in Vienna for Friday.")

    assert checks(model) == [["hotels", OTHER_REQUEST]]
    selection = selection_of(answer)
    assert selection.action_checks == {"demo.hotels": True}
    assert selection.activated == ["demo.hotels"]
    assert selection.why("demo.hotels") == (
        "chosen and confirmed; named over the task's bare action ('reserve')"
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
    assert selection.action_checks == {"demo.hotels": False}
    assert selection.activated == []


async def test_a_dropped_tool_keeps_no_parameters_its_confirmation_carried() -> None:
    """``confirm: with_parameters``: the confirmation's parameters go with the dropped tool."""
    lookup = QueryTool("lookup")
    selector = ToolSelector.build(
        [("demo.lookup", lookup, ())], SelectionSettings(confirm="with_parameters")
    )
    model = ScriptedModel().on_suitability(["lookup"]).on_extract(Query, {"query": "Vienna"})
    model.on_choose([OTHER_REQUEST])

    selection = await selector.select(CANCEL_TASK, model, attempts=1)

    assert model.purposes == [Purpose.PARAMETERS, Purpose.CHOICE]  # confirmed, then checked
    assert selection.record.answers == {"demo.lookup": True}
    assert selection.record.action_checks == {"demo.lookup": False}
    assert selection.record.activated == []
    assert selection.parameters == {}


async def test_a_kept_tool_keeps_the_parameters_its_confirmation_carried() -> None:
    lookup = QueryTool("lookup")
    selector = ToolSelector.build(
        [("demo.lookup", lookup, ())], SelectionSettings(confirm="with_parameters")
    )
    model = ScriptedModel().on_suitability(["lookup"]).on_extract(Query, {"query": "Vienna"})

    selection = await selector.select(CANCEL_TASK, model, attempts=1)

    assert selection.record.action_checks == {"demo.lookup": True}
    assert selection.parameters == {"demo.lookup": Query(query="Vienna")}


@pytest.mark.parametrize(
    ("task", "settings"),
    [
        ("Find a hotel in Vienna for Friday.", {}),  # "find" is in the tool's text
        ("Booking a hotel in Vienna, any ideas.", {"action_check": False}),
        (CANCEL_TASK, {"confirm": "off"}),  # the choice decides
        ("Can you cancel my hotel reservation in Vienna?", {}),  # a question
        ("Cancel my hotel reservation, then find a new one.", {}),  # several requests
    ],
    ids=["word-in-the-tool", "turned-off", "no-confirmation", "a-question", "several-requests"],
)
async def test_no_check_where_the_first_word_is_no_evidence(task: str, settings: Any) -> None:
    model = ScriptedModel().on_choose(bare_action_wins).on_suitability(["hotels"]).on_answer()

    answer = await travel(model, **settings).ask(task)

    assert checks(model) == []
    selection = selection_of(answer)
    assert selection.action is None and selection.action_checks == {}
    assert "demo.hotels" in selection.activated


async def test_two_activated_tools_are_not_checked() -> None:
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
    assert selection.action_checks == {}
    assert selection.failure is not None
    assert selection.failure.startswith("action check failed, the activated tool runs unchecked")
    assert [run.tool_name for run in answer.trace.tools] == ["demo.hotels"]
