"""What happens while a question is answered, as typed events: one per step, as it happens.

The orchestrator, the conversation service and the model layer *emit* events; whoever wants them
*observes* the question: ``App.ask_stream`` (the CLI's live status line, the server's
Server-Sent Events, the web page) and the OpenTelemetry spans of :mod:`toolwire.telemetry`. All
of them consume these same events. Emitting costs a context-variable lookup when nobody observes.

Steps that take time come in pairs: a ``*_started`` event opens a step and gets its ``step`` id;
the matching ``*_finished`` event names the same ``step``. Every other event carries ``parent``,
the step it happened in (model calls made by a tool have the tool's step as parent), so a
consumer can draw the tree as it grows. Finished events carry the same records the answer's
trace shows (``ToolRunRecord``, ``CoordinatorRunRecord``, ``SelectionRecord``, ``RoutingRecord``,
``CallRecord``), copied at the moment of the event. Treat events as read-only: one instance goes
to every observer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Literal, Protocol

import structlog
from pydantic import BaseModel, Field

from toolwire.llm.base import CallRecord, Usage
from toolwire.redaction import session_ref
from toolwire.run_state import (
    CoordinatorRunRecord,
    TaskStatus,
    ToolRun,
    ToolRunRecord,
)
from toolwire.selection.routing import RoutingRecord
from toolwire.selection.trace import SelectionRecord
from toolwire.task import TaskInfo

log = structlog.get_logger(__name__)


class Event(BaseModel):
    """What every event carries; ``emit`` fills both fields."""

    at_ms: float = 0.0
    """Milliseconds since the question started."""
    parent: str | None = None
    """The step this event happened in (None: the question itself)."""


class StepStarted(Event):
    step: str = ""
    """This step's id, unique within the question; its finished event names it."""


class StepFinished(Event):
    step: str | None = None
    """The id of the step this event closes (None when nobody observed its start)."""


# -- the question -------------------------------------------------------------------------------


class RoundStarted(StepStarted):
    """A message arrived: a new question, or the reply to a clarifying question."""

    type: Literal["round_started"] = "round_started"
    resumed: bool
    """Whether the message was sent with a conversation's id: a later turn, or the reply to a
    waiting clarifying question."""
    turn: int | None = None
    """The conversation's turn the round answers (1: a new conversation); every event of the
    round belongs to it. None when the conversation named could not be continued (unknown,
    another caller's, another domain's): the round ends at once with that error."""


class Routed(Event):
    """A message that named no domain was routed to one (``routing.domain``; None: the default)."""

    type: Literal["routed"] = "routed"
    routing: RoutingRecord


class RoundFinished(StepFinished):
    """The round ended: with an answer or a clarifying question (``kind``), or with an error
    (``error``: the exception's type; the caller gets the error itself)."""

    type: Literal["round_finished"] = "round_finished"
    domain: str | None = None
    turn: int | None = None
    """The conversation's turn the round answered: every event of the round belongs to it."""
    conversation: str | None = None
    """The conversation as logs name it (``redaction.session_ref``: a hash that correlates the
    rounds of one conversation but cannot resume it)."""
    kind: Literal["answer", "clarification"] | None = None
    error: str | None = None
    failures: int = 0
    usage: Usage = Field(default_factory=Usage)

    @classmethod
    def of(cls, answer: _AnswerLike, step: str | None) -> RoundFinished:
        return cls(
            step=step,
            domain=answer.domain,
            turn=answer.turn,
            conversation=session_ref(answer.session_id) if answer.session_id else None,
            kind=answer.kind,
            failures=len(answer.failures),
            usage=answer.usage.model_copy(),
        )


