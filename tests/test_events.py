"""The step events of a question (``toolwire.events``) and ``ask_stream``: what is emitted, in
which order, under which parent step; the final answer; failures, early close, observers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
import structlog
from pydantic import TypeAdapter

from orchestration_kit import AskingTool, Coordinator, EchoTool, QueryTool, domain, subtask
from toolwire import TaskInfo, ToolExecutionResult, UnknownDomainError, UnknownSessionError
from toolwire.events import (
    AnswerDelta,
    ClarificationAsked,
    CoordinatorFinished,
    CoordinatorStarted,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelProgress,
    RoundFinished,
    RoundStarted,
    StepStarted,
    TaskFinished,
    TaskStarted,
    ToolFinished,
    ToolsChosen,
    ToolStarted,
    emit,
    observed,
    observing,
)
from toolwire.orchestrator import Answer
from toolwire.orchestrator.streaming import Answered, AskEvent, WatchedQuestion
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel, conversation_for


async def collect(stream: AsyncIterator[Event | Answered]) -> list[Event | Answered]:
    return [event async for event in stream]


def split(tasks: TaskInfo) -> None:
    tasks.sub_tasks = [subtask("1.1", "first part", "demo.alpha"), subtask("1.2", "second part")]


async def test_a_question_streams_its_steps_in_order_then_the_same_answer() -> None:
    model = (
        ScriptedModel()
        .on_suitability(lambda prompt, names: ["beta"] if prompt == "second part" else [])
        .on_answer(lambda question, contexts: "alpha and beta together")
    )
    service = conversation_for(
        domain(),
        Coordinator("splitter", split),
        EchoTool("alpha", "from alpha"),
        EchoTool("beta", "from beta"),
        model=model,
    )

    events = await collect(service.ask_stream("do both"))

    kinds = [getattr(event, "type", None) for event in events]
    assert kinds[0] == "round_started"
    assert kinds[-2:] == ["round_finished", "answer"]
    final = events[-1]
    assert isinstance(final, Answered)
    assert final.answer.text == "alpha and beta together"
    assert final.answer.trace.sub_tasks[0].tools[0].tool_name == "demo.alpha"
    # the task tree as it grew: 1, its coordinator, 1.1 and 1.2 inside 1, tools inside tasks
    steps = {event.step: event for event in events if isinstance(event, StepStarted)}
    tasks = {e.task_no: e for e in events if isinstance(e, TaskStarted)}
    assert list(tasks) == ["1", "1.1", "1.2"]
    round_step = events[0]
    assert isinstance(round_step, RoundStarted)
    assert tasks["1"].parent == round_step.step
    assert tasks["1.1"].parent == tasks["1.2"].parent == tasks["1"].step
    assert tasks["1.1"].owner_coordinator_name == "demo.splitter"
    coordinator = next(e for e in events if isinstance(e, CoordinatorStarted))
    finished = next(e for e in events if isinstance(e, CoordinatorFinished))
    assert coordinator.parent == tasks["1"].step
    assert finished.step == coordinator.step
    assert finished.record.outcome == "decomposed"
    assert finished.new_subtasks == ["1.1", "1.2"]
    started_tools = [e for e in events if isinstance(e, ToolStarted)]
    assert [(e.task_no, e.tool_name, e.reason) for e in started_tools] == [
        ("1.1", "demo.alpha", "required"),
        ("1.2", "demo.beta", "suitability"),
    ]
    assert steps[started_tools[0].parent or ""] is tasks["1.1"]
    tool_done = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.step, e.record.outcome, e.record.detail) for e in tool_done] == [
        (started_tools[0].step, "context", "from alpha"),
        (started_tools[1].step, "context", "from beta"),
    ]
    chosen = [e for e in events if isinstance(e, ToolsChosen)]
    assert [(e.task_no, [r.tool_name for r in e.tools]) for e in chosen] == [
        ("1.1", ["demo.alpha"]),
        ("1.2", ["demo.beta"]),
        ("1", []),
    ]
    assert chosen[0].selection is None  # required tools: no selection
    assert chosen[1].selection is not None
    assert "demo.beta" in [c.tool_name for c in chosen[1].selection.candidates]
    assert chosen[1].selection.activated == ["demo.beta"]
    closed = [(e.task_no, e.status.value) for e in events if isinstance(e, TaskFinished)]
    assert closed == [("1.1", "done"), ("1.2", "done"), ("1", "done")]
    # the answer's text word by word, inside the answer's model call, before the final event
    deltas = [e for e in events if isinstance(e, AnswerDelta)]
    assert "".join(d.text for d in deltas) == "alpha and beta together"
    assert len(deltas) == 4
    answer_calls = [
        e for e in events if isinstance(e, ModelCallFinished) and e.record.purpose == "answer"
    ]
    assert len(answer_calls) == 1
    assert kinds.index("answer_delta") > kinds.index("tool_finished")
    # model calls are steps too, each closed with its record
    calls = [e for e in events if isinstance(e, ModelCallStarted)]
    assert {e.step for e in calls} == {e.step for e in events if isinstance(e, ModelCallFinished)}
    done = events[-2]
    assert isinstance(done, RoundFinished)
    assert (done.step, done.kind, done.domain) == (round_step.step, "answer", "demo")
    assert done.usage == final.answer.usage
    times = [event.at_ms for event in events if isinstance(event, Event)]
    assert times == sorted(times)


async def test_a_clarification_is_an_event_and_the_reply_streams_a_resumed_round() -> None:
    asker = AskingTool("asker", "Which drug?")
    model = (
        ScriptedModel()
        .on_suitability(["asker"])
        .on_extract(QueryTool("q").params_model, {"query": "ibuprofen"})
        .on_answer()
    )
    service = conversation_for(domain(), asker, model=model)

    first = await collect(service.ask_stream("is it safe?"))
    asked = [e for e in first if isinstance(e, ClarificationAsked)]
    final = first[-1]
    assert isinstance(final, Answered)
    assert [(e.task_no, e.tool_name, e.question) for e in asked] == [
        ("1", "demo.asker", "Which drug?")
    ]
    assert final.answer.kind == "clarification"
    waiting = [e for e in first if isinstance(e, TaskFinished)]
    assert [e.status.value for e in waiting] == ["waiting_for_user"]

    second = await collect(service.ask_stream("ibuprofen", session_id=final.answer.session_id))
    started = second[0]
    assert isinstance(started, RoundStarted)
    assert started.resumed
    last = second[-1]
    assert isinstance(last, Answered)
    assert last.answer.kind == "answer"
    assert last.answer.text == "asker resolved ibuprofen"


async def test_a_failing_question_raises_from_the_stream_after_closing_the_round() -> None:
    service = conversation_for(domain(), EchoTool("alpha"), model=ScriptedModel())
    seen: list[Event | Answered] = []

    with pytest.raises(UnknownDomainError, match="unknown domain 'nope'"):
        async for event in service.ask_stream("hello", domain="nope"):
            seen.append(event)
    with pytest.raises(UnknownSessionError):
        async for event in service.ask_stream("hello", session_id="no-such-session"):
            seen.append(event)

    assert [getattr(e, "type", None) for e in seen] == ["round_started", "round_finished"] * 2
    assert [e.error for e in seen if isinstance(e, RoundFinished)] == [
        "UnknownDomainError",
        "UnknownSessionError",
    ]


class GatedTool(EchoTool):
    """Waits (asynchronously) until the test opens the gate, noting whether it was cancelled."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.cancelled = False

    async def execute_with_result(self, params: object, text: str) -> ToolExecutionResult:  # type: ignore[override]
        self.entered.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolExecutionResult.clarifying_question("Which one?")


