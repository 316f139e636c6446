"""``confirm: with_parameters``: a single chosen tool's yes/no answer carries its parameters,
several chosen tools are confirmed in one call (the scripted model, then the real chat model
against the fake server)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from orchestration_kit import EchoTool, domain, selection_of
from toolwire import OrchestratorActivatedTool, TaskInfo, ToolExecutionResult
from toolwire.errors import ModelError
from toolwire.llm import OpenAIGateway, Purpose, SuitabilityQuestion, prompts
from toolwire.orchestrator import ConversationService
from toolwire.settings import LLMSettings, OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for, orchestrator_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest

WITH_PARAMETERS = OrchestratorSettings(selection=SelectionSettings(confirm="with_parameters"))
QUESTION = "Does the message ask for the area of a triangle?"


class Area(BaseModel):
    base: float = Field(description="length of the triangle's base")
    height: float = Field(description="height over that base")


class TriangleArea(OrchestratorActivatedTool[Area]):
    """Computes the area of a triangle from its base and height."""

    def __init__(self, instruction_error: Exception | None = None) -> None:
        self.instruction_error = instruction_error

    def executable_instruction(self) -> str:
        return QUESTION

    def parameter_instruction(self) -> str:
        if self.instruction_error is not None:
            raise self.instruction_error
        return super().parameter_instruction()

    def execute_with_result(self, params: Area, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"area {params.base * params.height / 2:g}")


def asking(model: ScriptedModel, triangle: TriangleArea | None = None) -> ConversationService:
    tools = (triangle or TriangleArea(), EchoTool("bmi", "bmi 22"))
    return conversation_for(domain(), *tools, model=model, settings=WITH_PARAMETERS)


# -- with the scripted model ------------------------------------------------------------------


async def test_a_confirmed_tool_gets_its_parameters_from_the_same_call() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_extract(Area, {"base": 3, "height": 4}).on_answer()

    answer = await asking(model).ask("A triangle 3 wide and 4 tall: its area?")

    assert model.purposes == [Purpose.CHOICE, Purpose.PARAMETERS, Purpose.ANSWER]
    [confirmation] = model.calls_for(Purpose.PARAMETERS)
    assert (confirmation.inputs["question"], confirmation.inputs["schema"]) == (QUESTION, "Area")
    assert selection_of(answer).why("demo.triangle_area") == "chosen and confirmed"
    assert answer.text == "area 6"


async def test_a_refused_tool_does_not_run_and_nothing_more_is_asked() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability([]).on_answer("none")

    answer = await asking(model).ask("Write a poem about triangles")

    assert model.purposes == [Purpose.CHOICE, Purpose.PARAMETERS, Purpose.ANSWER]
    selection = selection_of(answer)
    assert (selection.answers, selection.activated) == ({"demo.triangle_area": False}, [])
    assert selection.why("demo.triangle_area") == "chosen, refused on its question"
    assert answer.trace.tools == []


async def test_a_yes_without_valid_parameters_extracts_them_in_a_call_of_their_own() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_extract(Area, None, times=1)  # the confirmation's parameters are invalid
    model.on_extract(Area, {"base": 2, "height": 5}).on_answer()

    answer = await asking(model).ask("A triangle 2 wide and 5 tall: its area?")

    assert model.purposes == [
        Purpose.CHOICE, Purpose.PARAMETERS, Purpose.PARAMETERS, Purpose.ANSWER
    ]  # fmt: skip
    assert answer.text == "area 5"


async def test_a_tool_without_parameters_is_asked_its_plain_question() -> None:
    model = ScriptedModel().on_choose(["bmi"]).on_suitability(["bmi"]).on_answer()

    answer = await asking(model).ask("My BMI at 70 kg and 1.8 m?")

    assert model.purposes == [Purpose.CHOICE, Purpose.SUITABILITY, Purpose.ANSWER]
    assert answer.text == "bmi 22"


async def test_several_chosen_tools_are_confirmed_in_one_call_and_extracted_on_their_own() -> None:
    model = ScriptedModel().on_choose(["triangle_area", "bmi"])
    model.on_suitability(["triangle_area"])  # bmi: refused
    model.on_extract(Area, {"base": 3, "height": 4}).on_answer()

    answer = await asking(model).ask("A triangle 3 wide and 4 tall: its area, and my BMI?")

    assert model.purposes == [
        Purpose.CHOICE, Purpose.SUITABILITY, Purpose.PARAMETERS, Purpose.ANSWER
    ]  # fmt: skip
    [confirmation] = model.calls_for(Purpose.SUITABILITY)
    assert (confirmation.inputs["tool_names"], confirmation.inputs["batched"]) == (
        ["demo.triangle_area", "demo.bmi"],
        True,
    )
    selection = selection_of(answer)
    assert selection.answers == {"demo.triangle_area": True, "demo.bmi": False}
    assert selection.activated == ["demo.triangle_area"]
    assert answer.text == "area 6"


async def test_a_raising_parameter_instruction_is_a_recorded_failure_of_the_extraction() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_answer("no result")  # no parameters scripted: the extraction of its own follows
    broken = TriangleArea(instruction_error=RuntimeError("instruction store down"))

    answer = await asking(model, broken).ask("A triangle 3 wide and 4 tall: its area?")

    # the confirmation does not need the instruction; the tool's own extraction then fails
    assert model.purposes == [Purpose.CHOICE, Purpose.PARAMETERS, Purpose.ANSWER]
    assert selection_of(answer).activated == ["demo.triangle_area"]
    assert len(answer.failures) == 1
    assert "parameter_instruction() raised RuntimeError" in answer.failures[0]


async def test_a_failed_confirmation_runs_the_tool_unconfirmed_with_its_own_extraction() -> None:
    model = ScriptedModel().on_choose(["triangle_area"])
    model.on_suitability(ModelError("parameters", "server down"), times=1)
    model.on_extract(Area, {"base": 3, "height": 4}).on_answer()

    answer = await asking(model).ask("A triangle 3 wide and 4 tall: its area?")

    assert answer.text.startswith("area 6")
    assert model.purposes == [
        Purpose.CHOICE, Purpose.PARAMETERS, Purpose.PARAMETERS, Purpose.ANSWER
    ]  # fmt: skip
    assert selection_of(answer).why("demo.triangle_area") == "chosen (not confirmed)"
    assert answer.failures == [
        "task 1: confirmation failed, the chosen tools run unconfirmed: model call for "
        "'parameters' failed: server down (after 1 attempt(s))"
    ]


async def test_a_task_with_prompt_context_confirms_on_the_task_prompt_alone() -> None:
    model = ScriptedModel().on_choose(["triangle_area"]).on_suitability(["triangle_area"])
    model.on_extract(Area, {"base": 3, "height": 4}).on_answer()
    orchestrator = orchestrator_for(
        domain(), TriangleArea(), EchoTool("bmi"), model=model, settings=WITH_PARAMETERS
    )
    task = TaskInfo(task_prompt="And its area?", prompt_context="A triangle 3 wide, 4 tall.")

    result = await orchestrator.run_round(task)

    # the selection never sees the prompt context; the parameters are extracted from both
    assert model.purposes == [
        Purpose.CHOICE, Purpose.SUITABILITY, Purpose.PARAMETERS, Purpose.ANSWER
    ]  # fmt: skip
    [confirmation] = model.calls_for(Purpose.SUITABILITY)
    assert confirmation.inputs["task_prompt"] == "And its area?"
    [extraction] = model.calls_for(Purpose.PARAMETERS)
    assert "A triangle 3 wide, 4 tall." in extraction.inputs["text"]
    assert result.text == "area 6"


# -- the chat model's call ----------------------------------------------------------------------


async def test_the_chat_model_asks_the_plain_question_and_reads_the_parameters_of_a_yes() -> None:
    def reply(request: FakeRequest) -> FakeReply:
        if "triangle 3 by 4" in request.messages[1]["content"]:
            return FakeReply(
                text=json.dumps(
                    {"reply": {"answer": "yes", "parameters": {"base": 3, "height": 4}}}
                )
            )
        refusal = {"answer": "no"}
        schema = request.output_schema or {}
        return FakeReply(
            text=json.dumps(
                {"reply": refusal} if "reply" in schema.get("properties", {}) else refusal
            )
        )

    question = SuitabilityQuestion(tool_name="demo.triangle_area", question=QUESTION)
    async with FakeOpenAIServer(reply) as server:
        gateway = OpenAIGateway(
            LLMSettings(base_url=server.base_url, model="fake", structured_output="json_schema"),
            api_key="test",
        )
        confirmed = await gateway.confirm_with_parameters(
            "Area of a triangle 3 by 4?", question, Area
        )
        refused = await gateway.confirm_with_parameters("Write a poem", question, Area)
        await gateway.suitability("Write a poem", [question], batched=False)
        await gateway.aclose()

    assert confirmed == (True, Area(base=3, height=4))
    assert refused == (False, None)
    with_parameters, plain = server.chat_requests[1], server.chat_requests[2]
    # the prompt is the tool's own yes/no question, byte for byte: nothing about parameters
    assert with_parameters.messages == plain.messages
    assert "parameter" not in with_parameters.messages[1]["content"]
    assert with_parameters.messages[1]["content"].endswith(f"Question: {QUESTION}")
    # the parameters are in the output constraint only, and only after a "yes"
    schema = with_parameters.output_schema
    assert schema is not None
    branches = schema["$defs"]
    assert branches["Refused"]["properties"]["answer"]["const"] == "no"
    assert branches["ConfirmedArea"]["properties"]["answer"]["const"] == "yes"
    assert branches["ConfirmedArea"]["required"] == ["answer", "parameters"]


@pytest.mark.parametrize(
    "output",
    [
        {"reply": {"answer": "maybe"}},
        {"reply": {"answer": "yes", "parameters": {"base": "wide"}}},
        {"answer": "no"},
    ],
    ids=["answer outside yes/no", "yes with invalid parameters", "no reply object"],
)
async def test_the_chat_model_refuses_an_answer_outside_the_schema(output: object) -> None:
    question = SuitabilityQuestion(tool_name="demo.triangle_area", question=QUESTION)
    text = json.dumps(output)
    async with FakeOpenAIServer(lambda request: FakeReply(text=text)) as server:
        gateway = OpenAIGateway(
            LLMSettings(base_url=server.base_url, model="fake", max_retries=0), api_key="test"
        )
        with pytest.raises(ModelError, match="did not match the schema"):
            await gateway.confirm_with_parameters("Area of a triangle 3 wide?", question, Area)
        await gateway.aclose()

    assert len(server.chat_requests) == 2  # the answer, then one corrective retry


@pytest.mark.parametrize("examples", [True, False])
async def test_the_confirmation_carrying_parameters_follows_the_worked_examples_setting(
    examples: bool,
) -> None:
    """Its prompt is the plain question's, worked examples included or left out as
    ``llm.suitability_examples`` says; a refusal carries no parameters either way."""

    def refuse(request: FakeRequest) -> FakeReply:
        return FakeReply(text=json.dumps({"reply": {"answer": "no"}}))

    question = SuitabilityQuestion(tool_name="demo.triangle_area", question=QUESTION)
    async with FakeOpenAIServer(refuse) as server:
        settings = LLMSettings(
            base_url=server.base_url,
            model="fake",
            structured_output="json_schema",
            suitability_examples=examples,
        )
        gateway = OpenAIGateway(settings, api_key="test")
        refused = await gateway.confirm_with_parameters("Write a poem", question, Area)
        await gateway.aclose()

    assert refused == (False, None)
    [request] = server.chat_requests
    system = request.messages[0]["content"]
    assert system == (
        f"{prompts.RULES}\n\n{prompts.SUITABILITY_EXAMPLES}" if examples else prompts.RULES
    )
