"""``async`` tools that block the event loop: on a loop of their own (``own_event_loop``) they
hold only a tool thread and the time limit still strikes; on the app's loop the watchdog logs
``event_loop_blocked`` naming them."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from orchestration_kit import Coordinator, EchoTool, NoParams, domain, plugin_of, subtask
from toolwire import App, OrchestratorActivatedTool, TaskInfo, ToolExecutionResult
from toolwire import tool_threads as tool_threads_module
from toolwire.errors import ToolThreadsExhaustedError, ToolTimeoutError
from toolwire.llm.budget import current_budget, question_budget
from toolwire.loop_watchdog import watchdog
from toolwire.registry import DomainSpec
from toolwire.settings import OrchestratorSettings
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.tool_threads import IDLE_EXIT_S, PluginRunner

SLEEP_S = 1.5
"""How long the blocking tools block: well beyond their time limit (0.2 s)."""

MERGED = [structlog.contextvars.merge_contextvars]
"""capture_logs processors that show the log context each event was logged in."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let a blocked tool thread finish after the test


@pytest.fixture
def quick_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "blocked_warn_s", 0.2)


class Sleeper(EchoTool):
    """An ``async`` tool that blocks its loop with ``time.sleep``, then awaits."""

    own_event_loop = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ended = threading.Event()
        self.outcome = "running"
        self.thread = ""

    async def execute_with_result(  # type: ignore[override]
        self, params: NoParams, text: str
    ) -> ToolExecutionResult:
        self.thread = threading.current_thread().name
        try:
            time.sleep(SLEEP_S)
            await asyncio.sleep(0)  # its first chance to see that it was cancelled
            self.outcome = "returned"
            return ToolExecutionResult.context("late")
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise
        finally:
            self.ended.set()


async def ticking(ticks: list[float]) -> None:
    """Another coroutine on the main loop: it ticks while the loop is free."""
    while True:
        ticks.append(time.monotonic())
        await asyncio.sleep(0.02)


# -- the known fault: a blocking async tool stalled the whole process --------------------------


async def test_an_own_loop_async_tool_blocking_past_its_time_limit_fails_alone_at_the_limit(
    scripted_model: ScriptedModel,
) -> None:
    """Before, ``time.sleep`` in an ``async`` tool stood the app's loop still: no time limit,
    no other question, no health check until it returned."""
    sleeper = Sleeper("sleeper")
    sleeper.priority = 1
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["sleeper", "fine"]).on_answer()
    settings = OrchestratorSettings(tool_timeout_s=0.2)
    service = conversation_for(domain(), sleeper, fine, model=scripted_model, settings=settings)
    ticks: list[float] = []
    ticker = asyncio.create_task(ticking(ticks))

    begin = time.monotonic()
    answer = await service.ask("q")
    took = time.monotonic() - begin
    during = [tick for tick in ticks if begin <= tick <= begin + took]
    ticker.cancel()

    assert took < SLEEP_S - 0.5, f"the question took {took:.2f} s"
    assert len(during) >= 5, f"the main loop ticked {len(during)} times in {took:.2f} s"
    assert max(b - a for a, b in itertools.pairwise(during)) < 0.5  # never stood for the sleep
    assert answer.text.startswith("fine context")
    assert answer.failures == [
        "task 1: tool demo.sleeper did not finish within 0.2 s (orchestrator.tool_timeout_s)"
    ]
    assert [(run.tool_name, run.outcome) for run in answer.trace.tools] == [
        ("demo.sleeper", "error"),
        ("demo.fine", "context"),
    ]
    assert sleeper.thread.startswith("toolwire-tool-")
    assert await asyncio.to_thread(sleeper.ended.wait, 10)
    assert sleeper.outcome == "cancelled"  # once unblocked, it never went on to return


async def test_a_blocked_own_loop_coordinator_is_undone_at_its_time_limit(
    scripted_model: ScriptedModel,
) -> None:
    class Planner(Coordinator):
        own_event_loop = True

        async def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:  # type: ignore[override]
            task.sub_tasks.append(subtask("1.1", "half-made"))
            time.sleep(SLEEP_S)
            return task

    echo = EchoTool("echo", "echoed")
    scripted_model.on_suitability(["echo"]).on_answer()
    settings = OrchestratorSettings(tool_timeout_s=0.2)
    service = conversation_for(
        domain(), Planner("planner"), echo, model=scripted_model, settings=settings
    )

    begin = time.monotonic()
    answer = await service.ask("q")

    assert time.monotonic() - begin < SLEEP_S - 0.5
    assert answer.trace.sub_tasks == []
    assert answer.failures == [
        "task 1: coordinator demo.planner did not finish within 0.2 s (orchestrator.tool_timeout_s)"
    ]


