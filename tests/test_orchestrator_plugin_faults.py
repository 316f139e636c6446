"""Plugin code that fails in ways beyond an ordinary exception (issue 11 items 3, 4 and 5): a
suitability question that raises, ``SystemExit`` and ``KeyboardInterrupt``, a tool that never
returns. Each is recorded on the task like any other tool failure; the question goes on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from pydantic import BaseModel

from orchestration_kit import (
    AskingTool,
    Coordinator,
    EchoTool,
    NoParams,
    Query,
    QueryTool,
    domain,
    subtask,
)
from toolwire import TaskInfo, ToolExecutionResult
from toolwire.errors import PLUGIN_FAILURES, PluginExitError
from toolwire.llm import Purpose
from toolwire.settings import OrchestratorSettings
from toolwire.task import MAX_TASK_DEPTH
from toolwire.testing import ScriptedModel, conversation_for, orchestrator_for

M = TypeVar("M", bound=BaseModel)


class BrokenInstruction(EchoTool):
    """A tool whose suitability question cannot even be asked."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name, "never")
        self.error = error

    def executable_instruction(self) -> str:
        raise self.error


class AsyncRaiser(EchoTool):
    """An ``async`` tool that raises whatever it is given."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name)
        self.error = error

    async def execute_with_result(  # type: ignore[override]
        self, params: NoParams, text: str
    ) -> ToolExecutionResult:
        raise self.error


class OwnLoopRaiser(AsyncRaiser):
    """The same, on an event loop of its own in a tool thread."""

    own_event_loop = True


class SyncRaiser(EchoTool):
    """A plain tool (run in a tool thread) that raises whatever it is given."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name)
        self.error = error

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        raise self.error


class Stuck(EchoTool):
    """Never returns on its own: a plain tool blocks its thread, an async one sleeps."""

    def __init__(self, name: str, release: threading.Event, *, asynchronous: bool) -> None:
        super().__init__(name)
        self.release = release
        self.asynchronous = asynchronous

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        self.release.wait(30)
        return ToolExecutionResult.context("late")


class AsyncStuck(Stuck):
    async def execute_with_result(  # type: ignore[override]
        self, params: NoParams, text: str
    ) -> ToolExecutionResult:
        await asyncio.sleep(30)
        return ToolExecutionResult.context("late")


class OwnLoopStuck(AsyncStuck):
    own_event_loop = True


