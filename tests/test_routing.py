"""Routing a message that names no domain (several domains installed), with the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from orchestration_kit import AskingTool, EchoTool, Query
from toolwire.errors import ModelError, UnknownDomainError
from toolwire.events import Routed, TaskStarted
from toolwire.llm import Purpose
from toolwire.orchestrator import ConversationService
from toolwire.orchestrator.streaming import Answered
from toolwire.registry import DomainSpec
from toolwire.selection.routing import DomainRouter
from toolwire.selection.selectable import SelectableTool
from toolwire.sessions import MemorySessionStore
from toolwire.settings import OrchestratorSettings, RoutingSettings
from toolwire.testing import ScriptedModel, registry_of


class Forecast(EchoTool):
    """Tells the weather forecast for a city: rain, sun, temperature."""


class Convert(EchoTool):
    """Converts an amount of money from one currency into another."""


def service(
    model: ScriptedModel,
    *,
    default: str | None = "travel",
    travel_rag: str | None = None,
    **routing: Any,
) -> ConversationService:
    forecast, convert = Forecast("forecast", "sunny"), Convert("convert", "92 EUR")
    asker = AskingTool("booking", "Which city?")
    forecast.domain = asker.domain = "travel"
    convert.domain = "finance"
    registry, tools = registry_of("travel", forecast, asker, convert)
    domains = {
        "travel": DomainSpec(
            name="travel", description="Trips: weather, bookings.", rag_tool=travel_rag
        ),
        "finance": DomainSpec(name="finance", description="Money: currencies and rates."),
    }
    return ConversationService(
        registry=registry,
        domains=domains,
        tools=tools,
        llm=model,
        store=MemorySessionStore(),
        default_domain=default,
        settings=OrchestratorSettings(routing=RoutingSettings(**routing)),
    )


async def test_decisive_words_route_without_a_model_call() -> None:
    model = ScriptedModel().on_suitability(["convert"]).on_answer()

    answer = await service(model).ask("Convert 100 dollars into another currency, please")

    assert answer.domain == "finance" and answer.text == "92 EUR"
    assert answer.routing is not None
    assert (answer.routing.decided_by, answer.routing.domain) == ("lexical", "finance")
    assert answer.routing.scores[0].domain == "finance"
    assert Purpose.ROUTING not in model.purposes


async def test_a_single_shared_word_does_not_decide_alone() -> None:
    model = ScriptedModel().on_route(None).on_suitability([]).on_answer("I cannot help with that")

    answer = await service(model, default="finance").ask("A poem about rain, please")

    assert answer.routing is not None
    assert [score.domain for score in answer.routing.scores] == ["travel"]  # only it matches
    assert model.calls_for(Purpose.ROUTING)  # "weather" alone: the model is asked
    assert (answer.routing.decided_by, answer.routing.domain) == ("no tool takes it", None)
    assert answer.domain == "finance"


async def test_when_the_words_do_not_decide_the_model_chooses_among_the_domains() -> None:
    model = ScriptedModel().on_route("finance").on_suitability(["convert"]).on_answer()

    answer = await service(model).ask("And what about Lisbon next week?")

    [routing_call] = model.calls_for(Purpose.ROUTING)
    assert routing_call.inputs["options"] == ["travel", "finance"]
    assert routing_call.inputs["several"] is False
    assert answer.domain == "finance"
    assert answer.routing is not None and answer.routing.decided_by == "model"


def test_the_model_sees_each_domain_by_its_description() -> None:
    router = service(ScriptedModel()).router
    assert router is not None

    assert [(option.name, option.question) for option in router.options] == [
        ("travel", "Trips: weather, bookings."),
        ("finance", "Money: currencies and rates."),
    ]


async def test_a_message_no_domain_fits_goes_to_the_default_domain() -> None:
    model = ScriptedModel().on_route(None).on_suitability([]).on_answer("I cannot help with that")

    answer = await service(model).ask("Write me a poem about autumn")

    assert answer.domain == "travel"
    assert answer.routing is not None
    assert (answer.routing.decided_by, answer.routing.domain) == ("model", None)


WORDS_OF_BOTH = "Any news about currencies and bookings?"
"""Shares words with both domains, travel's a little more: the words alone do not decide."""


async def test_the_models_none_gives_way_to_a_domain_whose_tool_takes_the_message() -> None:
    model = ScriptedModel().on_route(None).on_choose(["forecast"]).on_suitability(["forecast"])
    model.on_answer()

    answer = await service(model, default="finance").ask(WORDS_OF_BOTH)

    assert model.calls_for(Purpose.ROUTING)  # the words alone did not decide
    assert answer.routing is not None
    assert answer.routing.scores[0].domain == "travel"
    assert (answer.routing.decided_by, answer.routing.domain) == ("words over none", "travel")
    assert answer.domain == "travel" and answer.text == "sunny"
    # routing's selection is the task's: the model is not asked the same twice
    assert len(model.calls_for(Purpose.CHOICE)) == len(model.calls_for(Purpose.SUITABILITY)) == 1
    assert answer.trace.selection is not None
    assert answer.trace.selection.activated == ["travel.forecast"]


async def test_words_over_none_give_way_when_no_tool_of_the_domain_takes_the_message() -> None:
    model = ScriptedModel().on_route(None).on_choose([]).on_suitability([])
    model.on_answer("I cannot help with that")

    answer = await service(model, default="finance").ask(WORDS_OF_BOTH)

    assert answer.routing is not None
    assert (answer.routing.decided_by, answer.routing.domain) == ("no tool takes it", None)
    assert answer.domain == "finance"  # the default domain answers, with its own selection
    [suitability] = model.calls_for(Purpose.SUITABILITY)
    assert suitability.inputs["tool_names"] == ["finance.convert"]


