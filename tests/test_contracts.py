"""The contracts of SPEC §2 that a plugin author writes against."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from toolwire import (
    AGENT_COORDINATOR_MARKER,
    AgentCoordinator,
    ChatbotTool,
    ClarifiableContextConsumerTool,
    ContextConsumerTool,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolDeclarationError,
    ToolExecutionResult,
    extract_coordinator_original,
    extract_coordinator_task,
)
from toolwire.search.deep_search import AbstractDeepSearchCoordinatorTool
from toolwire.tools import ResultKind, execute_method_problems, tool_kinds, validate_tool_class


class Params(BaseModel):
    city: str = ""


class GenericTool(OrchestratorActivatedTool[Params]):
    def executable_instruction(self) -> str:
        return "Is it about a city?"


class AttributeTool(ChatbotTool):  # type: ignore[type-arg]
    params_model = Params

    def executable_instruction(self) -> str:
        return "x"


class WeatherForecastTool(GenericTool):
    """Inherits its parameter model from the generic argument of a base class."""


def test_marker_helpers_split_an_execution_text() -> None:
    text = f"What about Paris?{AGENT_COORDINATOR_MARKER}Find the weather in Paris"
    assert extract_coordinator_task(text) == "Find the weather in Paris"
    assert extract_coordinator_original(text) == "What about Paris?"
    assert GenericTool().is_coordinator_requested(text)


def test_marker_helpers_leave_a_plain_message_alone() -> None:
    assert extract_coordinator_task("just a question") == "just a question"
    assert extract_coordinator_original("just a question") == "just a question"
    assert not GenericTool().is_coordinator_requested("just a question")


def test_json_original_round_trips_verbatim() -> None:
    original = json.dumps({"products": ["Advil", "Coumadin"], "note": "a\nb"})
    task = TaskInfo(task_no="1.1", task_prompt="check the pair", prompt_context=original)
    text = task.execution_text()
    assert json.loads(extract_coordinator_original(text)) == json.loads(original)
    assert extract_coordinator_task(text) == "check the pair"


def test_params_model_from_generic_or_class_attribute() -> None:
    assert GenericTool.params_model is Params
    assert AttributeTool.params_model is Params
    assert WeatherForecastTool.params_model is Params


def test_default_name_is_snake_case_without_tool_suffix() -> None:
    assert WeatherForecastTool.name == "weather_forecast"
    assert GenericTool.name == "generic"


def test_validate_tool_class_accepts_a_good_class() -> None:
    assert validate_tool_class(GenericTool) is GenericTool


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        (int, "is not a ChatbotTool subclass"),
        ("pkg:Tool", "is not a ChatbotTool subclass"),
    ],
)
def test_validate_tool_class_rejects_non_tools(candidate: object, message: str) -> None:
    with pytest.raises(ToolDeclarationError, match=message):
        validate_tool_class(candidate, where="here.yaml:3")


def test_validate_tool_class_lists_every_problem() -> None:
    class Bad(ChatbotTool):  # type: ignore[type-arg]
        name = "Bad-Name"
        settings_model = dict  # type: ignore[assignment]

    with pytest.raises(ToolDeclarationError) as raised:
        validate_tool_class(Bad)
    message = str(raised.value)
    assert "abstract methods unimplemented: executable_instruction" in message
    assert "no parameter model" in message
    assert "settings_model must be a pydantic BaseModel" in message
    assert "'Bad-Name' is not lower snake case" in message


RUNS_THROUGH = ": an activated tool runs through it, and the base's raises NotImplementedError"


def test_a_misspelt_execute_method_is_named_with_its_closest_definition() -> None:
    """It used to load, pass ``toolwire check`` and raise NotImplementedError mid-chat: the
    container now says so once the enabled tool is built (see test_app)."""

    class Misspelt(OrchestratorActivatedTool[Params]):
        def executable_instruction(self) -> str:
            return "Is it about a city?"

        def execute_with_results(self, params: Params, text: str) -> ToolExecutionResult:
            return ToolExecutionResult.context(params.city)

    assert execute_method_problems(Misspelt) == execute_method_problems(Misspelt()) == [
        "it does not define execute_with_result(params, text) (did you mean "
        f"'execute_with_results'?){RUNS_THROUGH}"
    ]


class WorkInProgress(OrchestratorActivatedTool[Params]):
    """A work in progress: no execute method."""

    def executable_instruction(self) -> str:
        return "Is it about a city?"


class SelfDelegating(WorkInProgress):
    """Sets its execute method in ``__init__``."""

    def __init__(self) -> None:
        self.execute_with_result = lambda params, text: ToolExecutionResult.context("ok")


def test_registration_does_not_ask_for_an_execute_method() -> None:
    """It runs before the YAML says whether the tool is enabled: a disabled work in progress,
    or a tool that sets ``self.execute_with_result`` in ``__init__``, used to be refused (and
    through the register_tools hook, its whole plugin)."""

    assert validate_tool_class(WorkInProgress) is WorkInProgress
    assert validate_tool_class(SelfDelegating) is SelfDelegating
    assert execute_method_problems(SelfDelegating()) == []


def test_a_class_whose_init_assigns_the_execute_method_is_left_to_its_built_tool() -> None:
    """The class alone cannot tell (the container checks classes only when the build stops for
    other problems): its own __init__ or an author's base's that names the method may set it;
    a toolwire base's __init__ does not count."""

    class Inherits(SelfDelegating):
        def __init__(self) -> None:
            super().__init__()

    class Other(WorkInProgress):
        def __init__(self, city: str = "") -> None:
            self.city = city

    assert execute_method_problems(SelfDelegating) == execute_method_problems(Inherits) == []
    assert execute_method_problems(Other) == execute_method_problems(WorkInProgress) == [
        f"it does not define execute_with_result(params, text){RUNS_THROUGH}"
    ]
    assert execute_method_problems(Other()) == execute_method_problems(WorkInProgress)


