"""The ``call`` selection step: the candidates offered to the model's native function calling
(the OpenAI-compatible transport reads the calls from ``tool_calls`` or from the text; a
provider without function calling gets a constrained choice), the called tools selected, and a
call's arguments carried when they are valid and the task's parameters come from its prompt
alone. Steps ``[retrieve, call]`` and ``[retrieve, call, confirm]``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_validator
from structlog.testing import capture_logs

from orchestration_kit import EchoTool, domain, selection_of
from toolwire import OrchestratorActivatedTool, TaskInfo, ToolExecutionResult
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
from toolwire.llm.profiles import ModelProfile
from toolwire.selection.pipeline import ToolSelector
from toolwire.selection.selectable import ToolCatalogue
from toolwire.selection.steps import builtin_steps
from toolwire.settings import LLMSettings, OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for, orchestrator_for
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


# -- the call step ----------------------------------------------------------------------------


class Sides(BaseModel):
    base: float = Field(description="length of the base")


class TriangleArea(OrchestratorActivatedTool[Sides]):
    """Computes a triangle's area."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a triangle?"

    def execute_with_result(self, params: Sides, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"base {params.base}")


CALL = ["retrieve", "call"]
CALL_CONFIRM = ["retrieve", "call", "confirm"]


def calling(model: ScriptedModel, *tools: Any, steps: list[str] = CALL_CONFIRM) -> Any:
    settings = OrchestratorSettings(selection=SelectionSettings(steps=steps))
    tools = tools or (TriangleArea(), EchoTool("echo"))
    return conversation_for(domain(), *tools, model=model, settings=settings)


async def test_the_call_step_offers_functions_and_selects_the_called_tools() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_extract(Sides, {"base": 3})
    model.on_answer()

    answer = await calling(model, steps=CALL).ask(TASK)

    [choice] = model.calls_for(Purpose.CHOICE)
    assert choice.inputs["calls"] is True  # choose_functions, not a constrained choice
    assert model.purposes == [Purpose.CHOICE, Purpose.PARAMETERS, Purpose.ANSWER]  # no question
    assert [run.tool_name for run in answer.trace.tools] == ["demo.triangle_area"]
    selection = selection_of(answer)
    assert selection.why("demo.triangle_area") == "called"  # no arguments in the call
    assert selection.describe() == "retrieve (2 candidate(s), all) → call"


async def test_the_choose_step_asks_for_a_constrained_choice_not_a_call() -> None:
    model = ScriptedModel().on_choose(["echo"]).on_suitability(["echo"]).on_answer()

    await calling(model, steps=["retrieve", "choose", "confirm"]).ask("echo hi")

    [choice] = model.calls_for(Purpose.CHOICE)
    assert "calls" not in choice.inputs


async def test_a_called_tool_is_confirmed_on_its_question_when_confirm_follows() -> None:
    model = ScriptedModel().on_choose(["triangle_area", "echo"]).on_suitability(["triangle_area"])
    model.on_extract(Sides, {"base": 3}).on_answer()

    answer = await calling(model).ask(TASK)

    assert [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)] == [
        ["demo.triangle_area"],
        ["demo.echo"],
    ]
    selection = selection_of(answer)
    assert selection.activated == ["demo.triangle_area"]
    assert selection.why("demo.echo") == "called; refused on its question"
    assert [run.tool_name for run in answer.trace.tools] == ["demo.triangle_area"]


async def test_a_call_that_calls_nothing_selects_nothing_and_asks_nothing() -> None:
    model = ScriptedModel().on_choose([]).on_answer("no tool")

    answer = await calling(model).ask("write me a poem")

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]
    step = selection_of(answer).step("call")
    assert step is not None and step.note == "no function called"
    assert answer.trace.tools == []