async def test_closing_the_stream_early_cancels_the_round_and_stores_nothing() -> None:
    store = MemorySessionStore()
    tool = GatedTool("slow")
    service = conversation_for(
        domain(), tool, model=ScriptedModel().on_suitability(["slow"]), store=store
    )

    stream = service.ask_stream("book it")
    async for event in stream:
        if isinstance(event, ToolStarted):
            break
    await asyncio.wait_for(tool.entered.wait(), 5)
    await stream.aclose()

    assert tool.cancelled
    assert store._rows == {}  # the clarification the tool would have asked is not kept


async def test_a_question_cancelled_while_its_next_event_is_awaited_ends_without_a_failure() -> (
    None
):
    """The HTTP stream's deadline cancels the question while the stream waits for its next event:
    that wait raised ``CancelledError``, which ended the stream with no ``error`` event."""
    never = asyncio.Event()

    async def ask() -> Answer:
        await never.wait()
        raise AssertionError("the question was not cancelled")

    question = WatchedQuestion(ask)
    waiting = asyncio.create_task(question.next())
    await asyncio.sleep(0)  # it waits for the next event now
    await question.cancel()

    assert await waiting is None
    assert await question.next() is None


async def test_an_observer_that_raises_is_logged_once_and_the_question_goes_on() -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    seen: list[str] = []
    service = conversation_for(
        domain(),
        EchoTool("alpha", "a"),
        model=ScriptedModel().on_suitability(["alpha"]).on_answer(),
    )
    service.observers.append(lambda: broken)
    service.observers.append(lambda: lambda event: seen.append(getattr(event, "type", "")))

    with structlog.testing.capture_logs() as logs:
        answer = await service.ask("go")
        again = await service.ask("go")

    assert answer.text == again.text == "a"
    assert seen.count("round_started") == 2
    failures = [log for log in logs if log["event"] == "event_observer_failed"]
    assert len(failures) <= 1  # an observer of the same identity is reported once


async def test_nothing_is_emitted_or_observed_outside_an_observed_question() -> None:
    seen: list[Event] = []
    emit(AnswerDelta(text="lost"))  # nobody observes: a no-op
    assert not observed()
    with observing(seen.append):
        assert observed()
        emit(AnswerDelta(text="kept"))
    emit(AnswerDelta(text="lost again"))

    assert [e.text for e in seen if isinstance(e, AnswerDelta)] == ["kept"]


async def test_events_from_a_worker_thread_reach_the_stream_in_order() -> None:
    service = conversation_for(
        domain(),
        EchoTool("alpha", "a"),
        model=ScriptedModel().on_suitability(["alpha"]).on_answer(),
    )
    original = service.ask

    async def ask_with_preparation(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        def assemble() -> None:
            assert threading.current_thread() is not threading.main_thread()
            for done in (0, 50, 100):
                emit(ModelProgress(model="m", stage="assembling", bytes_done=done, bytes_total=100))

        await asyncio.to_thread(assemble)
        return await original(*args, **kwargs)  # type: ignore[arg-type]

    service.ask = ask_with_preparation  # type: ignore[method-assign]
    events = await collect(service.ask_stream("go"))

    progress = [e.bytes_done for e in events if isinstance(e, ModelProgress)]
    assert progress == [0, 50, 100]
    assert isinstance(events[-1], Answered)


async def test_every_event_reads_back_from_its_json() -> None:
    model = ScriptedModel().on_suitability(["alpha"]).on_answer()
    service = conversation_for(domain(), EchoTool("alpha", "a"), model=model)
    events = await collect(service.ask_stream("go"))
    adapter: TypeAdapter[AskEvent] = TypeAdapter(AskEvent)

    for event in events:
        assert adapter.validate_json(event.model_dump_json()) == event
