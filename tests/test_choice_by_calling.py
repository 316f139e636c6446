"""The tool choice as a native function call (``orchestrator.selection.choice: function_call``):
the candidates offered as functions through the OpenAI-compatible transport, the calls read
from ``tool_calls`` or from the text, and the selector asking for it only when set."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator
from structlog.testing import capture_logs

from orchestration_kit import EchoTool, domain
from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.errors import ModelError
from toolwire.llm import (
    ChatModel,
    ChatReply,
    ChatRequest,
    FunctionChoice,
    FunctionOffer,
    OpenAIGateway,
    Option,
    Purpose,
)
from toolwire.llm.base import collect_calls
from toolwire.llm.function_calls import calls_in_text
from toolwire.settings import LLMSettings, OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply

AREA = {
    "type": "object",
    "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
    "required": ["base", "height"],
}
OPTIONS = [
    Option(
        name="triangle_area",
        question="Does the message ask for a triangle's area?",
        description="Area of a triangle from base and height.",
        parameters=AREA,
    ),
    Option(name="circle_area", question="Does the message ask for a circle's area?"),
]
TASK = "What is the area of a triangle 3 wide and 4 tall?"


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def gateway_for(server: FakeOpenAIServer) -> OpenAIGateway:
    settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
    return OpenAIGateway(settings, api_key="test-key")


async def test_the_candidates_are_offered_as_functions_and_the_called_ones_are_chosen(
    server: FakeOpenAIServer,
) -> None:
    server.script(FakeReply(calls=[("circle_area", {}), ("triangle_area", {"base": 3})]))
    gateway = gateway_for(server)
    with collect_calls() as calls:
        chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert chosen == [  # in the order called, with the arguments written
        FunctionChoice(name="circle_area", arguments={}),
        FunctionChoice(name="triangle_area", arguments={"base": 3}),
    ]
    [request] = server.chat_requests
    assert request.messages == [{"role": "user", "content": TASK}]  # the task alone
    assert request.body["tool_choice"] == "auto"
    assert "response_format" not in request.body
    assert [tool["function"] for tool in request.body["tools"]] == [
        {
            "name": "triangle_area",
            "description": "Area of a triangle from base and height.",
            "parameters": AREA,
        },
        {  # no description: the question says what it is for; no schema: no arguments
            "name": "circle_area",
            "description": "Does the message ask for a circle's area?",
            "parameters": {"type": "object", "properties": {}},
        },
    ]
    [record] = calls
    assert record.purpose == Purpose.CHOICE and record.ok and record.prompt_tokens > 0


async def test_calls_the_model_wrote_into_its_text_are_read(server: FakeOpenAIServer) -> None:
    written = (
        '<tool_call>\n{"name": "triangle_area", "arguments": {"name": "circle_area"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "circle_area", "argum'  # cut off at the limit
    )
    server.script(FakeReply(text=written, calls=[]))
    gateway = gateway_for(server)
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    # an argument called "name" is not a call; the second call, cut off, is not read (the
    # reply did not stop at the limit: it is no call)
    assert chosen == [
        FunctionChoice(name="triangle_area", arguments={"name": "circle_area"}),
    ]


async def test_a_reply_that_calls_nothing_chooses_nothing(server: FakeOpenAIServer) -> None:
    server.script(FakeReply(text="None of these tools can help with that.", calls=[]))
    gateway = gateway_for(server)
    assert await gateway.choose_functions(TASK, OPTIONS) == []
    await gateway.aclose()


async def test_a_reply_that_is_not_a_completion_is_a_model_error(
    server: FakeOpenAIServer,
) -> None:
    server.script(FakeReply(raw_body=b"<html>proxy error</html>"))
    gateway = gateway_for(server)
    with pytest.raises(ModelError, match="'choice' failed: the server's reply is not JSON"):
        await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()


def test_calls_are_read_from_every_top_level_object_and_nothing_else() -> None:
    def read(text: str) -> list[tuple[str, object]]:
        return [(call.name, call.arguments) for call in calls_in_text(text)]

    assert read('{"name": "a"} then {"name": "b", "arguments": {"x": 1}}') == [
        ("a", None),
        ("b", {"x": 1}),
    ]
    assert read('{"name": "a", "arguments": "{\\"x\\": 2}"}') == [("a", {"x": 2})]
    assert read('{"name": "a", "arguments": "not json"} {"name": "b", "arguments": [1]}') == [
        ("a", None),
        ("b", None),
    ]
    assert read('{"arguments": {"name": "a"}}') == []
    assert read('{"name": 3} {"name": ["b"]} no json { at all') == []
    nested = '{"a": ' * 5000 + '{"name": "deep"}' + "}" * 5000  # too deep to read: no crash
    assert read(nested) == []


# -- the selector asks for it, and only when set -----------------------------------------------


class Sides(BaseModel):
    base: float = Field(description="length of the base")


class TriangleArea(OrchestratorActivatedTool[Sides]):
    """Computes a triangle's area."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a triangle?"

    def execute_with_result(self, params: Sides, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"base {params.base}")