async def test_a_failing_call_is_a_recorded_failure_and_no_tool_runs() -> None:
    model = ScriptedModel().on_choose(ModelError("choice", "timeout")).on_answer("composed")
    echo = EchoTool("echo")

    answer = await calling(model, TriangleArea(), echo).ask(TASK)

    assert answer.failures == [
        "task 1: call: the function call failed, no tool called: model call for 'choice' "
        "failed: timeout (after 1 attempt(s))"
    ]
    assert Purpose.SUITABILITY not in model.purposes  # nothing left to confirm
    assert answer.trace.tools == [] and echo.texts == []


async def test_a_tool_offered_as_a_function_carries_its_parameters_schema(
    server: FakeOpenAIServer,
) -> None:
    """Through the orchestrator and the real gateway: the offered function is the tool's short
    name with its parameter model's schema; a called name that is no candidate is ignored."""
    server.script(FakeReply(calls=[("triangle_area", {"base": 3}), ("square_area", {})]))
    gateway = gateway_for(server)

    answer = await calling(gateway, steps=CALL).ask(TASK)  # type: ignore[arg-type]
    await gateway.aclose()

    offered = server.chat_requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in offered] == ["triangle_area", "echo"]
    assert offered[0]["function"]["parameters"] == TriangleArea().params_model.model_json_schema()
    assert json.dumps(offered)  # sent as JSON, as it is
    selection = selection_of(answer)
    assert selection.activated == ["demo.triangle_area"]
    assert selection.ignored == ["square_area"]
    _call, answer_request = server.chat_requests  # no extraction: the call's arguments ran
    assert "base 3.0" in json.dumps(answer_request.messages)


# -- which arguments a tool runs with ----------------------------------------------------------


@pytest.mark.parametrize("steps", [CALL, CALL_CONFIRM], ids=["call", "call-confirm"])
async def test_valid_arguments_of_a_call_spare_the_tools_extraction(steps: list[str]) -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}, "echo": None})
    model.on_suitability(["triangle_area"]).on_answer()

    answer = await calling(model, steps=steps).ask(TASK)

    assert Purpose.PARAMETERS not in model.purposes
    assert answer.text.startswith("base 3.5")  # the tool ran with the call's arguments
    assert (
        selection_of(answer).why("demo.triangle_area").startswith("called (its arguments carried)")
    )


@pytest.mark.parametrize(
    "arguments",
    [{"base": "wide"}, {"length": 3}, {}],
    ids=["invalid", "made-up-name", "none-given"],
)
async def test_arguments_that_do_not_fit_the_parameter_model_are_extracted_as_usual(
    arguments: dict[str, Any],
) -> None:
    model = ScriptedModel().on_choose({"triangle_area": arguments, "echo": None})
    model.on_suitability(["triangle_area"]).on_extract(Sides, {"base": 4}).on_answer()

    answer = await calling(model).ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text == "base 4.0"
    assert selection_of(answer).why("demo.triangle_area") == "called; confirmed on its question"


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

    answer = await calling(model, StrictArea(), EchoTool("echo")).ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text == "base 3.0"


async def test_a_refused_tool_keeps_no_arguments() -> None:
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}})
    model.on_suitability([]).on_answer()

    answer = await calling(model).ask(TASK)

    assert answer.trace.tools == [] and Purpose.PARAMETERS not in model.purposes


async def test_the_first_call_of_a_tool_gives_its_arguments() -> None:
    model = ScriptedModel().on_choose(
        lambda prompt, names: {"triangle_area": {"base": 2}}  # one call per name in a mapping
    )
    model.on_answer()

    answer = await calling(model, steps=CALL).ask(TASK)

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]
    assert answer.text == "base 2.0"


def area_selector(steps: list[str]) -> ToolSelector:
    catalogue = ToolCatalogue.build([("demo.triangle_area", TriangleArea(), ())])
    return ToolSelector(catalogue, builtin_steps(SelectionSettings(steps=steps)))


