"""OpenTelemetry traces of questions (the ``toolwire[otel]`` extra), made from the step events.

Each question is one trace: a span for the round (``invoke_agent <domain>``), each task
(``toolwire.task 1.1``), coordinator (``toolwire.coordinator <name>``), tool run
(``execute_tool <name>``) and model call (``chat <requested model>``), nested as the steps were.
The round, tool and model call spans follow OpenTelemetry's GenAI semantic conventions (v1.41.0,
the last release of the GenAI pages in the main semantic-conventions repository): a model call's
span gets what the request asks for when it starts (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.output.type``,
``gen_ai.request.stream`` when streamed, ``gen_ai.request.max_tokens`` and
``gen_ai.request.temperature``) and what the reply says when it ends (``gen_ai.response.model``,
``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``
and ``gen_ai.usage.cache_read.input_tokens``). A span that failed has an ERROR status and
``error.type`` (``model_error``, ``tool_error``, ``coordinator_error``, ``abandoned``, or the
exception's type for the round); its description is the error text with secret shapes masked.

The spans are built by one observer of the question's events (:mod:`toolwire.events`), the same
events the CLI and the HTTP stream show: there is no second instrumentation to keep in step.

Turned on by ``App.load`` when the standard ``OTEL_*`` variables ask for traces
(``OTEL_TRACES_EXPORTER`` other than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true`` wins), or by
:func:`trace_questions`. toolwire uses the global tracer provider when the application set one
(``opentelemetry-instrument`` does), else it sets one up from the variables (``otlp`` over
HTTP/protobuf, or ``console``: on stderr, so that a command's own output, ``toolwire ask --json``
or ``mcp serve`` over stdio, stays what it was; ``console,otlp`` sets up both, and any other
exporter name is a warning). Without the extra, or without the variables,
nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from toolwire.events import (
    CoordinatorFinished,
    CoordinatorStarted,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    Observer,
    RoundFinished,
    RoundStarted,
    StepFinished,
    StepStarted,
    TaskFinished,
    TaskStarted,
    ToolFinished,
    ToolStarted,
)
from toolwire.extras import missing_extra_error
from toolwire.llm.base import CallRecord
from toolwire.redaction import redact

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

log = structlog.get_logger(__name__)

INSTRUMENTATION = "toolwire"
PROVIDER_NAME = "openai"
"""``gen_ai.provider.name``: toolwire speaks OpenAI's chat completions API to every server."""


def wants_traces(environ: Mapping[str, str]) -> bool:
    """Whether the standard ``OTEL_*`` variables ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip():
        return exporter_names(environ) != ["none"]
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def observers_from_environment(
    environ: Mapping[str, str] | None = None,
) -> list[Callable[[], Observer]]:
    """The question observer that traces, when the ``OTEL_*`` variables ask for traces and the
    extra is installed (a warning says when it is not); else none."""
    environ = os.environ if environ is None else environ
    if not wants_traces(environ):
        return []
    try:
        tracer = _configured_tracer(environ)
    except ImportError as error:
        log.warning(
            "tracing_unavailable",
            problem=f"OTEL_* variables ask for traces, but {error.name} is not installed",
            fix="pip install 'toolwire[otel]'",
        )
        return []
    return [lambda: QuestionSpans(tracer)]


def trace_questions(app: Any, tracer_provider: TracerProvider | None = None) -> None:
    """Trace every question of ``app`` from now on (the global tracer provider by default);
    for tests and for applications that set up OpenTelemetry in code."""
    try:
        from opentelemetry import trace
    except ImportError as error:
        raise missing_extra_error("trace_questions", "otel", error) from None

    tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
    app.add_observer(lambda: QuestionSpans(tracer))


def _configured_tracer(environ: Mapping[str, str]) -> Tracer:
    """The global provider's tracer; a provider from the variables first when none is set."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        exporters: list[SpanExporter] = []
        for name in exporter_names(environ):
            if name == "console":
                exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout is the command's
            elif name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporters.append(OTLPSpanExporter())  # endpoint, headers: OTEL_EXPORTER_OTLP_*
            else:
                log.warning(
                    "trace_exporter_unsupported",
                    exporter=name,
                    problem="toolwire sets up the otlp and console exporters only",
                    fix="set the provider in code, or run under opentelemetry-instrument",
                )
        provider = SdkTracerProvider(resource=Resource.create())  # OTEL_SERVICE_NAME, …
        for exporter in exporters:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        log.info("tracing_configured", exporters=[type(e).__name__ for e in exporters])
    return trace.get_tracer(INSTRUMENTATION)


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """``OTEL_TRACES_EXPORTER`` as the list of exporter names it may be (``console,otlp``);
    ``otlp`` when it is unset (an OTLP endpoint asked for traces)."""
    value = environ.get("OTEL_TRACES_EXPORTER", "").strip() or "otlp"
    return list(dict.fromkeys(n.strip().lower() for n in value.split(",") if n.strip()))