CALLING = OrchestratorSettings(selection=SelectionSettings(choice="function_call"))


async def test_the_selector_asks_for_the_choice_as_a_function_call_when_set() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_extract(Sides, {"base": 3}).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=CALLING
    )

    answer = await conversation.ask(TASK)

    [choice] = model.calls_for(Purpose.CHOICE)
    assert choice.inputs["calls"] is True  # choose_functions, not a constrained choice
    assert [run.tool_name for run in answer.trace.tools] == ["demo.triangle_area"]


async def test_by_default_the_choice_is_constrained_without_function_calls() -> None:
    model = ScriptedModel().on_choose(["echo"]).on_suitability(["echo"]).on_answer()

    await conversation_for(domain(), TriangleArea(), EchoTool("echo"), model=model).ask("echo hi")

    [choice] = model.calls_for(Purpose.CHOICE)
    assert "calls" not in choice.inputs


async def test_a_tool_offered_as_a_function_carries_its_parameters_schema(
    server: FakeOpenAIServer,
) -> None:
    """Through the orchestrator and the real gateway: the offered function is the tool's short
    name with its parameter model's schema; a called name that is no candidate is ignored."""
    server.script(FakeReply(calls=[("triangle_area", {"base": 3}), ("square_area", {})]))
    gateway = gateway_for(server)
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=gateway, settings=CALLING
    )

    answer = await conversation.ask(TASK)
    await gateway.aclose()

    offered = server.chat_requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in offered] == ["triangle_area", "echo"]
    assert offered[0]["function"]["parameters"] == TriangleArea().params_model.model_json_schema()
    assert json.dumps(offered)  # sent as JSON, as it is
    assert answer.trace.selection is not None
    assert answer.trace.selection.chosen == ["demo.triangle_area"]
    assert answer.trace.selection.ignored == ["square_area"]


# -- parameters_from_choice --------------------------------------------------------------------


def from_choice(**selection: object) -> OrchestratorSettings:
    return OrchestratorSettings(
        selection=SelectionSettings.model_validate(
            {"choice": "function_call", "parameters_from_choice": True, **selection}
        )
    )


async def test_a_confirmed_tools_valid_arguments_from_the_choice_spare_its_extraction() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}, "echo": None})
    model.on_suitability(["triangle_area"]).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=from_choice()
    )

    answer = await conversation.ask(TASK)

    # echo, named second and refused as a further request, would have had none to give
    assert Purpose.PARAMETERS not in model.purposes
    assert answer.text == "base 3.5"  # the tool ran with the call's arguments


async def test_arguments_that_do_not_fit_the_parameter_model_are_extracted_as_usual() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": "wide"}, "echo": None})
    model.on_suitability(["triangle_area"]).on_extract(Sides, {"base": 3}).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=from_choice()
    )

    answer = await conversation.ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text == "base 3.0"


async def test_without_the_setting_the_arguments_are_not_used() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}})
    model.on_suitability(["triangle_area"]).on_extract(Sides, {"base": 3}).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=CALLING
    )

    answer = await conversation.ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text == "base 3.0"


async def test_a_refused_tool_keeps_no_arguments() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}})
    model.on_suitability([]).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=from_choice()
    )

    answer = await conversation.ask(TASK)

    assert answer.trace.tools == [] and Purpose.PARAMETERS not in model.purposes


async def test_a_validator_that_raises_on_the_arguments_leaves_them_to_the_extraction() -> None:
    class Strict(BaseModel):
        base: float

        @field_validator("base", mode="before")
        @classmethod
        def _no_guesses(cls, value: object) -> object:
            if value == 3.5:
                raise RuntimeError("validator bug")
            return value

    class StrictArea(OrchestratorActivatedTool[Strict]):
        def executable_instruction(self) -> str:
            return "Does the message ask for the area of a triangle?"

        def execute_with_result(self, params: Strict, text: str) -> ToolExecutionResult:
            return ToolExecutionResult.context(f"base {params.base}")

    model = ScriptedModel().on_choose({"strict_area": {"base": 3.5}, "echo": None})
    model.on_suitability(["strict_area"]).on_extract(Strict, {"base": 3}).on_answer()
    conversation = conversation_for(
        domain(), StrictArea(), EchoTool("echo"), model=model, settings=from_choice()
    )

    answer = await conversation.ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text == "base 3.0"