def test_a_missing_execute_method_is_named_without_a_guess_when_nothing_is_close() -> None:
    class Silent(OrchestratorActivatedTool[Params]):
        def executable_instruction(self) -> str:
            return "Is it about a city?"

        def execute_with_clarification(self, params, text, clarification):  # type: ignore[no-untyped-def]
            return ToolExecutionResult.context("")  # an override is not a misspelling

    assert execute_method_problems(Silent) == [
        f"it does not define execute_with_result(params, text){RUNS_THROUGH}"
    ]


def test_a_misspelt_abstract_method_is_named_with_its_closest_definition() -> None:
    class Reader(ContextConsumerTool[Params]):
        def executable_instruction(self) -> str:
            return "x"

        def execute_with_prior_contxt(self, params, text, prior_context):  # type: ignore[no-untyped-def]
            return ToolExecutionResult.context("")

    with pytest.raises(
        ToolDeclarationError,
        match=(
            r"it leaves abstract methods unimplemented: execute_with_prior_context "
            r"\(did you mean 'execute_with_prior_contxt'\?\)$"
        ),
    ):
        validate_tool_class(Reader)


def test_tools_that_never_run_execute_with_result_need_not_define_it() -> None:
    """A plain tool is called through its own methods (by injection), a context consumer
    through execute_with_prior_context, and a coordinator_only coordinator only decomposes (it
    is never a selection candidate)."""

    class Plan(OrchestratorActivatedTool[Params], AgentCoordinator):
        coordinator_only = True

        def executable_instruction(self) -> str:
            return "x"

        def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
            return task

    class Reader(ContextConsumerTool[Params], OrchestratorActivatedTool[Params]):
        def executable_instruction(self) -> str:
            return "x"

        def execute_with_prior_context(self, params, text, prior_context):  # type: ignore[no-untyped-def]
            return ToolExecutionResult.context("")

    assert execute_method_problems(AttributeTool) == []
    assert execute_method_problems(Plan) == []
    assert execute_method_problems(Reader) == []


def test_a_coordinator_that_is_a_selection_candidate_needs_execute_with_result() -> None:
    """Not coordinator_only: selection may choose it, and it then runs execute_with_result
    (every coordinator used to be exempt)."""

    class Plan(OrchestratorActivatedTool[Params], AgentCoordinator):
        def executable_instruction(self) -> str:
            return "Does this need a plan?"

        def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
            return task

    assert execute_method_problems(Plan) == [
        f"it does not define execute_with_result(params, text){RUNS_THROUGH}"
    ]