class QuestionSpans:
    """Turns one question's events into spans (an observer; see the module docstring)."""

    def __init__(self, tracer: Tracer) -> None:
        from opentelemetry import context

        self._tracer = tracer
        self._outer = context.get_current()  # a server request's span, if one is active
        self._spans: dict[str, Span] = {}
        self._unnamed: set[str] = set()
        """Model calls whose requested model was not known when they started."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepStarted):
            self._start(event)
        elif isinstance(event, StepFinished) and event.step in self._spans:
            self._finish(event, self._spans.pop(event.step))

    def _start(self, event: StepStarted) -> None:
        from opentelemetry import trace

        parent = self._spans.get(event.parent or "")
        context = trace.set_span_in_context(parent) if parent is not None else self._outer
        name, kind, attributes = _opening(event)
        self._spans[event.step] = self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes
        )
        if isinstance(event, ModelCallStarted) and not event.model:
            self._unnamed.add(event.step)

    def _finish(self, event: StepFinished, span: Span) -> None:
        from opentelemetry.trace import Status, StatusCode

        failure: tuple[str, str] | None = None
        if isinstance(event, RoundFinished):
            span.update_name(f"invoke_agent {event.domain or 'toolwire'}")
            span.set_attributes(_round_attributes(event))
            if event.error is not None:
                failure = (event.error, event.error)
        elif isinstance(event, TaskFinished):
            span.set_attribute("toolwire.task.status", event.status.value)
        elif isinstance(event, CoordinatorFinished):
            span.set_attribute("toolwire.coordinator.outcome", event.record.outcome)
            if event.record.outcome == "error":
                failure = ("coordinator_error", event.record.detail)
        elif isinstance(event, ToolFinished):
            span.set_attribute("toolwire.tool.outcome", event.record.outcome)
            if event.record.outcome == "error":
                failure = ("tool_error", event.record.detail)
        elif isinstance(event, ModelCallFinished):
            record = event.record
            if event.step in self._unnamed and record.requested_model:
                # the server named the model during the call (none was configured)
                span.update_name(f"chat {record.requested_model}")
                span.set_attribute("gen_ai.request.model", record.requested_model)
            self._unnamed.discard(event.step or "")
            span.set_attributes(_reply_attributes(record))
            if not record.ok:
                failure = ("model_error", record.error or "")
        if failure is not None:
            span.set_attribute("error.type", failure[0])
            span.set_status(Status(StatusCode.ERROR, redact(failure[1])))
        span.end()
        if isinstance(event, RoundFinished):
            self._end_abandoned()

    def _end_abandoned(self) -> None:
        """Spans the round left open (it was cancelled mid-step) end with it, as errors."""
        from opentelemetry.trace import Status, StatusCode

        for span in reversed(list(self._spans.values())):
            span.set_attribute("error.type", "abandoned")
            span.set_status(Status(StatusCode.ERROR, "the round ended before this step did"))
            span.end()
        self._spans.clear()


def _opening(event: StepStarted) -> tuple[str, Any, dict[str, Any]]:
    """A started step's span name, kind and first attributes."""
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any]
    if isinstance(event, ModelCallStarted):
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAME,
            "gen_ai.output.type": event.output_type,
            "openai.api.type": "chat_completions",
            "toolwire.purpose": event.purpose,
        }
        if event.model:
            attributes["gen_ai.request.model"] = event.model
        if event.stream:
            attributes["gen_ai.request.stream"] = True  # set if and only if streamed
        if event.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = event.max_tokens
        if event.temperature is not None:
            attributes["gen_ai.request.temperature"] = event.temperature
        name = f"chat {event.model}" if event.model else "chat"
        return name, SpanKind.CLIENT, attributes
    if isinstance(event, ToolStarted):
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "toolwire.task_no": event.task_no,
            "toolwire.tool.reason": event.reason,
        }
        return f"execute_tool {event.tool_name}", SpanKind.INTERNAL, attributes
    if isinstance(event, TaskStarted):
        attributes = {
            "toolwire.task_no": event.task_no,
            "toolwire.task.conditional": event.conditional,
        }
        if event.owner_coordinator_name:
            attributes["toolwire.task.owner_coordinator"] = event.owner_coordinator_name
        return f"toolwire.task {event.task_no}", SpanKind.INTERNAL, attributes
    if isinstance(event, CoordinatorStarted):
        attributes = {"toolwire.task_no": event.task_no}
        return f"toolwire.coordinator {event.coordinator_name}", SpanKind.INTERNAL, attributes
    assert isinstance(event, RoundStarted)
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": PROVIDER_NAME,
        "toolwire.resumed": event.resumed,
    }
    return "invoke_agent", SpanKind.INTERNAL, attributes


def _reply_attributes(record: CallRecord) -> dict[str, Any]:
    """What a finished model call's reply said (the request's attributes were set at its start)."""
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": record.cached_prompt_tokens,
    }
    if record.model:  # "" when no reply came
        attributes["gen_ai.response.model"] = record.model
    if record.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [record.finish_reason]
    return attributes


def _round_attributes(event: RoundFinished) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "toolwire.failures": event.failures,
        "gen_ai.usage.input_tokens": event.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": event.usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": event.usage.cached_prompt_tokens,
        "toolwire.model_calls": event.usage.llm_calls,
    }
    if event.domain is not None:
        attributes["gen_ai.agent.name"] = event.domain
    if event.conversation is not None:  # a hash of the session id: it cannot resume the session
        attributes["gen_ai.conversation.id"] = event.conversation
    if event.kind is not None:
        attributes["toolwire.answer.kind"] = event.kind
    return attributes