async def test_arguments_are_carried_only_when_the_parameters_come_from_the_task_alone() -> None:
    """A task with prompt context or a status block has its parameters extracted from more than
    its prompt, so the call's arguments, written from the prompt alone, are not carried."""
    model = ScriptedModel().on_choose({"triangle_area": {"base": 3.5}})
    selector = area_selector(CALL)

    from_task = await selector.select(TASK, model, attempts=1)
    with_context = await selector.select(TASK, model, attempts=1, parameters_from_task=False)

    assert from_task.parameters == {"demo.triangle_area": Sides(base=3.5)}
    assert with_context.parameters == {}
    assert with_context.record.activated == ["demo.triangle_area"]
    assert with_context.record.why("demo.triangle_area") == "called"


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
    settings = LLMSettings(base_url=server.base_url, model="m", max_retries=2)
    profile = ModelProfile(structured_output="json_schema")
    gateway = OpenAIGateway(settings, profile=profile, api_key="k")
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


async def test_an_error_about_one_offered_function_is_no_refusal(server: FakeOpenAIServer) -> None:
    """OpenAI's 400 on one function (a name too long, an MCP tool's invalid parameters) fails
    that call alone: function calling stays offered."""
    too_long = (
        "Invalid 'tools[3].function.name': string too long. Expected a string with maximum "
        "length 64, but got a string with length 70 instead."
    )
    server.script(FakeReply(status=400, error=too_long), FakeReply(calls=[("circle_area", {})]))
    gateway = gateway_for(server)
    with pytest.raises(ModelError, match=r"HTTP 400: Invalid 'tools\[3\]") as raised:
        await gateway.choose_functions(TASK, OPTIONS)
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert type(raised.value) is ModelError and gateway.offers_functions
    assert chosen == [FunctionChoice(name="circle_area", arguments={})]
    assert all(request.offered_functions for request in server.chat_requests)


@pytest.mark.parametrize(("arguments", "read"), [({"base": 3}, {"base": 3}), (None, {})])
async def test_arguments_sent_as_an_object_or_null_are_read(
    server: FakeOpenAIServer, arguments: dict[str, Any] | None, read: dict[str, Any]
) -> None:
    """Some servers (llama.cpp for a while, TGI) send the arguments as an object, not JSON text."""
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "triangle_area", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    server.script(FakeReply(raw_body=json.dumps(body).encode()))
    gateway = gateway_for(server)
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert chosen == [FunctionChoice(name="triangle_area", arguments=read)]


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


async def test_a_profile_without_function_calling_gets_a_constrained_choice(
    server: FakeOpenAIServer,
) -> None:
    server.script(FakeReply(text='{"choice": ["circle_area"]}'))
    settings = LLMSettings(base_url=server.base_url, model="m", max_retries=0)
    profile = ModelProfile(structured_output="json_schema", function_calling=False)
    gateway = OpenAIGateway(settings, profile=profile, api_key="k")
    chosen = await gateway.choose_functions(TASK, OPTIONS)
    await gateway.aclose()

    assert chosen == [FunctionChoice(name="circle_area")]
    [request] = server.chat_requests
    assert "tools" not in request.body and "response_format" in request.body


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


async def test_a_task_with_prompt_context_is_called_on_its_prompt_alone_and_extracted() -> None:
    """Through the orchestrator: the call never sees the prompt context, and its arguments are
    not carried; the tool's parameters are extracted from the prompt and its context."""
    model = ScriptedModel().on_choose({"triangle_area": {"base": 9}})
    model.on_suitability(["triangle_area"]).on_extract(Sides, {"base": 3}).on_answer()
    settings = OrchestratorSettings(selection=SelectionSettings(steps=CALL_CONFIRM))
    orchestrator = orchestrator_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=settings
    )
    task = TaskInfo(task_prompt="And its area?", prompt_context="A triangle 3 wide, 4 tall.")

    result = await orchestrator.run_round(task)

    assert model.purposes == [
        Purpose.CHOICE, Purpose.SUITABILITY, Purpose.PARAMETERS, Purpose.ANSWER
    ]  # fmt: skip
    [call] = model.calls_for(Purpose.CHOICE)
    assert call.inputs["task_prompt"] == "And its area?"
    [extraction] = model.calls_for(Purpose.PARAMETERS)
    assert "A triangle 3 wide, 4 tall." in extraction.inputs["text"]
    assert result.text == "base 3.0"
