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
from toolwire.sessions import MemorySessionStore
from toolwire.settings import OrchestratorSettings, RoutingSettings
from toolwire.testing import ScriptedModel, registry_of


class Forecast(EchoTool):
    """Tells the weather forecast for a city: rain, sun, temperature."""


class Convert(EchoTool):
    """Converts an amount of money from one currency into another."""


def service(
    model: ScriptedModel, *, default: str | None = "travel", **routing: Any
) -> ConversationService:
    forecast, convert = Forecast("forecast", "sunny"), Convert("convert", "92 EUR")
    asker = AskingTool("booking", "Which city?")
    forecast.domain = asker.domain = "travel"
    convert.domain = "finance"
    registry, tools = registry_of("travel", forecast, asker, convert)
    domains = {
        "travel": DomainSpec(name="travel", description="Trips: weather, bookings."),
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


async def test_the_models_none_gives_way_to_a_domain_that_shares_words_with_the_message() -> None:
    model = ScriptedModel().on_route(None).on_suitability([]).on_answer("no rate for that")

    answer = await service(model).ask("Any news about currencies and bookings?")

    assert model.calls_for(Purpose.ROUTING)  # the words alone did not decide
    assert answer.routing is not None
    best = answer.routing.scores[0].domain
    assert (answer.routing.decided_by, answer.routing.domain) == ("words over none", best)
    assert answer.domain == best


async def test_no_fit_and_no_default_domain_is_a_clear_error() -> None:
    model = ScriptedModel().on_route(None)

    with pytest.raises(UnknownDomainError, match="fits none of the installed domains"):
        await service(model, default=None).ask("Write me a poem about autumn")


async def test_a_failing_routing_call_falls_back_to_the_best_lexical_match() -> None:
    model = ScriptedModel().on_route(ModelError("routing", "down")).on_suitability([])
    model.on_answer("a")

    answer = await service(model, decisive_ratio=100).ask("weather money")

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

    events = [e async for e in service(model).ask_stream("Convert 100 dollars, please")]

    routed = [event for event in events if isinstance(event, Routed)]
    final = events[-1]
    assert isinstance(final, Answered)
    assert [event.routing for event in routed] == [final.answer.routing]
    first_task = next(e for e in events if isinstance(e, TaskStarted))
    assert events.index(routed[0]) < events.index(first_task)
