"""OpenTelemetry traces of questions (``toolwire.telemetry``), read back from the SDK's in-memory
span exporter: one trace per question, spans nested as the steps were, GenAI attributes on model
calls; failures; a cancelled question; turned on by the ``OTEL_*`` variables, and nothing
imported without them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from structlog.testing import capture_logs

from orchestration_kit import Coordinator, EchoTool, domain, plugin_of, subtask
from toolwire import App, TaskInfo
from toolwire.events import ToolStarted
from toolwire.llm import OpenAIGateway
from toolwire.settings import LLMSettings
from toolwire.telemetry import (
    QuestionSpans,
    observers_from_environment,
    trace_questions,
    wants_traces,
)
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory, provider
    provider.shutdown()


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def split(task: TaskInfo) -> None:
    task.sub_tasks = [subtask("1.1", "first part", "demo.alpha")]


class Lookup(EchoTool):
    def __init__(self) -> None:
        super().__init__("lookup", "Ibuprofen: 400 mg.")


async def test_a_question_is_one_trace_of_nested_spans_with_genai_attributes(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter

    def reply(request: FakeRequest) -> FakeReply:
        if request.output_schema is None:
            return FakeReply(text="Take 400 mg.")
        return FakeReply()  # schema-valid defaults: no tool chosen for task 1

    async with FakeOpenAIServer(reply) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="test")
        service = conversation_for(
            domain(), Coordinator("splitter", split), EchoTool("alpha", "from alpha"), model=gateway
        )
        service.observers.append(lambda: QuestionSpans(provider.get_tracer("test")))
        await service.ask("do it")
        first = len(memory.get_finished_spans())
        answer = await service.ask("do it")  # the same question: the server's cache serves it
        await gateway.aclose()

    spans = memory.get_finished_spans()[first:]
    named = by_name(spans)
    trace_id = named["invoke_agent demo"].context.trace_id
    assert {span.context.trace_id for span in spans} == {trace_id}
    assert memory.get_finished_spans()[0].context.trace_id != trace_id  # a trace per question
    round_span = named["invoke_agent demo"]
    task_1, task_11 = named["toolwire.task 1"], named["toolwire.task 1.1"]
    coordinator = named["toolwire.coordinator demo.splitter"]
    tool = named["execute_tool demo.alpha"]
    assert round_span.parent is None
    assert parent_of(task_1) == round_span.context.span_id
    assert parent_of(coordinator) == parent_of(task_11) == task_1.context.span_id
    assert parent_of(tool) == task_11.context.span_id
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "demo.alpha"
    assert tool.attributes["toolwire.tool.reason"] == "required"
    assert tool.attributes["toolwire.tool.outcome"] == "context"
    assert task_11.attributes["toolwire.task.owner_coordinator"] == "demo.splitter"
    assert task_11.attributes["toolwire.task.status"] == "done"
    # every model call is a client span "chat <model>" inside the step that made it
    chats = [span for span in spans if span.name == "chat fake-model"]
    assert len(chats) == answer.usage.llm_calls
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    answer_call = next(c for c in chats if c.attributes["toolwire.purpose"] == "answer")
    assert parent_of(answer_call) == round_span.context.span_id  # composed after the tasks
    choices = [c for c in chats if c.attributes["toolwire.purpose"] == "choice"]
    assert choices and all(parent_of(c) == task_1.context.span_id for c in choices)
    cached = [c.attributes["gen_ai.usage.cache_read.input_tokens"] for c in chats]
    assert sum(cached) == answer.usage.cached_prompt_tokens > 0
    assert round_span.attributes["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert round_span.attributes["gen_ai.agent.name"] == "demo"
    assert round_span.attributes["toolwire.answer.kind"] == "answer"


async def test_failures_are_error_spans_with_the_text_masked(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter
    broken = EchoTool("broken", RuntimeError("postgres://app:hunter2@db/prod refused"))
    service = conversation_for(
        domain(), broken, model=ScriptedModel().on_suitability(["broken"]).on_answer("sorry")
    )
    service.observers.append(lambda: QuestionSpans(provider.get_tracer("test")))

    await service.ask("go")

    tool = by_name(memory.get_finished_spans())["execute_tool demo.broken"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "tool_error"
    assert "hunter2" not in (tool.status.description or "")
    assert "postgres://app:***@db/prod" in (tool.status.description or "")


async def test_a_cancelled_question_ends_its_open_spans_as_errors(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    import asyncio

    memory, provider = exporter

    class Waiting(EchoTool):
        async def execute_with_result(self, params: object, text: str) -> object:  # type: ignore[override]
            await asyncio.sleep(60)

    service = conversation_for(
        domain(), Waiting("slow"), model=ScriptedModel().on_suitability(["slow"])
    )
    service.observers.append(lambda: QuestionSpans(provider.get_tracer("test")))
    stream = service.ask_stream("go")
    async for event in stream:
        if isinstance(event, ToolStarted):
            break
    await stream.aclose()

    named = by_name(memory.get_finished_spans())
    assert named["invoke_agent toolwire"].attributes["error.type"] == "CancelledError"
    tool = named["execute_tool demo.slow"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "abandoned"


def test_the_otel_variables_decide_whether_questions_are_traced() -> None:
    assert not wants_traces({})
    assert wants_traces({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert wants_traces({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert wants_traces({"OTEL_TRACES_EXPORTER": "console"})
    assert not wants_traces({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not wants_traces({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})


def test_without_the_extra_a_warning_says_how_to_get_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if it were not installed
    with capture_logs() as logs:
        observers = observers_from_environment({"OTEL_TRACES_EXPORTER": "otlp"})
    assert observers == []
    (warning,) = [entry for entry in logs if entry["event"] == "tracing_unavailable"]
    assert warning["fix"] == "pip install 'toolwire[otel]'"


async def test_trace_questions_traces_an_app_built_in_code(
    tmp_path: Path, exporter: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    memory, provider = exporter
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: demo\nsessions:\n  store: memory\n")
    model = ScriptedModel().on_suitability(["lookup"]).on_answer()
    app = App.load(
        config, plugins=[plugin_of(domain(), Lookup)], load_entry_points=False, llm=model
    )
    await app.ask("dose?")  # before: not traced
    trace_questions(app, provider)
    await app.ask("dose?")
    await app.aclose()

    rounds = [span for span in memory.get_finished_spans() if span.name.startswith("invoke_agent")]
    assert len(rounds) == 1


PROBE = """
import asyncio, json, sys
sys.path.insert(0, {tests!r})
from orchestration_kit import EchoTool, domain, plugin_of
from toolwire import App
from toolwire.testing import ScriptedModel

class Lookup(EchoTool):
    def __init__(self):
        super().__init__("lookup", "Ibuprofen: 400 mg.")

async def main():
    model = ScriptedModel().on_suitability(["lookup"]).on_answer()
    app = App.load({config!r}, plugins=[plugin_of(domain(), Lookup)], load_entry_points=False,
                   llm=model)
    await app.ask("dose?")
    await app.aclose()

asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))[:3]))
"""


def run_probe(tmp_path: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: demo\nsessions:\n  store: memory\n")
    tests = str(Path(__file__).resolve().parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = PROBE.format(tests=tests, config=str(config))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, **environ},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )


def test_without_otel_variables_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    result = run_probe(tmp_path)
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_console_exporter_prints_the_questions_trace(tmp_path: Path) -> None:
    result = run_probe(tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="probe")
    assert '"name": "invoke_agent demo"' in result.stdout
    assert '"name": "execute_tool demo.lookup"' in result.stdout
    assert '"service.name": "probe"' in result.stdout