# -- where it runs, what it sees ---------------------------------------------------------------


class LoopReporter:
    own_event_loop = True

    async def where(self) -> tuple[asyncio.AbstractEventLoop, str]:
        await asyncio.sleep(0)
        return asyncio.get_running_loop(), threading.current_thread().name


class OnLoopReporter(LoopReporter):
    own_event_loop = False


async def test_own_loop_calls_run_in_a_tool_thread_on_its_loop_which_later_calls_reuse() -> None:
    runner = PluginRunner(threads=1, timeout_s=5)
    main = asyncio.get_running_loop()

    first_loop, first_thread = await runner.call(LoopReporter().where)
    second_loop, second_thread = await runner.call(LoopReporter().where)
    on_loop, on_thread = await runner.call(OnLoopReporter().where)

    assert first_loop is not main and first_thread.startswith("toolwire-tool-")
    assert (second_loop, second_thread) == (first_loop, first_thread)  # made once per thread
    assert on_loop is main and on_thread == threading.current_thread().name  # the default


async def test_a_tool_thread_s_loop_is_closed_when_the_thread_ends() -> None:
    runner = PluginRunner(threads=1, timeout_s=5)
    loop, _thread = await runner.call(LoopReporter().where)

    runner.release_threads()
    deadline = time.monotonic() + 2
    assert deadline - time.monotonic() < IDLE_EXIT_S  # only the release can pass this
    while runner.threads.alive:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)

    assert loop.is_closed()
    new_loop, _thread = await runner.call(LoopReporter().where)
    assert new_loop is not loop and not new_loop.is_closed()


marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


async def test_an_own_loop_call_sees_the_caller_s_context_variables_and_cannot_change_them() -> (
    None
):
    class Reader:
        own_event_loop = True

        async def read(self) -> tuple[str, Any]:
            seen = marker.get(), current_budget()
            marker.set("set by the tool")
            structlog.get_logger("tool").info("tool_event")
            return seen

    runner = PluginRunner(threads=1, timeout_s=5)
    marker.set("the caller's")
    with (
        question_budget(30) as budget,
        structlog.contextvars.bound_contextvars(tool="demo.reader", task_no="1"),
        capture_logs(processors=MERGED) as logs,
    ):
        seen = await runner.call(Reader().read)

    assert seen == ("the caller's", budget)  # the question's time budget too
    assert marker.get() == "the caller's"  # as for plain methods: the tool works on a copy
    assert [(e["event"], e.get("tool"), e.get("task_no")) for e in logs] == [
        ("tool_event", "demo.reader", "1")
    ]


# -- failures and cancellation -----------------------------------------------------------------


async def test_an_own_loop_tool_that_raises_is_a_recorded_failure_and_its_loop_serves_on(
    scripted_model: ScriptedModel,
) -> None:
    class Raiser(EchoTool):
        own_event_loop = True

        async def execute_with_result(  # type: ignore[override]
            self, params: NoParams, text: str
        ) -> ToolExecutionResult:
            await asyncio.sleep(0)
            raise RuntimeError("boom")

    raiser = Raiser("raiser", priority=1)
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["raiser", "fine"]).on_answer()
    service = conversation_for(domain(), raiser, fine, model=scripted_model)

    first = await service.ask("q")
    second = await service.ask("q again")

    for answer in (first, second):
        assert answer.text.startswith("fine context")
        assert answer.failures == ["task 1: tool demo.raiser raised RuntimeError: boom"]


