"""The ``arguments`` selection step: the tools ``choose`` and ``confirm`` kept are offered, alone,
to the model's native function calling, and a call's valid arguments spare the tool's extraction.
It never changes which tools run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from orchestration_kit import EchoTool, domain, selection_of
from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.errors import ModelError
from toolwire.llm import ChatModel, ChatReply, ChatRequest, Purpose
from toolwire.llm.profiles import ModelProfile
from toolwire.selection.pipeline import ToolSelector
from toolwire.selection.selectable import ToolCatalogue
from toolwire.selection.steps import builtin_steps
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for

TASK = "What is the area of a triangle 3 wide and 4 tall?"
STEPS = ["retrieve", "choose", "confirm", "arguments"]


class Sides(BaseModel):
    base: float = Field(description="length of the base")


class TriangleArea(OrchestratorActivatedTool[Sides]):
    """Computes a triangle's area."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a triangle?"

    def execute_with_result(self, params: Sides, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"base {params.base}")


def conversation(model: ScriptedModel) -> Any:
    settings = OrchestratorSettings(selection=SelectionSettings(steps=STEPS))
    return conversation_for(
        domain(), TriangleArea(), EchoTool("echo"), model=model, settings=settings
    )


async def test_the_confirmed_tool_alone_is_offered_and_its_call_gives_the_arguments() -> None:
    model = ScriptedModel().on_choose(["triangle_area", "echo"], times=1)
    model.on_suitability(["triangle_area"], times=1).on_suitability([]).on_choose(
        {"triangle_area": {"base": 3.5}}
    ).on_answer()

    answer = await conversation(model).ask(TASK)

    constrained, offered = model.calls_for(Purpose.CHOICE)
    assert "calls" not in constrained.inputs and offered.inputs["calls"] is True
    assert offered.inputs["options"] == ["triangle_area"]  # the refused echo is not offered
    assert Purpose.PARAMETERS not in model.purposes  # the call's arguments ran
    assert answer.text.startswith("base 3.5")
    selection = selection_of(answer)
    assert selection.activated == ["demo.triangle_area"]
    assert selection.why("demo.triangle_area") == (
        "named by the choice; confirmed on its question; its arguments carried from a call"
    )


async def test_arguments_that_do_not_fit_are_extracted_as_usual_and_the_tool_still_runs() -> None:
    model = ScriptedModel().on_choose(["triangle_area"], times=1).on_suitability(["triangle_area"])
    model.on_choose({"triangle_area": {"base": "wide"}}).on_extract(Sides, {"base": 4})
    model.on_answer()

    answer = await conversation(model).ask(TASK)

    assert len(model.calls_for(Purpose.PARAMETERS)) == 1
    assert answer.text.startswith("base 4.0")
    step = selection_of(answer).step("arguments")
    assert step is not None
    assert step.note == "no arguments carried; the tools' parameters are extracted as usual"


async def test_a_call_that_calls_nothing_changes_nothing_but_the_extraction_runs() -> None:
    model = ScriptedModel().on_choose(["triangle_area"], times=1).on_suitability(["triangle_area"])
    model.on_choose([]).on_extract(Sides, {"base": 2}).on_answer()

    answer = await conversation(model).ask(TASK)

    assert selection_of(answer).activated == ["demo.triangle_area"]
    assert answer.text.startswith("base 2.0")


async def test_a_failing_arguments_call_is_recorded_and_the_tools_still_run() -> None:
    model = ScriptedModel().on_choose(["triangle_area"], times=1).on_suitability(["triangle_area"])
    model.on_choose(ModelError("choice", "timeout")).on_extract(Sides, {"base": 2}).on_answer()

    answer = await conversation(model).ask(TASK)

    assert answer.text.startswith("base 2.0")
    assert answer.failures == [
        "task 1: arguments: the arguments call failed; the tools' parameters are extracted as "
        "usual: model call for 'choice' failed: timeout (after 1 attempt(s))"
    ]


async def test_no_call_when_nothing_was_selected() -> None:
    model = ScriptedModel().on_choose([]).on_answer("none")

    answer = await conversation(model).ask("write me a poem")

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]
    assert answer.trace.tools == []


async def test_no_call_when_the_parameters_do_not_come_from_the_task_alone() -> None:
    catalogue = ToolCatalogue.build([("demo.triangle_area", TriangleArea(), ())])
    selector = ToolSelector(catalogue, builtin_steps(SelectionSettings(steps=STEPS)))
    model = ScriptedModel().on_suitability(["triangle_area"])

    selection = await selector.select(TASK, model, attempts=1, parameters_from_task=False)

    assert selection.record.activated == ["demo.triangle_area"]
    assert selection.parameters == {}
    assert Purpose.CHOICE not in model.purposes  # a lone candidate: no choice, no arguments call


async def test_a_tool_without_parameters_is_not_offered_and_alone_makes_no_call() -> None:
    model = ScriptedModel().on_choose(["echo"], times=1).on_suitability(["echo"]).on_answer()

    answer = await conversation(model).ask("Say something back")

    assert len(model.calls_for(Purpose.CHOICE)) == 1  # the choice; no arguments call follows
    assert selection_of(answer).activated == ["demo.echo"]


async def test_beside_a_tool_without_parameters_only_the_one_with_them_is_offered() -> None:
    model = ScriptedModel().on_choose(["triangle_area", "echo"], times=1)
    model.on_suitability(["triangle_area", "echo"]).on_choose({"triangle_area": {"base": 2}})
    model.on_answer()

    answer = await conversation(model).ask(TASK)

    offered = model.calls_for(Purpose.CHOICE)[-1]
    assert offered.inputs["calls"] is True and offered.inputs["options"] == ["triangle_area"]
    assert sorted(selection_of(answer).activated) == ["demo.echo", "demo.triangle_area"]


class YesTransport:
    """A server that answers every request yes, and offers functions."""

    supports_functions = True

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        return ChatReply(text='{"answer": "yes"}', model="yes")

    async def aclose(self) -> None:
        pass


async def test_a_model_that_offers_no_functions_makes_no_arguments_call() -> None:
    """Without function calling the call would be a choice of names: it carries nothing."""
    transport = YesTransport()
    model = ChatModel(transport, profile=ModelProfile(function_calling=False))
    catalogue = ToolCatalogue.build([("demo.triangle_area", TriangleArea(), ())])
    selector = ToolSelector(catalogue, builtin_steps(SelectionSettings(steps=STEPS)))

    selection = await selector.select(TASK, model, attempts=1)

    assert [request.purpose for request in transport.requests] == ["suitability"]
    assert selection.record.activated == ["demo.triangle_area"]
    step = selection.record.step("arguments")
    assert step is not None and step.failure is None
    assert step.note == (
        "skipped: the model is offered no functions (the profile's function_calling, or its "
        "server), so a call would carry no arguments"
    )
