"""OpenTelemetry traces of questions (``toolwire.telemetry``), read back from the SDK's in-memory
span exporter: one trace per question, spans nested as the steps were, GenAI attributes on model
calls; failures; a cancelled question; turned on by the ``OTEL_*`` variables, and nothing
imported without them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from structlog.testing import capture_logs

from orchestration_kit import Coordinator, EchoTool, domain, plugin_of, subtask
from server_support.fake_model import fake_model_in_thread
from toolwire import App, TaskInfo
from toolwire.errors import ModelError
from toolwire.events import ToolStarted, observing
from toolwire.llm import OpenAIGateway
from toolwire.redaction import session_ref
from toolwire.settings import LLMSettings
from toolwire.telemetry import (
    QuestionSpans,
    exporter_names,
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


class AtStart(SpanProcessor):
    """Keeps each span's attributes as they were when it started (for sampling decisions)."""

    def __init__(self) -> None:
        self.attributes: dict[int, dict[str, Any]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.attributes[span.context.span_id] = dict(span.attributes or {})


@pytest.fixture
def recorded() -> Iterator[tuple[InMemorySpanExporter, AtStart, TracerProvider]]:
    memory, at_start = InMemorySpanExporter(), AtStart()
    provider = TracerProvider()
    provider.add_span_processor(at_start)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory, at_start, provider
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
    # the conversation, named as logs name it: a hash that cannot resume the session
    assert answer.session_id is not None
    assert round_span.attributes["gen_ai.conversation.id"] == session_ref(answer.session_id)
    assert answer.session_id not in str(dict(round_span.attributes or {}))
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


# -- the GenAI semantic conventions, attribute by attribute --------------------------------------
#
# OpenTelemetry semantic conventions v1.41.0 (the last release of the GenAI pages in the
# semantic-conventions repository; they moved to semantic-conventions-genai after it):
# docs/gen-ai/openai.md "Inference" (span.openai.inference.client), docs/gen-ai/gen-ai-spans.md
# "Execute tool span" (span.gen_ai.execute_tool.internal) and docs/gen-ai/gen-ai-agent-spans.md
# "Invoke agent internal span" (span.gen_ai.invoke_agent.internal). Each rule below is one of
# theirs: the span's name and kind, its Required attributes, the attributes to set "at span
# creation time", the Conditionally Required ones toolwire's spans fall under, and the gen_ai.*
# attributes each span may carry at all (anything else there would be a name of our own making).

STRING, INT, DOUBLE, BOOLEAN, STRINGS = "string", "int", "double", "boolean", "string[]"

ATTRIBUTE_TYPES = {
    "gen_ai.operation.name": STRING, "gen_ai.provider.name": STRING,
    "gen_ai.request.model": STRING, "gen_ai.response.model": STRING,
    "gen_ai.output.type": STRING, "gen_ai.request.stream": BOOLEAN,
    "gen_ai.request.max_tokens": INT, "gen_ai.request.temperature": DOUBLE,
    "gen_ai.response.finish_reasons": STRINGS, "gen_ai.usage.input_tokens": INT,
    "gen_ai.usage.output_tokens": INT, "gen_ai.usage.cache_read.input_tokens": INT,
    "gen_ai.tool.name": STRING, "gen_ai.agent.name": STRING, "error.type": STRING,
    "openai.api.type": STRING,
}  # fmt: skip
"""Value types from the conventions' tables, for the attributes toolwire sets."""

OUTPUT_TYPES = {"text", "json", "image", "speech"}
"""``gen_ai.output.type``'s well-known values."""


@dataclass(frozen=True)
class SpanRules:
    operation: str
    kind: SpanKind
    name_from: str
    """The attribute the span's name follows ``<operation> `` with (the conventions' pattern)."""
    required: tuple[str, ...]
    at_creation: tuple[str, ...]
    allowed: frozenset[str]
    """Every attribute of the span's table (Required to Opt-In)."""
    fixed: Mapping[str, str] = field(default_factory=dict)


USAGE = ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_read.input_tokens",
         "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")  # fmt: skip
OPT_IN = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
          "gen_ai.tool.definitions")  # fmt: skip
REQUEST = ("gen_ai.request.frequency_penalty", "gen_ai.request.max_tokens",
           "gen_ai.request.presence_penalty", "gen_ai.request.stop_sequences",
           "gen_ai.request.temperature", "gen_ai.request.top_p")  # fmt: skip

