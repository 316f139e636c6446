"""A consumed MCP tool whose optional parameters say ``{"type": "string", "default": null}``
(issue 34, section 5): the model is shown a schema a null satisfies, its null for an optional
field is accepted, and the call sends only what was given. Before, the model, shown that default,
wrote null, the parameter model refused it, and the call failed.

The server is ``mcp_support/optional_server.py`` (its ``forecast`` answers with the arguments it
got, and refuses a null itself)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolwire import App
from toolwire.llm import OpenAIGateway
from toolwire.llm.base import Purpose
from toolwire.llm.structured import json_schema
from toolwire.mcp import McpTool
from toolwire.mcp.discovery import optional_fields_nullable, params_model_for
from toolwire.mcp.tool import wire_arguments
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest

OPTIONAL_SERVER = Path(__file__).parent / "mcp_support" / "optional_server.py"
CONFIG = (
    "default_domain: weather\n"
    "sessions: {store: memory}\n"
    "domains:\n"
    "  - name: weather\n"
    "    description: Forecasts.\n"
    "mcp_servers:\n"
    "  - name: optional\n"
    f"    command: {json.dumps([sys.executable, str(OPTIONAL_SERVER)])}\n"
)
NULLS = {"city": "Oslo", "day": None, "window": None}
"""What a model shown ``"default": null`` writes for the fields it has nothing for."""


def admits_null(schema: dict[str, Any]) -> bool:
    return {"type": "null"} in schema.get("anyOf", []) or "null" in schema.get("type", [])


@pytest.mark.requires_extra("mcp")  # the test server runs on the SDK
async def test_the_model_sees_nullable_optional_fields_and_its_nulls_are_not_sent(
    toolwire_app_factory: Callable[..., App],
) -> None:
    app = toolwire_app_factory(config=CONFIG, llm=ScriptedModel())
    forecast = app.tool("forecast")
    assert isinstance(forecast, McpTool)

    shown = json_schema(forecast.params_model)  # what the parameter extraction sends the model
    assert shown["required"] == ["city"]
    assert not admits_null(shown["properties"]["city"])
    assert admits_null(shown["properties"]["day"]) and admits_null(shown["properties"]["window"])
    window = next(iter(shown["$defs"].values()))
    assert admits_null(window["properties"]["hours"])

    def model(request: FakeRequest) -> FakeReply:
        return FakeReply(text=json.dumps(NULLS))

    async with FakeOpenAIServer(model) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="k")
        params = await gateway.extract(
            forecast.params_model, "the weather in Oslo", purpose=Purpose.PARAMETERS
        )
        await gateway.aclose()
    assert params is not None  # before: an invalid output, told to the model, then None
    assert len(server.chat_requests) == 1

    result = await forecast.call(params)
    assert not result.is_error, result.text
    assert json.loads(result.text) == {"city": "Oslo"}  # the nulls were dropped, not sent


def test_only_optional_properties_become_nullable_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "kind": {"type": "string", "enum": ["a", "b"], "default": None},
            "ref": {"$ref": "#/$defs/P", "description": "a part"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"type": ["string", "null"]},
            "anything": {"description": "no constraint"},
        },
        "required": ["q"],
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }

    assert optional_fields_nullable(schema) == {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "kind": {"type": ["string", "null"], "enum": ["a", "b", None], "default": None},
            "ref": {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}], "description": "a part"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "maybe": {"type": ["string", "null"]},
            "anything": {"description": "no constraint"},
        },
        "required": ["q"],
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": ["integer", "null"]}}}},
    }
    assert schema["properties"]["q"] == {"type": "string"}  # the listing itself is kept
    assert schema["$defs"]["P"]["properties"]["x"] == {"type": "integer"}


@pytest.mark.requires_extra("mcp")
async def test_a_null_for_a_required_nullable_parameter_is_sent(
    toolwire_app_factory: Callable[..., App],
) -> None:
    """Every null was dropped, so the server said the required argument was missing."""
    app = toolwire_app_factory(config=CONFIG, llm=ScriptedModel())
    remind = app.tool("remind")
    assert isinstance(remind, McpTool)
    assert remind.params_model.model_fields["note"].is_required()

    result = await remind.call(note=None)
    assert not result.is_error, result.text
    assert json.loads(result.text) == {"note": None, "day": "today"}


def test_only_the_nulls_of_optional_properties_are_left_out_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "day": {"type": "string", "default": None},
            "plan": {"$ref": "#/$defs/Plan"},
        },
        "required": ["note", "plan"],
        "$defs": {
            "Plan": {
                "type": "object",
                "properties": {
                    "until": {"type": ["string", "null"]},
                    "hours": {"type": "integer"},
                },
                "required": ["until"],
            }
        },
    }
    model = params_model_for(schema, "RemindParams")
    params = model.model_validate(
        {"note": None, "day": None, "plan": {"until": None, "hours": None}}
    )
    assert wire_arguments(params) == {"note": None, "plan": {"until": None}}
    assert wire_arguments(model.model_validate({"note": "x", "plan": {"until": "May"}})) == {
        "note": "x",
        "plan": {"until": "May"},
    }