ABORTS = [SystemExit(3), KeyboardInterrupt()]
"""The ``BaseException``s plugin code raises that are recorded (``PLUGIN_FAILURES``)."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let a blocked tool thread finish after the test


# -- item 3: executable_instruction() raises ----------------------------------------------------
# (an ordinary exception: tests/test_selection.py; here what plugin code may raise beyond one)


@pytest.mark.parametrize("error", ABORTS, ids=type)
async def test_a_suitability_question_raising_systemexit_leaves_only_that_tool_out(
    scripted_model: ScriptedModel, error: BaseException
) -> None:
    broken = BrokenInstruction("broken", error)
    fine = EchoTool("fine", "fine context")
    scripted_model.on_suitability(["broken", "fine"]).on_answer()
    service = conversation_for(domain(), broken, fine, model=scripted_model)  # builds selection

    answer = await service.ask("q")
    second = await service.ask("another question")

    assert answer.kind == "answer" and answer.text.startswith("fine context")
    assert answer.failures == [
        f"task 1: tool demo.broken left out of selection: {type(error).__name__}"
        + (f": {error}" if str(error) else "")
    ]
    assert second.text.startswith("fine context")  # every question of the domain still works


async def test_no_selection_call_when_no_question_could_be_asked(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_answer("nothing found")
    service = conversation_for(
        domain(), BrokenInstruction("broken", ValueError("x")), model=scripted_model
    )

    answer = await service.ask("q")

    assert answer.text.startswith("nothing found")
    assert scripted_model.purposes == [Purpose.ANSWER]


# -- item 5: SystemExit and KeyboardInterrupt ---------------------------------------------------


@pytest.mark.parametrize("error", ABORTS, ids=type)
@pytest.mark.parametrize("kind", [SyncRaiser, AsyncRaiser, OwnLoopRaiser])
async def test_a_tool_raising_systemexit_or_keyboardinterrupt_is_a_recorded_failure(
    scripted_model: ScriptedModel, kind: type[EchoTool], error: BaseException
) -> None:
    raiser = kind("raiser", error)  # type: ignore[call-arg]
    raiser.priority = 1
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["raiser", "fine"]).on_answer()
    service = conversation_for(domain(), raiser, fine, model=scripted_model)

    answer = await service.ask("q")

    assert answer.kind == "answer" and answer.text.startswith("fine context")
    name = type(error).__name__
    assert answer.failures == [
        f"task 1: tool demo.raiser raised {name}" + (f": {error}" if str(error) else "")
    ]


@pytest.mark.parametrize("error", ABORTS, ids=type)
async def test_a_coordinator_raising_systemexit_is_undone_and_recorded(
    scripted_model: ScriptedModel, error: BaseException
) -> None:
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks.append(subtask("1.1", "half-made"))
        raise error

    coordinator = Coordinator("planner", decompose)
    echo = EchoTool("echo", "echoed")
    scripted_model.on_suitability(["echo"]).on_answer()
    service = conversation_for(domain(), coordinator, echo, model=scripted_model)

    answer = await service.ask("q")

    assert answer.trace.sub_tasks == []
    assert answer.trace.coordinators[0].outcome == "error"
    assert answer.failures[0].startswith(
        f"task 1: coordinator demo.planner raised {type(error).__name__}"
    )
    assert answer.text.startswith("echoed")


async def test_a_parameter_instruction_raising_systemexit_is_a_recorded_failure(
    scripted_model: ScriptedModel,
) -> None:
    class Careless(QueryTool):
        def parameter_instruction(self) -> str:
            raise SystemExit("no instruction")

    careless = Careless("careless")
    scripted_model.on_extract(Query, {"query": "x"}).on_answer("done")
    orchestrator = orchestrator_for(domain(), careless, model=scripted_model)
    task = TaskInfo(task_prompt="q", required_tool_names={"careless"})

    await orchestrator.run_round(task)

    assert task.run.failures == [
        "tool demo.careless: parameter_instruction() raised SystemExit: no instruction"
    ]
    assert careless.calls == []


@pytest.mark.parametrize("kind", [AsyncRaiser, OwnLoopRaiser])
async def test_cancellation_is_never_recorded_as_a_tool_failure(
    scripted_model: ScriptedModel, kind: type[AsyncRaiser]
) -> None:
    """``asyncio.CancelledError`` (a cancelled request, a time limit, a shutdown) must reach the
    caller, or a time limit around the question would silently not apply."""
    assert not issubclass(asyncio.CancelledError, PLUGIN_FAILURES)
    orchestrator = orchestrator_for(
        domain(), kind("canceller", asyncio.CancelledError()), model=scripted_model
    )

    with pytest.raises(asyncio.CancelledError):
        await orchestrator.run_round(TaskInfo(task_prompt="q", required_tool_names={"canceller"}))


class FirstExtractionExits(ScriptedModel):
    """Its first parameter extraction raises ``SystemExit`` once the others started; every other
    one waits for a reply that never comes."""

    def __init__(self) -> None:
        super().__init__()
        self.extractions = 0
        self.waiting: list[asyncio.Task[object]] = []

    async def extract(
        self,
        schema: type[M],
        text: str,
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> M | None:
        if purpose is not Purpose.PARAMETERS:
            return await super().extract(schema, text, instruction=instruction, purpose=purpose)
        self.extractions += 1
        if self.extractions == 1:
            await asyncio.sleep(0)  # the other extraction starts meanwhile
            raise SystemExit("the model gave up")
        current = asyncio.current_task()
        assert current is not None
        self.waiting.append(current)
        await asyncio.Event().wait()
        raise AssertionError("never reached")


async def test_an_extraction_ending_the_question_cancels_the_others() -> None:
    """Before, the other extraction went on after the question ended (it could call the model
    for a question nobody waits for any more)."""
    model = FirstExtractionExits().on_suitability(["first", "second"])
    service = conversation_for(domain(), QueryTool("first"), QueryTool("second"), model=model)

    with pytest.raises(PluginExitError):
        await service.ask("q")

    assert model.extractions == 2
    [other] = model.waiting
    assert other.cancelled()  # ended with the question: nothing of it is pending


# -- item 4: a tool that never returns ---------------------------------------------------------


@pytest.mark.parametrize(
    "tool_class", [Stuck, AsyncStuck, OwnLoopStuck], ids=["plain", "async", "own-loop"]
)
async def test_a_tool_over_its_time_limit_is_a_recorded_failure_and_the_rest_goes_on(
    scripted_model: ScriptedModel, release: threading.Event, tool_class: type[Stuck]
) -> None:
    stuck = tool_class("stuck", release, asynchronous=tool_class is AsyncStuck)
    stuck.priority = 1
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["stuck", "fine"]).on_answer()
    settings = OrchestratorSettings(tool_timeout_s=0.2)
    service = conversation_for(domain(), stuck, fine, model=scripted_model, settings=settings)

    answer = await asyncio.wait_for(service.ask("q"), timeout=10)

    assert answer.text.startswith("fine context")
    assert answer.failures == [
        "task 1: tool demo.stuck did not finish within 0.2 s (orchestrator.tool_timeout_s)"
    ]


async def test_a_coordinator_over_its_time_limit_is_undone_and_recorded(
    scripted_model: ScriptedModel, release: threading.Event
) -> None:
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks.append(subtask("1.1", "half-made"))
        release.wait(30)

    echo = EchoTool("echo", "echoed")
    scripted_model.on_suitability(["echo"]).on_answer()
    settings = OrchestratorSettings(tool_timeout_s=0.2)
    service = conversation_for(
        domain(), Coordinator("planner", decompose), echo, model=scripted_model, settings=settings
    )

    answer = await asyncio.wait_for(service.ask("q"), timeout=10)

    assert answer.trace.sub_tasks == []
    assert answer.failures == [
        "task 1: coordinator demo.planner did not finish within 0.2 s (orchestrator.tool_timeout_s)"
    ]
    assert answer.text.startswith("echoed")


# -- a coordinator that nests subtasks without end ----------------------------------------------


def nesting(levels: int) -> Callable[[TaskInfo], None]:
    """A decomposition putting each new subtask inside the previous one, ``levels`` deep."""

    def decompose(task: TaskInfo) -> None:
        parent = task
        for level in range(levels):
            child = TaskInfo(task_prompt=f"level {level}", required_tool_names={"echo"})
            parent.sub_tasks.append(child)
            parent = child

    return decompose


@pytest.mark.parametrize("levels", [150, 600])
async def test_subtasks_nested_past_the_task_depth_are_undone_and_the_conversation_resumes(
    scripted_model: ScriptedModel, levels: int
) -> None:
    """Before, 150 levels were stored but could not be read back (the conversation lost at the
    user's reply), and 600 ended the question with a RecursionError."""
    asks = AskingTool("asks", "Which city?")
    echo = EchoTool("echo", "echoed")
    scripted_model.on_suitability(["asks"]).on_extract(Query, {"query": "Rome"}).on_answer("ok")
    service = conversation_for(
        domain(), Coordinator("planner", nesting(levels)), asks, echo, model=scripted_model
    )

    question = await service.ask("q")
    answer = await service.ask("Rome", session_id=question.session_id)

    assert question.kind == "clarification" and answer.kind == "answer"
    assert answer.trace.sub_tasks == [] and echo.texts == []
    assert answer.failures == [
        f"task 1: coordinator demo.planner raised ValueError: its subtasks nest {levels} levels "
        f"deep; a task tree may nest at most {MAX_TASK_DEPTH} (orchestrator.max_depth of them "
        "are processed): put subtasks side by side in sub_tasks instead of each inside the "
        "previous one"
    ]


async def test_subtasks_nested_to_the_task_depth_are_kept(scripted_model: ScriptedModel) -> None:
    scripted_model.on_suitability([]).on_answer("ok")
    orchestrator = orchestrator_for(
        domain(), Coordinator("planner", nesting(MAX_TASK_DEPTH)), EchoTool("echo", "echoed"),
        model=scripted_model,
    )  # fmt: skip
    task = TaskInfo(task_prompt="q")

    await orchestrator.run_round(task)

    assert task.levels_below() == MAX_TASK_DEPTH
    assert not any("coordinator" in failure for failure in task.run.failures)


@pytest.mark.parametrize("error", [RuntimeError("boom"), *ABORTS], ids=type)
def test_a_retrieval_tool_whose_description_raises_is_left_out_of_the_domain_words(
    scripted_model: ScriptedModel, error: BaseException
) -> None:
    """Routing reads what the domain covers from its tools; a retrieval tool that cannot
    describe itself leaves its words out, nothing else (``SystemExit`` ended the build)."""

    class Silent(EchoTool):
        def description(self) -> str:
            raise error

    orchestrator = orchestrator_for(
        domain(rag_tool="rag"), EchoTool("fine"), Silent("rag"), model=scripted_model
    )

    assert [tool.qualified_name for tool in orchestrator.describing_tools()] == ["demo.fine"]
