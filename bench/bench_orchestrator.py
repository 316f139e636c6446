"""The orchestrator's own overhead per question, with a scripted (zero-latency) model.

Run: .venv/bin/python bench/bench_orchestrator.py
Prints milliseconds per question for a one-tool domain (a plain tool, run in a tool thread; an
``async`` one on the app's loop; an ``async`` one with ``own_event_loop``) and for a 20-tool domain
whose coordinator splits each message into three subtasks (one conditional, one context consumer
on the parent), the ratio between them, and the cost of a clarification round stored in SQLite
(ask + resume).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from orchestration_kit import (
    ActivatedConsumer,
    AskingTool,
    Coordinator,
    EchoTool,
    NoParams,
    Query,
    domain,
    subtask,
)
from toolwire import TaskInfo, ToolExecutionResult
from toolwire.sessions import SQLiteSessionStore
from toolwire.testing import ScriptedModel, conversation_for

QUESTIONS = 300
ROUNDS = 3


def _split(task: TaskInfo) -> None:
    task.sub_tasks = [
        subtask("1.1", "cheap", "cheap"),
        subtask("1.2", "full", "full", conditional=True),
        subtask("1.3", "other", "other"),
    ]


async def _per_question_ms(service_factory, message: str) -> float:  # type: ignore[no-untyped-def]
    timings = []
    for _ in range(ROUNDS):
        service = service_factory()
        start = time.perf_counter()
        for _ in range(QUESTIONS):
            await service.ask(message)
        timings.append((time.perf_counter() - start) * 1000 / QUESTIONS)
    return statistics.median(timings)


def _simple():  # type: ignore[no-untyped-def]
    model = ScriptedModel().on_suitability(["one"]).on_answer()
    return conversation_for(domain(), EchoTool("one", "ctx"), model=model)


class AsyncEcho(EchoTool):
    async def execute_with_result(  # type: ignore[override]
        self, params: NoParams, text: str
    ) -> ToolExecutionResult:
        return ToolExecutionResult.context("ctx")


class OwnLoopEcho(AsyncEcho):
    own_event_loop = True


def _one(tool_class):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        model = ScriptedModel().on_suitability(["one"]).on_answer()
        return conversation_for(domain(), tool_class("one", "ctx"), model=model)

    return build


def _rich():  # type: ignore[no-untyped-def]
    model = ScriptedModel().on_suitability(["t3", "t7", "collector"]).on_answer()
    tools = [EchoTool(f"t{n}", f"context {n}", priority=n) for n in range(16)]
    tools += [EchoTool("cheap", ""), EchoTool("full", "full"), EchoTool("other", "other")]
    tools.append(ActivatedConsumer("collector", priority=500))
    return conversation_for(
        domain(rag_tool="t0"), Coordinator("splitter", _split), *tools, model=model
    )


async def _clarification_ms(path: Path) -> float:
    model = ScriptedModel().on_extract(Query, {"query": "x"}).on_suitability(["asker"])
    model.on_answer()
    service = conversation_for(
        domain(), AskingTool("asker"), model=model, store=SQLiteSessionStore(path)
    )
    count = 50
    start = time.perf_counter()
    for _ in range(count):
        question = await service.ask("book it")
        await service.ask("that one", session_id=question.session_id)
    return (time.perf_counter() - start) * 1000 / count


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    simple = await _per_question_ms(_simple, "q")
    on_loop = await _per_question_ms(_one(AsyncEcho), "q")
    own_loop = await _per_question_ms(_one(OwnLoopEcho), "q")
    rich = await _per_question_ms(_rich, "q")
    with tempfile.TemporaryDirectory() as directory:
        clarification = await _clarification_ms(Path(directory) / "sessions.sqlite3")
    print(f"one tool, one task:                      {simple:7.3f} ms/question")
    print(f"  the same, an async tool on the app's loop: {on_loop:5.3f} ms/question")
    print(f"  the same, an async tool, own_event_loop:   {own_loop:5.3f} ms/question")
    print(f"21 tools, coordinator + 3 subtasks:      {rich:7.3f} ms/question")
    print(f"ratio rich/simple:                       {rich / simple:7.1f}x")
    print(f"clarification round trip (SQLite store): {clarification:7.3f} ms (ask + resume)")


if __name__ == "__main__":
    asyncio.run(main())