CHAT_ATTRIBUTES = frozenset({
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "error.type",
    "gen_ai.conversation.id", "gen_ai.output.type", "gen_ai.request.choice.count",
    "gen_ai.request.seed", "gen_ai.request.stream", "openai.request.service_tier",
    "openai.response.service_tier", "server.port", *REQUEST, "gen_ai.response.finish_reasons",
    "gen_ai.response.id", "gen_ai.response.model", "gen_ai.response.time_to_first_chunk",
    *USAGE, "gen_ai.usage.reasoning.output_tokens", "openai.api.type",
    "openai.response.system_fingerprint", "server.address", *OPT_IN,
})  # fmt: skip
CHAT = SpanRules(
    operation="chat",
    kind=SpanKind.CLIENT,
    name_from="gen_ai.request.model",
    required=("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name"),
    # openai.md: provider.name "SHOULD be provided at span creation time", and the list after
    # the table: operation.name, request.model (server.address and server.port: not set)
    at_creation=("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"),
    allowed=CHAT_ATTRIBUTES,
    fixed={"gen_ai.provider.name": "openai"},  # openai.md: MUST be "openai"
)
EXECUTE_TOOL_ATTRIBUTES = frozenset({
    "gen_ai.operation.name", "gen_ai.tool.name", "error.type", "gen_ai.tool.call.id",
    "gen_ai.tool.description", "gen_ai.tool.type", "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
})  # fmt: skip
EXECUTE_TOOL = SpanRules(
    operation="execute_tool",
    kind=SpanKind.INTERNAL,
    name_from="gen_ai.tool.name",
    required=("gen_ai.operation.name", "gen_ai.tool.name"),
    at_creation=("gen_ai.operation.name",),
    allowed=EXECUTE_TOOL_ATTRIBUTES,
)
INVOKE_AGENT_ATTRIBUTES = frozenset({
    "gen_ai.operation.name", "gen_ai.provider.name", "error.type", "gen_ai.agent.description",
    "gen_ai.agent.id", "gen_ai.agent.name", "gen_ai.agent.version", "gen_ai.conversation.id",
    "gen_ai.data_source.id", "gen_ai.output.type", "gen_ai.request.choice.count",
    "gen_ai.request.model", "gen_ai.request.seed", "server.port", *REQUEST,
    "gen_ai.response.finish_reasons", *USAGE, *OPT_IN,
})  # fmt: skip
INVOKE_AGENT = SpanRules(
    operation="invoke_agent",
    kind=SpanKind.INTERNAL,
    name_from="gen_ai.agent.name",  # "if gen_ai.agent.name is readily available"
    required=("gen_ai.operation.name", "gen_ai.provider.name"),
    at_creation=("gen_ai.operation.name", "gen_ai.provider.name"),
    allowed=INVOKE_AGENT_ATTRIBUTES,
)


def _typed(value: Any, kind: str) -> bool:
    if kind == STRINGS:
        return isinstance(value, Sequence) and all(isinstance(v, str) for v in value)
    expected = {STRING: str, INT: int, DOUBLE: float, BOOLEAN: bool}[kind]
    return isinstance(value, expected) and (kind != INT or not isinstance(value, bool))


def problems(span: ReadableSpan, at_start: Mapping[str, Any], rules: SpanRules) -> list[str]:
    """How ``span`` departs from its convention (empty: it follows it)."""
    attributes = dict(span.attributes or {})
    found: list[str] = []
    if span.kind is not rules.kind:
        found.append(f"kind {span.kind.name}, not {rules.kind.name}")
    if attributes.get("gen_ai.operation.name") != rules.operation:
        found.append(f"gen_ai.operation.name {attributes.get('gen_ai.operation.name')!r}")
    named = attributes.get(rules.name_from)
    expected_name = f"{rules.operation} {named}" if named else rules.operation
    if span.name != expected_name:
        found.append(f"named {span.name!r}, not {expected_name!r}")
    found += [f"lacks the required {key}" for key in rules.required if key not in attributes]
    found += [f"{key} not set at creation" for key in rules.at_creation if key not in at_start]
    for key, value in rules.fixed.items():
        if attributes.get(key) != value:
            found.append(f"{key} is {attributes.get(key)!r}, not {value!r}")
    for key, value in attributes.items():
        if key.startswith("toolwire."):
            continue  # our own namespace
        if key not in rules.allowed:
            found.append(f"{key} is not an attribute of a {rules.operation} span")
        elif key in ATTRIBUTE_TYPES and not _typed(value, ATTRIBUTE_TYPES[key]):
            found.append(f"{key} = {value!r} is not a {ATTRIBUTE_TYPES[key]}")
    failed = span.status.status_code is StatusCode.ERROR
    if failed != ("error.type" in attributes):  # Conditionally Required: if it ended in an error
        found.append("error.type without an error, or an error without error.type")
    if "gen_ai.request.stream" in attributes and attributes["gen_ai.request.stream"] is not True:
        found.append("gen_ai.request.stream set on a request that was not streamed")
    output_type = attributes.get("gen_ai.output.type")
    if output_type is not None and output_type not in OUTPUT_TYPES:
        found.append(f"gen_ai.output.type {output_type!r} is not a well-known value")
    return found