async def test_a_cancelled_question_cancels_its_own_loop_tool_and_frees_the_thread(
    scripted_model: ScriptedModel,
) -> None:
    started, cancelled = threading.Event(), threading.Event()

    class Waiter(EchoTool):
        own_event_loop = True

        async def execute_with_result(  # type: ignore[override]
            self, params: NoParams, text: str
        ) -> ToolExecutionResult:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return ToolExecutionResult.context("late")

    scripted_model.on_suitability(["waiter"]).on_answer()
    service = conversation_for(domain(), Waiter("waiter"), model=scripted_model)
    question = asyncio.create_task(service.ask("q"))
    assert await asyncio.to_thread(started.wait, 5)

    question.cancel()
    with pytest.raises(asyncio.CancelledError):
        await question

    assert await asyncio.to_thread(cancelled.wait, 5)  # cancelled on its own loop too
    runner = service.orchestrators["demo"].runner
    deadline = time.monotonic() + 2
    while runner.threads.busy:
        assert time.monotonic() < deadline, "the tool thread is still held"
        await asyncio.sleep(0.02)


async def test_a_call_given_up_before_its_thread_took_it_never_starts(
    release: threading.Event,
) -> None:
    runner = PluginRunner(threads=1, timeout_s=0.2)
    started: list[str] = []

    class Late:
        own_event_loop = True

        async def run(self) -> None:
            started.append("late")

    outcomes = await asyncio.gather(
        runner.call(release.wait, 30), runner.call(Late().run), return_exceptions=True
    )
    release.set()
    await asyncio.sleep(0.1)

    assert [type(outcome) for outcome in outcomes] == [ToolTimeoutError, ToolTimeoutError]
    assert started == []


async def test_own_loop_calls_stuck_in_every_thread_fail_new_calls_at_once(
    release: threading.Event,
) -> None:
    """A blocked own-loop call holds its thread like a stuck plain one (ToolThreads.abandon)."""

    class Blocker:
        own_event_loop = True

        async def run(self) -> None:
            release.wait(30)

    runner = PluginRunner(threads=1, timeout_s=0.2)
    with pytest.raises(ToolTimeoutError):
        await runner.call(Blocker().run)

    with pytest.raises(ToolThreadsExhaustedError, match="all 1 tool threads are held"):
        await runner.call(LoopReporter().where)
    with pytest.raises(ToolThreadsExhaustedError):
        await runner.call(lambda: "a plain one neither")

    release.set()
    deadline = time.monotonic() + 5
    while True:
        try:
            _loop, thread = await runner.call(LoopReporter().where)
            break
        except ToolThreadsExhaustedError:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
    assert thread.startswith("toolwire-tool-")


async def test_tasks_an_own_loop_call_leaves_behind_are_cancelled_when_it_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ended: list[str] = []

    async def background(name: str, *, stubborn: bool = False) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append(name)
            if not stubborn:
                raise
            await asyncio.sleep(30)  # ignores the cancellation

    class Spawner:
        own_event_loop = True

        def __init__(self) -> None:
            self.tasks: set[asyncio.Task[None]] = set()

        async def run(self, stubborn: bool) -> asyncio.AbstractEventLoop:
            self.tasks.add(asyncio.create_task(background("polite")))
            if stubborn:
                self.tasks.add(asyncio.create_task(background("stubborn", stubborn=True)))
            await asyncio.sleep(0)
            return asyncio.get_running_loop()

    monkeypatch.setattr(tool_threads_module, "LEFTOVER_GRACE_S", 0.1)
    runner = PluginRunner(threads=1, timeout_s=5)
    spawner = Spawner()

    first = await runner.call(spawner.run, False)
    assert ended == ["polite"]

    with capture_logs() as logs:
        second = await runner.call(spawner.run, True)
    third = await runner.call(spawner.run, False)

    assert second is first and sorted(ended) == ["polite", "polite", "polite", "stubborn"]
    assert [e["event"] for e in logs] == ["tool_tasks_left_running"]
    assert logs[0]["tasks"] == 1 and logs[0]["method"].endswith("<locals>.Spawner.run")
    assert second.is_closed() and third is not second  # the next call got a new loop


# -- the YAML key ------------------------------------------------------------------------------


class ThreadReporter(OrchestratorActivatedTool[NoParams]):
    """Says where it ran."""

    name = "reporter"

    def executable_instruction(self) -> str:
        return "reporter: always"

    async def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"ran in {threading.current_thread().name}")