# -- servers, transports and models without function calling -----------------------------------


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "registry.ollama.ai/library/gemma does not support tools"),
        (500, "tools param requires --jinja flag"),
        (400, '"auto" tool choice requires --enable-auto-tool-choice to be set'),
    ],
)
async def test_a_server_that_refuses_functions_gets_a_constrained_choice_from_then_on(
    server: FakeOpenAIServer, status: int, message: str
) -> None:
    server.script(
        FakeReply(status=status, error=message),
        FakeReply(text='{"choice": ["triangle_area"]}'),
        FakeReply(text='{"choice": ["circle_area"]}'),
    )
    settings = LLMSettings(
        base_url=server.base_url, model="m", max_retries=2, structured_output="json_schema"
    )
    gateway = OpenAIGateway(settings, api_key="k")
    with capture_logs() as logs:
        first = await gateway.choose_functions(TASK, OPTIONS)
        second = await gateway.choose_functions("and a circle of radius 2?", OPTIONS)
    await gateway.aclose()

    assert [call.name for call in first + second] == ["triangle_area", "circle_area"]
    offered, *constrained = server.chat_requests
    assert "tools" in offered.body  # refused once, not retried
    assert [("tools" in r.body, "response_format" in r.body) for r in constrained] == [
        (False, True),
        (False, True),
    ]
    assert [entry["event"] for entry in logs].count("function_calling_refused") == 1
    assert gateway.transport.structured_mode == "json_schema"  # no structured-output fallback


async def test_a_transient_error_is_no_refusal(server: FakeOpenAIServer) -> None:
    server.script(FakeReply(status=503, error="busy"), FakeReply(calls=[("circle_area", {})]))
    settings = LLMSettings(base_url=server.base_url, model="m", max_retries=1)
    gateway = OpenAIGateway(settings, api_key="k")
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert [call.name for call in chosen] == ["circle_area"]
    assert all("tools" in request.body for request in server.chat_requests)


class PlainTransport:
    """A provider's transport written without function calling."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        return ChatReply(text='{"choice": ["circle_area"]}', model="plain")

    async def aclose(self) -> None:
        pass


async def test_a_transport_without_function_calling_gets_a_constrained_choice() -> None:
    transport = PlainTransport()
    model = ChatModel(transport)

    chosen = await model.choose_functions(TASK, OPTIONS)

    assert chosen == [FunctionChoice(name="circle_area")]
    [request] = transport.requests
    assert request.functions == () and request.schema is not None


async def test_a_language_model_without_choose_functions_gets_a_constrained_choice() -> None:
    class OlderModel(ScriptedModel):
        choose_functions = None  # type: ignore[assignment]

    model = OlderModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_extract(Sides, {"base": 3}).on_answer()

    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=CALLING
    )

    answer = await conversation.ask(TASK)

    [choice] = model.calls_for(Purpose.CHOICE)
    assert "calls" not in choice.inputs
    assert answer.text == "base 3.0"


def test_a_request_offering_functions_takes_no_schema_and_is_not_streamed() -> None:
    offer = FunctionOffer(name="f", description="", parameters={})
    with pytest.raises(ValueError, match="no schema and is not streamed"):
        ChatRequest("choice", [], Sides, 16, 1.0, functions=[offer])
    with pytest.raises(ValueError, match="no schema and is not streamed"):
        ChatRequest("choice", [], None, 16, 1.0, functions=[offer], on_text=print)


async def test_a_call_cut_off_at_the_limit_still_names_its_function(
    server: FakeOpenAIServer,
) -> None:
    cut = '<tool_call>\n{"name": "triangle_area", "arguments": {"base": 3, "hei'
    server.script(FakeReply(text=cut, calls=[], finish_reason="length"))
    gateway = gateway_for(server)
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert chosen == [FunctionChoice(name="triangle_area", arguments=None)]


async def test_parsed_calls_cut_off_at_the_limit_keep_what_was_parsed(
    server: FakeOpenAIServer,
) -> None:
    server.script(FakeReply(calls=[("circle_area", {})], finish_reason="length"))
    gateway = gateway_for(server)
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert chosen == [FunctionChoice(name="circle_area", arguments={})]


def test_a_call_written_with_parameters_instead_of_arguments_is_read() -> None:
    [call] = calls_in_text('{"name": "f", "parameters": {"x": 1}}')
    assert call == FunctionChoice(name="f", arguments={"x": 1})


# -- which arguments a tool runs with ----------------------------------------------------------


async def test_the_first_call_of_a_tool_gives_its_arguments() -> None:
    model = ScriptedModel().on_choose(lambda prompt, names: {"triangle_area": {"base": 2}})
    model.on_suitability(["triangle_area"]).on_answer()
    selection = SelectionSettings(
        choice="function_call", parameters_from_choice=True, confirm="off"
    )
    settings = OrchestratorSettings(selection=selection)
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=settings
    )

    answer = await conversation.ask(TASK)

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]  # confirm: off takes them too
    assert answer.text == "base 2.0"


async def test_arguments_the_parameter_model_does_not_know_are_not_used() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"length": 3}, "echo": None})
    model.on_suitability(["triangle_area"]).on_extract(Sides, {"base": 4}).on_answer()
    conversation = conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=from_choice()
    )

    answer = await conversation.ask(TASK)

    assert answer.text == "base 4.0"  # extracted: "length" was made up


def test_arguments_from_the_choice_need_the_choice_by_function_call() -> None:
    with pytest.raises(ValidationError, match="parameters_from_choice needs choice"):
        SelectionSettings(parameters_from_choice=True, choice="constrained")