def dated(request: FakeRequest) -> FakeReply:
    """The fake model's replies, answered by a dated snapshot of the model requested."""
    text = "Take 400 mg." if request.output_schema is None else None
    return FakeReply(text=text, model="fake-model-2026-12-01")


async def test_chat_tool_and_question_spans_follow_the_genai_conventions(
    recorded: tuple[InMemorySpanExporter, AtStart, TracerProvider],
) -> None:
    memory, at_start, provider = recorded
    async with FakeOpenAIServer(dated) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="test")
        service = conversation_for(
            domain(), Coordinator("splitter", split), EchoTool("alpha", "from alpha"), model=gateway
        )
        service.observers.append(lambda: QuestionSpans(provider.get_tracer("test")))
        await service.ask("do it")
        await gateway.aclose()
        requests = server.chat_requests

    spans = memory.get_finished_spans()
    rules = {"chat": CHAT, "execute_tool": EXECUTE_TOOL, "invoke_agent": INVOKE_AGENT}
    checked = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") in rules]
    departures = {
        span.name: problems(
            span,
            at_start.attributes[span.context.span_id],
            rules[str((span.attributes or {})["gen_ai.operation.name"])],
        )
        for span in checked
    }
    assert {name: found for name, found in departures.items() if found} == {}
    chats = [s for s in checked if s.attributes and s.attributes["gen_ai.operation.name"] == "chat"]
    assert {s.name for s in checked} == {
        "chat fake-model",
        "execute_tool demo.alpha",
        "invoke_agent demo",
    }
    assert len(chats) == len(requests) > 1
    for chat in chats:
        assert chat.attributes is not None
        # the requested model, though every reply named its dated snapshot
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.response.model"] == "fake-model-2026-12-01"
        assert chat.attributes["gen_ai.response.finish_reasons"] in (("stop",), ("tool_calls",))
        assert chat.attributes["gen_ai.request.max_tokens"] > 0
    # gen_ai.output.type: "json" for every request with an output format (a schema), and
    # gen_ai.request.stream on exactly the requests made in streaming mode (the watched answer)
    with_schema = [r for r in requests if r.output_schema is not None]
    streamed = [r for r in requests if r.body.get("stream")]
    by_type = [c.attributes["gen_ai.output.type"] for c in chats if c.attributes]
    assert by_type.count("json") == len(with_schema) > 0
    assert by_type.count("text") == len(requests) - len(with_schema)
    assert len(streamed) == 1
    (streaming,) = [c for c in chats if c.attributes and "gen_ai.request.stream" in c.attributes]
    assert streaming.attributes is not None
    assert streaming.attributes["toolwire.purpose"] == "answer"
    assert streaming.attributes["gen_ai.output.type"] == "text"


async def test_a_failed_model_call_is_an_error_span_without_a_response_model(
    recorded: tuple[InMemorySpanExporter, AtStart, TracerProvider],
) -> None:
    memory, at_start, provider = recorded
    async with FakeOpenAIServer(lambda _r: FakeReply(status=400, error="bad request")) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="test")
        with observing(QuestionSpans(provider.get_tracer("test"))), pytest.raises(ModelError):
            await gateway.answer("q", [])
        await gateway.aclose()

    (chat,) = memory.get_finished_spans()
    assert problems(chat, at_start.attributes[chat.context.span_id], CHAT) == []
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "model_error"
    assert "gen_ai.response.model" not in chat.attributes  # no reply, no model answered
    assert "gen_ai.response.finish_reasons" not in chat.attributes