@pytest.mark.parametrize("own", [True, False])
async def test_the_yaml_own_event_loop_key_moves_a_declared_tool_off_the_app_s_loop(
    tmp_path: Path, own: bool
) -> None:
    (tmp_path / "toolwire.yaml").write_text(
        "sessions:\n  store: memory\ntools:\n"
        f"  - {{name: reporter, domain: demo, own_event_loop: {str(own).lower()}}}\n",
        encoding="utf-8",
    )
    app = App.load(
        tmp_path / "toolwire.yaml",
        plugins=[plugin_of(DomainSpec(name="demo"), ThreadReporter)],
        load_entry_points=False,
        llm=ScriptedModel().on_suitability(["reporter"]).on_answer(),
    )
    try:
        answer = await app.ask("q", domain="demo")
    finally:
        await app.aclose()

    thread = "toolwire-tool-" if own else threading.current_thread().name
    assert answer.text.startswith(f"ran in {thread}")


# -- the watchdog: an async tool blocking the app's loop is named ------------------------------


class BlockingOnLoop(EchoTool):
    """The default: an async tool on the app's loop (which it blocks)."""

    def __init__(self, name: str, *, blocking: bool) -> None:
        super().__init__(name)
        self.blocking = blocking

    async def execute_with_result(  # type: ignore[override]
        self, params: NoParams, text: str
    ) -> ToolExecutionResult:
        if self.blocking:
            time.sleep(0.6)
        else:
            await asyncio.sleep(0.6)
        return ToolExecutionResult.context("done")


async def test_an_async_tool_blocking_the_app_s_loop_is_logged_by_name(
    scripted_model: ScriptedModel, quick_watchdog: None
) -> None:
    scripted_model.on_suitability(["blocker"]).on_answer()
    service = conversation_for(
        domain(), BlockingOnLoop("blocker", blocking=True), model=scripted_model
    )

    with capture_logs(processors=MERGED) as logs:
        answer = await service.ask("q")

    assert answer.text.startswith("done")
    blocked = [e for e in logs if e["event"] == "event_loop_blocked"]
    resumed = [e for e in logs if e["event"] == "event_loop_resumed"]
    assert len(blocked) == 1 and len(resumed) == 1
    assert blocked[0]["log_level"] == "warning"
    assert blocked[0]["method"] == "BlockingOnLoop.execute_with_result"
    assert (blocked[0]["tool"], blocked[0]["domain"]) == ("demo.blocker", "demo")  # its context
    assert blocked[0]["where"].startswith(f"{__file__}:")
    assert blocked[0]["where"].endswith("in execute_with_result")
    assert 0.2 <= blocked[0]["blocked_s"] < 0.6
    assert "own_event_loop" in blocked[0]["hint"]
    assert resumed[0]["method"] == "BlockingOnLoop.execute_with_result"
    assert resumed[0]["blocked_s"] >= 0.5


async def test_an_async_tool_that_awaits_is_not_reported(
    scripted_model: ScriptedModel, quick_watchdog: None
) -> None:
    scripted_model.on_suitability(["waiter"]).on_answer()
    service = conversation_for(
        domain(), BlockingOnLoop("waiter", blocking=False), model=scripted_model
    )

    with capture_logs() as logs:
        answer = await service.ask("q")

    assert answer.text.startswith("done")
    assert not [e for e in logs if e["event"].startswith("event_loop_")]


async def test_a_stall_outside_the_method_s_own_frame_lists_what_was_running(
    scripted_model: ScriptedModel, quick_watchdog: None
) -> None:
    """Blocking code in a task the tool started: the tool's frame is not on the stack then."""

    def blocking_helper() -> None:
        time.sleep(0.6)

    class Spawning(EchoTool):
        async def execute_with_result(  # type: ignore[override]
            self, params: NoParams, text: str
        ) -> ToolExecutionResult:
            async def helper() -> None:
                blocking_helper()

            await asyncio.gather(helper())
            return ToolExecutionResult.context("done")

    scripted_model.on_suitability(["spawning"]).on_answer()
    service = conversation_for(domain(), Spawning("spawning"), model=scripted_model)

    with capture_logs() as logs:
        await service.ask("q")

    blocked = [e for e in logs if e["event"] == "event_loop_blocked"]
    assert len(blocked) == 1 and blocked[0]["method"] is None
    assert blocked[0]["running"] == [Spawning.execute_with_result.__qualname__]
    assert blocked[0]["where"].endswith("in blocking_helper")