def test_a_guess_at_a_missing_method_is_never_one_of_toolwires() -> None:
    """Only toolwire.tools' methods were left out of the guesses: a subclass of a toolwire
    base defined elsewhere was told "get_search_tool (did you mean 'get_search_tool'?)"."""

    class Deep(AbstractDeepSearchCoordinatorTool):
        pass

    with pytest.raises(
        ToolDeclarationError, match=r"it leaves abstract methods unimplemented: get_search_tool$"
    ):
        validate_tool_class(Deep)


def test_examples_written_as_one_string_are_refused_with_the_fix() -> None:
    """``("Rain tomorrow?")`` is a string, not a tuple: it was indexed letter by letter."""

    class Forgetful(GenericTool):
        examples = "Rain tomorrow?"  # meant ("Rain tomorrow?",)

    with pytest.raises(ToolDeclarationError) as raised:
        validate_tool_class(Forgetful, where="register_tools")
    assert str(raised.value) == (
        f"tool class {__name__}.{Forgetful.__qualname__} (register_tools): its examples is the "
        "string 'Rain tomorrow?', not a tuple of messages; write examples = ('Rain tomorrow?',) "
        "with the trailing comma"
    )


@pytest.mark.parametrize("examples", [["Rain?", 3], {"Rain?"}, None])
def test_examples_must_be_a_list_or_tuple_of_strings(examples: object) -> None:
    class Odd(GenericTool):
        pass

    Odd.examples = examples  # type: ignore[assignment]
    with pytest.raises(ToolDeclarationError, match="is not a list or tuple of strings"):
        validate_tool_class(Odd)


class Unfillable(BaseModel):
    callback: Callable[[int], int]


def test_a_parameter_model_without_a_json_schema_is_refused_at_registration() -> None:
    """The model fills parameters from their JSON schema: such a tool used to load, pass
    ``toolwire check`` and then fail every question that activated it."""

    class Hooked(OrchestratorActivatedTool[Unfillable]):
        def executable_instruction(self) -> str:
            return "x"

        def execute_with_result(self, params: Unfillable, text: str) -> ToolExecutionResult:
            return ToolExecutionResult.context("")

    with pytest.raises(ToolDeclarationError) as raised:
        validate_tool_class(Hooked, where="register_tools")
    assert "its parameter model Unfillable has no JSON schema (" in str(raised.value)
    assert "CallableSchema" in str(raised.value)
    assert "give its fields JSON types" in str(raised.value)


def test_tool_kinds() -> None:
    class Plan(OrchestratorActivatedTool[Params], AgentCoordinator):
        def executable_instruction(self) -> str:
            return "x"

        def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
            return task

    class Reader(ClarifiableContextConsumerTool[Params]):
        def executable_instruction(self) -> str:
            return "x"

        def execute_with_prior_context(self, params, text, prior_context):  # type: ignore[no-untyped-def]
            return ToolExecutionResult.context("")

        def execute_with_clarification_and_prior_context(  # type: ignore[no-untyped-def]
            self, params, text, clarification, prior_context
        ):
            return ToolExecutionResult.context("")

    assert tool_kinds(AttributeTool) == []
    assert tool_kinds(Plan) == ["activated", "coordinator"]
    assert tool_kinds(Reader) == ["context_consumer", "clarifiable"]
    assert issubclass(Reader, ContextConsumerTool)
    with pytest.raises(TypeError, match="execute_with_prior_context"):
        Reader().execute_with_result(Params(), "text")


def test_results_say_what_they_are() -> None:
    assert ToolExecutionResult.as_guaranteed_context("x").kind is ResultKind.GUARANTEED
    assert ToolExecutionResult.clarifying_question("which?").kind is ResultKind.CLARIFICATION
    assert ToolExecutionResult.terminal("done").kind is ResultKind.TERMINAL
    assert ToolExecutionResult.context("c").kind is ResultKind.CONTEXT


def test_the_parameter_instruction_names_the_tool_and_not_its_suitability_question() -> None:
    class Query(BaseModel):
        product: str

    class CoordinatorOnlyLookupTool(ChatbotTool[Query]):
        """Finds a product's active substances."""

        def executable_instruction(self) -> str:
            return "coordinator_only_lookup: always false - runs only on designated tasks"

    instruction = CoordinatorOnlyLookupTool().parameter_instruction()

    assert "coordinator_only_lookup" in instruction
    assert "Finds a product's active substances." in instruction
    assert "always false" not in instruction