class _AnswerLike(Protocol):
    """What ``round_finished`` reads off an ``Answer`` (which lives above this module)."""

    @property
    def domain(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def kind(self) -> Literal["answer", "clarification"]: ...
    @property
    def failures(self) -> list[str]: ...
    @property
    def usage(self) -> Usage: ...


# -- tasks, coordinators, tools -----------------------------------------------------------------


class TaskStarted(StepStarted):
    """The orchestrator took up a task (SPEC §3: task "1" is the message, "1.1" its subtask)."""

    type: Literal["task_started"] = "task_started"
    task_no: str
    task_prompt: str
    owner_coordinator_name: str | None = None
    conditional: bool = False

    @classmethod
    def of(cls, task: TaskInfo) -> TaskStarted:
        return cls(
            task_no=task.task_no,
            task_prompt=task.question() if task.task_no == "1" else task.task_prompt,
            owner_coordinator_name=task.owner_coordinator_name,
            conditional=task.conditional,
        )


class TaskFinished(StepFinished):
    """A task left the orchestrator: closed (done, skipped, failed) or waiting for the user."""

    type: Literal["task_finished"] = "task_finished"
    task_no: str
    status: TaskStatus


class CoordinatorStarted(StepStarted):
    type: Literal["coordinator_started"] = "coordinator_started"
    task_no: str
    coordinator_name: str


class CoordinatorFinished(StepFinished):
    """A coordinator had its chance to decompose the task (``record.outcome``)."""

    type: Literal["coordinator_finished"] = "coordinator_finished"
    task_no: str
    record: CoordinatorRunRecord
    new_subtasks: list[str] = Field(default_factory=list)
    """Numbers of the subtasks it created."""


class ToolsChosen(Event):
    """The tools that will run on a task, and how they were chosen (``selection``: the
    candidates with their retrieval scores, the model's choice and confirmations; None when the
    task's required tools run instead)."""

    type: Literal["tools_chosen"] = "tools_chosen"
    task_no: str
    selection: SelectionRecord | None = None
    tools: list[ToolRunRecord] = Field(default_factory=list)

    @classmethod
    def of(cls, task: TaskInfo, chosen: list[ToolRun]) -> ToolsChosen:
        selection = task.run.selection.model_copy(deep=True) if task.run.selection else None
        return cls(
            task_no=task.task_no,
            selection=selection,
            tools=[run.record.model_copy() for run in chosen],
        )


class ToolStarted(StepStarted):
    type: Literal["tool_started"] = "tool_started"
    task_no: str
    tool_name: str
    reason: str
    """Why it runs: ``required``, ``suitability``, ``rag`` or ``deep_fallback``."""


class ToolFinished(StepFinished):
    """A tool ran: ``record.outcome`` (context, guaranteed, clarification, terminal, error)."""

    type: Literal["tool_finished"] = "tool_finished"
    task_no: str
    record: ToolRunRecord


class ClarificationAsked(Event):
    """A tool needs the user's answer; the round stops and waits for the reply."""

    type: Literal["clarification_asked"] = "clarification_asked"
    task_no: str
    tool_name: str
    question: str


class DeepSearchRound(Event):
    """The gatekeeper found the retrieved context short; the deep fallback runs again."""

    type: Literal["deep_search_round"] = "deep_search_round"
    task_no: str
    round: int
    tool_name: str
    missing: list[str] = Field(default_factory=list)


# -- the model ----------------------------------------------------------------------------------


class ModelCallStarted(StepStarted):
    """A model call was sent, with what it asks for (its reply's figures come when it ends)."""

    type: Literal["model_call_started"] = "model_call_started"
    purpose: str
    model: str = ""
    """The model the request names ("" when it is not known yet: the server picks)."""
    output_type: Literal["text", "json"] = "text"
    """``json``: the reply must follow a schema; ``text``: free text (or function calls)."""
    stream: bool = False
    """The reply is asked for as a stream (the answer's text, watched)."""
    max_tokens: int | None = None
    temperature: float | None = None


class ModelCallFinished(StepFinished):
    """A model call ended, with the figures the server reported (``record``)."""

    type: Literal["model_call_finished"] = "model_call_finished"
    record: CallRecord


class AnswerDelta(Event):
    """A piece of the answer's text as the model produces it. The pieces of one composition,
    joined, are the model's text; the final answer (``Answer.text``) may add to it (guaranteed
    contexts lead it, a note on failures ends it) and is the one to keep."""

    type: Literal["answer_delta"] = "answer_delta"
    text: str


class ModelProgress(Event):
    """The embedded model is being prepared (first question of a fresh install)."""

    type: Literal["model_progress"] = "model_progress"
    model: str
    stage: Literal["assembling", "assembled", "starting", "ready"]
    bytes_done: int = 0
    bytes_total: int = 0
    seconds: float = 0.0
    """Time the stage took (``assembled``, ``ready``), or so far."""


StepEvents = (
    RoundStarted
    | Routed
    | RoundFinished
    | TaskStarted
    | TaskFinished
    | CoordinatorStarted
    | CoordinatorFinished
    | ToolsChosen
    | ToolStarted
    | ToolFinished
    | ClarificationAsked
    | DeepSearchRound
    | ModelCallStarted
    | ModelCallFinished
    | AnswerDelta
    | ModelProgress
)
StepEvent = Annotated[StepEvents, Field(discriminator="type")]
"""Every step event, told apart by its ``type`` (``TypeAdapter(StepEvent)`` reads one)."""

Observer = Callable[[Event], None]
"""Receives every event of the questions it observes. It runs in the step's own task (or a
worker thread, for the embedded model's preparation): keep it quick, and never raise."""


# -- emitting and observing ---------------------------------------------------------------------


@dataclass
class _Scope:
    """The observers of one question, its clock and its step ids."""

    observers: tuple[Observer, ...]
    started: float = field(default_factory=time.perf_counter)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))


_scope: ContextVar[_Scope | None] = ContextVar("toolwire_event_scope", default=None)
_step: ContextVar[str | None] = ContextVar("toolwire_event_step", default=None)
_failed_observers: set[int] = set()
_failed_lock = threading.Lock()


@contextmanager
def observing(*observers: Observer) -> Iterator[None]:
    """Send every event emitted inside the block (and in tasks and threads it starts) to
    ``observers`` too; blocks nest, and an inner block keeps the outer one's clock and ids."""
    outer = _scope.get()
    if outer is None:
        scope = _Scope(tuple(observers))
    else:
        scope = _Scope((*outer.observers, *observers), outer.started, outer.ids)
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)


def observed() -> bool:
    """Whether anyone observes the current question (skip building costly events if not)."""
    return _scope.get() is not None


def emit(event: Event) -> None:
    """Send ``event`` to the current question's observers (nothing when nobody observes).

    An observer that raises is logged once and skipped: watching a question never breaks it.
    """
    scope = _scope.get()
    if scope is None:
        return
    event.at_ms = round((time.perf_counter() - scope.started) * 1000, 1)
    if not isinstance(event, StepFinished):
        event.parent = _step.get()
    for observer in scope.observers:
        try:
            observer(event)
        except Exception:
            with _failed_lock:
                first = id(observer) not in _failed_observers
                _failed_observers.add(id(observer))
            if first:
                log.exception("event_observer_failed", event_type=getattr(event, "type", ""))


@contextmanager
def opened(event: StepStarted) -> Iterator[str | None]:
    """Emit ``event`` as a new step and make it the parent of the events emitted inside the
    block; yields the step id for the finished event (None when nobody observes)."""
    scope = _scope.get()
    if scope is None:
        yield None
        return
    event.step = f"s{next(scope.ids)}"
    emit(event)
    token = _step.set(event.step)
    try:
        yield event.step
    finally:
        _step.reset(token)