async def test_the_default_domain_reuses_the_selection_routing_made_in_it() -> None:
    model = ScriptedModel().on_route(None).on_choose([]).on_answer("I cannot help with that")

    answer = await service(model, default="travel").ask(WORDS_OF_BOTH)

    assert answer.routing is not None and answer.routing.decided_by == "no tool takes it"
    assert answer.domain == "travel"
    assert len(model.calls_for(Purpose.CHOICE)) == 1


async def test_a_failing_selection_leaves_routing_to_the_words() -> None:
    model = ScriptedModel().on_route(None).on_choose(ModelError("choice", "down")).on_answer("a")

    answer = await service(model, default="finance").ask(WORDS_OF_BOTH)

    assert answer.routing is not None
    assert (answer.routing.decided_by, answer.routing.domain) == ("words over none", "travel")
    assert len(model.calls_for(Purpose.CHOICE)) == 1  # the failed selection is the task's
    assert [failure for failure in answer.failures if "choice failed" in failure] == [
        "task 1: choose: the choice failed, no tool chosen by it: model call for 'choice' "
        "failed: down (after 1 attempt(s))"
    ]


async def test_a_domain_with_a_retrieval_tool_takes_what_its_words_point_at() -> None:
    model = ScriptedModel().on_route(None).on_suitability([]).on_answer()

    answer = await service(model, default="finance", travel_rag="forecast").ask(WORDS_OF_BOTH)

    assert answer.routing is not None
    assert (answer.routing.decided_by, answer.routing.domain) == ("words over none", "travel")
    assert answer.text == "sunny"  # its retrieval tool ran, as it does for every task
    [suitability] = model.calls_for(Purpose.SUITABILITY)  # asked by the task, not by routing
    assert suitability.inputs["tool_names"] == ["travel.booking"]


async def test_a_selection_routing_made_is_not_kept_for_a_later_question() -> None:
    model = ScriptedModel().on_route(None).on_choose([]).on_suitability([]).on_answer("no")
    conversations = service(model, default="finance")

    await conversations.ask(WORDS_OF_BOTH)  # travel's selection made, the default answered
    await conversations.ask(WORDS_OF_BOTH, domain="travel")

    assert len(model.calls_for(Purpose.CHOICE)) == 2  # asked afresh, not taken from the first


async def test_no_fit_and_no_default_domain_is_a_clear_error() -> None:
    model = ScriptedModel().on_route(None)

    with pytest.raises(UnknownDomainError, match="fits none of the installed domains"):
        await service(model, default=None).ask("Write me a poem about autumn")


async def test_a_failing_routing_call_falls_back_to_the_best_lexical_match() -> None:
    model = ScriptedModel().on_route(ModelError("routing", "down")).on_suitability([])
    model.on_answer("a")

    answer = await service(model).ask("weather money")  # one word each: the model is asked

    assert answer.routing is not None and answer.routing.decided_by == "failure"
    assert answer.domain == answer.routing.scores[0].domain
    assert answer.failures[0].startswith("task 1: domain routing failed")


async def test_a_named_domain_and_a_reply_are_never_routed() -> None:
    model = ScriptedModel().on_suitability(["booking"]).on_extract(Query, {"query": "Rome"})
    model.on_answer()
    conversations = service(model)

    question = await conversations.ask("Convert my booking", domain="travel")
    reply = await conversations.ask("Rome, about currency", session_id=question.session_id)

    assert question.kind == "clarification" and question.routing is None
    assert reply.domain == "travel" and reply.routing is None
    assert Purpose.ROUTING not in model.purposes


async def test_routing_switched_off_sends_every_message_to_the_default_domain() -> None:
    model = ScriptedModel().on_suitability([]).on_answer("a")

    answer = await service(model, enabled=False).ask("Convert 100 dollars into euros")

    assert (answer.domain, answer.routing) == ("travel", None)


async def test_a_watched_question_streams_its_routing_before_its_tasks() -> None:
    model = ScriptedModel().on_suitability(["convert"]).on_answer()

    message = "Convert 100 dollars into another currency, please"
    events = [e async for e in service(model).ask_stream(message)]

    routed = [event for event in events if isinstance(event, Routed)]
    final = events[-1]
    assert isinstance(final, Answered)
    assert [event.routing for event in routed] == [final.answer.routing]
    first_task = next(e for e in events if isinstance(e, TaskStarted))
    assert events.index(routed[0]) < events.index(first_task)


async def test_a_domain_with_many_matching_tools_does_not_hide_the_runner_up() -> None:
    """Each tool is a document of its domain: the weather domain's eight matching tools must
    not crowd the travel domain out of the scores, or its close score counts as none and the
    words decide alone."""

    def tools(domain: str, count: int, about: str) -> list[SelectableTool]:
        made = [EchoTool(f"{domain}_{i}", about=about) for i in range(count)]
        return [SelectableTool.of(f"{domain}.{tool.name}", tool) for tool in made]

    router = DomainRouter.build(
        {name: DomainSpec(name=name) for name in ("weather", "travel")},
        {
            "weather": tools("weather", 8, "Rain forecast for a city"),
            "travel": [
                *tools("trip", 1, "Rain forecast for a city trip"),
                *tools("hotel", 10, "Books a hotel room"),
            ],
        },
    )
    model = ScriptedModel().on_route("weather")

    decision = await router.route("rain forecast city", model, 1)

    assert [score.domain for score in decision.record.scores] == ["weather", "travel"]
    assert decision.record.decided_by == "model"
    assert model.calls_for(Purpose.ROUTING)