async def test_a_model_the_server_names_is_the_requested_one_once_it_is_known(
    recorded: tuple[InMemorySpanExporter, AtStart, TracerProvider],
) -> None:
    """Without ``llm.model`` the server's first listed model is asked for: the first call's span
    learns it when the call ends, later ones have it from their start."""
    memory, at_start, provider = recorded
    async with FakeOpenAIServer(dated) as server:
        gateway = OpenAIGateway(LLMSettings(base_url=server.base_url, max_retries=0), api_key="t")
        with observing(QuestionSpans(provider.get_tracer("test"))):
            await gateway.answer("q", [])
            await gateway.answer("q again", [])
        await gateway.aclose()

    first, second = memory.get_finished_spans()
    assert first.name == second.name == "chat fake-model"
    assert "gen_ai.request.model" not in at_start.attributes[first.context.span_id]
    assert problems(second, at_start.attributes[second.context.span_id], CHAT) == []
    assert first.attributes is not None
    assert first.attributes["gen_ai.request.model"] == "fake-model"
    assert first.attributes["gen_ai.response.model"] == "fake-model-2026-12-01"


def test_the_otel_variables_decide_whether_questions_are_traced() -> None:
    assert not wants_traces({})
    assert wants_traces({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert wants_traces({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert wants_traces({"OTEL_TRACES_EXPORTER": "console"})
    assert not wants_traces({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not wants_traces({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert wants_traces({"OTEL_TRACES_EXPORTER": "console,otlp"})
    assert not wants_traces({"OTEL_TRACES_EXPORTER": " none , "})


def test_the_exporter_variable_is_a_list_of_names() -> None:
    assert exporter_names({"OTEL_TRACES_EXPORTER": "Console, otlp,console"}) == ["console", "otlp"]
    assert exporter_names({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert exporter_names({"OTEL_TRACES_EXPORTER": "  "}) == ["otlp"]  # blank: the default


def test_trace_questions_without_the_extra_names_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if it were not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'toolwire\[otel\]'"):
        trace_questions(object())


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


def test_the_console_exporter_prints_the_questions_trace_on_stderr(tmp_path: Path) -> None:
    result = run_probe(tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="probe")
    assert '"name": "invoke_agent demo"' in result.stderr
    assert '"name": "execute_tool demo.lookup"' in result.stderr
    assert '"service.name": "probe"' in result.stderr
    assert '"name"' not in result.stdout  # stdout is the program's own


def test_every_exporter_listed_is_set_up_and_an_unsupported_one_is_a_warning(
    tmp_path: Path,
) -> None:
    result = run_probe(tmp_path, OTEL_TRACES_EXPORTER="zipkin,console")
    assert '"name": "invoke_agent demo"' in result.stderr  # console set up beside the other
    assert "trace_exporter_unsupported" in result.stderr and "zipkin" in result.stderr


def test_ask_json_stays_one_json_object_with_console_spans(tmp_path: Path) -> None:
    """``toolwire ask --json`` as a user runs it (the console script, the pharma domain, a fake
    model server): the spans go to stderr, and stdout is the answer alone, as JSON."""
    script = shutil.which("toolwire", path=str(Path(sys.executable).parent))
    assert script is not None, "run scripts/setup.sh: the toolwire console script is missing"
    with fake_model_in_thread(dated) as server:
        config = tmp_path / "toolwire.yaml"
        llm = {"base_url": server.base_url, "model": "fake-model", "max_retries": 0}
        settings = {"default_domain": "pharma", "sessions": {"store": "memory"}, "llm": llm}
        config.write_text(json.dumps(settings), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env |= {"TOOLWIRE_PLUGINS": "pharma", "OPENAI_API_KEY": "unused"}
        env |= {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "cli-probe"}
        result = subprocess.run(
            [script, "--config", str(config), "ask", "--json", "What is ibuprofen?"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)  # the whole of stdout: one object
    assert answer["kind"] in ("answer", "clarification")
    assert '"name": "invoke_agent pharma"' in result.stderr
    assert '"name": "chat fake-model"' in result.stderr
    assert '"gen_ai.response.model": "fake-model-2026-12-01"' in result.stderr
