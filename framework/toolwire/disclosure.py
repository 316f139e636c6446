"""What a caller sees of internal errors: a generic reason and an error id, never the text.

A tool's exception can hold a connection string, a model server's error body can echo an API key,
a configuration problem names files on the server. An answer's ``failures``, the error details in
its ``trace`` (failed tools and coordinators, the tool selection's failure and the tools it left
out, notes), its ``model_calls`` and the notes of its ``context`` (a follow-up rewrite or a
compression of earlier turns that failed) are therefore shown to callers as, for example,
``"task 1: tool shop.lookup failed (error id 3f9c0a17b2e4)"``; the text behind each id is logged
once as an ``error_withheld`` event (redacted of secret shapes, like every event), so an
operator finds it from the id. Identical texts share an id.

The verbose form (``verbose=True``: every detail, secret shapes still masked) is an explicit
choice: ``toolwire ask --trace`` locally, ``server.expose_error_details`` for a deployment whose
callers are trusted. What tools answered (the text, guaranteed contexts, a tool's result) is the
answer itself and passes unchanged either way, and so do an answer's notices
(:class:`~toolwire.run_state.Notice`: a part of the context cut for the model, a compression that
failed, the answer cut off at its length limit), which toolwire words itself: their ``message``
is shown, in ``notices`` and as their lines of ``failures``, and only their ``detail`` (a
server's error, a document's name) is withheld (``error id …``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import structlog

from toolwire.conversation import TurnContext
from toolwire.events import (
    CoordinatorFinished,
    Event,
    ModelCallFinished,
    Routed,
    ToolFinished,
    ToolsChosen,
)
from toolwire.llm.base import CallRecord
from toolwire.orchestrator.answer import Answer, TaskTrace
from toolwire.redaction import redact
from toolwire.run_state import CoordinatorRunRecord, Notice, ToolRunRecord
from toolwire.selection.routing import RoutingRecord
from toolwire.selection.trace import SelectionRecord, StepRecord

log = structlog.get_logger(__name__)


def new_error_id() -> str:
    """A fresh id for one withheld error (what a caller quotes to an operator)."""
    return secrets.token_hex(6)


@dataclass
class Disclosure:
    """How the error texts of one answer are shown: withheld behind ids, or shown redacted.

    One per answer; a streamed answer's events and its final answer share one, so a failure
    has the same error id in both."""

    verbose: bool
    ids: dict[str, str] = field(default_factory=dict)

    def detail(self, text: str, **where: str) -> str:
        """A failed record's detail."""
        if self.verbose:
            return redact(text)
        return f"failed (error id {self._id_for(text, where)})"

    def failure(self, text: str, step: str | None = None, **where: str) -> str:
        """One line of a task's failures (``step``: what failed, such as ``tool shop.lookup``,
        when it is known)."""
        if self.verbose:
            return redact(text)
        return f"{step or 'a step'} failed (error id {self._id_for(text, where)})"

    def notice(self, notice: Notice) -> Notice:
        """A notice: its message as it is (secret shapes masked), its detail withheld."""
        detail = notice.detail
        if detail is not None:
            where = {"task_no": notice.task_no, "notice": notice.kind}
            detail = redact(detail) if self.verbose else f"error id {self._id_for(detail, where)}"
        return notice.model_copy(update={"message": redact(notice.message), "detail": detail})

    def context_note(self, note: str) -> str:
        """A note of ``Answer.context`` (why a follow-up rewrite or a compression of earlier
        turns was not used): toolwire's words before the first ``": "`` are shown, what follows
        (a model server's error, what the model wrote) is withheld like a failure's text."""
        if self.verbose:
            return redact(note)
        said, colon, detail = note.partition(": ")
        if not colon:
            return redact(note)
        return f"{said} (error id {self._id_for(detail, {'note': said})})"

    def _id_for(self, text: str, where: dict[str, str]) -> str:
        error_id = self.ids.get(text)
        if error_id is None:
            error_id = self.ids[text] = new_error_id()
            log.warning("error_withheld", error_id=error_id, detail=text, **where)
        return error_id


def disclosed_answer(
    answer: Answer, *, verbose: bool = False, disclosure: Disclosure | None = None
) -> Answer:
    """``answer`` as a caller may see it (see the module docstring)."""
    disclosure = disclosure or Disclosure(verbose)
    trace = _disclosed_trace(answer.trace, disclosure)
    shown = {
        f"task {task.task_no}: {failure}": f"task {task.task_no}: {shown_failure}"
        for task, shown_task in zip(_walk(answer.trace), _walk(trace), strict=True)
        for failure, shown_failure in zip(task.failures, shown_task.failures, strict=True)
    }
    return answer.model_copy(
        update={
            # the answer's failures are its tasks' failures, each after its task number
            "failures": [shown.get(f) or disclosure.failure(f) for f in answer.failures],
            "notices": [disclosure.notice(notice) for notice in answer.notices],
            "trace": trace,
            "model_calls": [_disclosed_call(call, disclosure) for call in answer.model_calls],
            "routing": _disclosed_routing(answer.routing, disclosure),
            "context": _disclosed_context(answer.context, disclosure),
        }
    )


def disclosed_event(event: Event, disclosure: Disclosure) -> Event:
    """A step event of a streamed answer as the caller may see it: the records it carries
    follow the rules of the answer's trace (a failed tool's or coordinator's detail, the tool
    selection's failure and the tools it left out, a failed model call, a failed routing)."""
    update: dict[str, Any] = {}
    if isinstance(event, ToolFinished):
        update["record"] = _disclosed_tool_run(event.record, disclosure, event.task_no)
    elif isinstance(event, CoordinatorFinished):
        update["record"] = _disclosed_coordinator_run(event.record, disclosure, event.task_no)
    elif isinstance(event, ToolsChosen):
        where = {"task_no": event.task_no}
        update["selection"] = _disclosed_selection(event.selection, disclosure, where)
        update["tools"] = [
            _disclosed_tool_run(run, disclosure, event.task_no) for run in event.tools
        ]
    elif isinstance(event, ModelCallFinished):
        update["record"] = _disclosed_call(event.record, disclosure)
    elif isinstance(event, Routed):
        update["routing"] = _disclosed_routing(event.routing, disclosure)
    return event.model_copy(update=update) if update else event


def _disclosed_context(context: TurnContext | None, disclosure: Disclosure) -> TurnContext | None:
    if context is None or not context.notes:
        return context
    return context.model_copy(
        update={"notes": [disclosure.context_note(note) for note in context.notes]}
    )


def _disclosed_trace(task: TaskTrace, disclosure: Disclosure) -> TaskTrace:
    where = {"task_no": task.task_no}
    steps = {run.detail: f"tool {run.tool_name}" for run in task.tools if run.outcome == "error"}
    if task.selection is not None and task.selection.failure is not None:
        steps.setdefault(task.selection.failure, "tool selection")
    notices = [disclosure.notice(notice) for notice in task.notices]
    # a notice's line among the failures is shown as the notice is
    shown = {
        notice.describe(): seen.describe()
        for notice, seen in zip(task.notices, notices, strict=True)
    }
    return task.model_copy(
        update={
            "selection": _disclosed_selection(task.selection, disclosure, where),
            "tools": [_disclosed_tool_run(run, disclosure, task.task_no) for run in task.tools],
            "coordinators": [
                _disclosed_coordinator_run(run, disclosure, task.task_no)
                for run in task.coordinators
            ],
            "failures": [
                shown.get(failure) or disclosure.failure(failure, steps.get(failure), **where)
                for failure in task.failures
            ],
            "notices": notices,
            "notes": [redact(note) for note in task.notes],
            "sub_tasks": [_disclosed_trace(sub_task, disclosure) for sub_task in task.sub_tasks],
        }
    )


def _disclosed_selection(
    selection: SelectionRecord | None, disclosure: Disclosure, where: dict[str, str]
) -> SelectionRecord | None:
    if selection is None:
        return None
    steps = [
        step.model_copy(update={"failure": _disclosed_step_failure(step, disclosure, where)})
        if step.failure
        else step
        for step in selection.steps
    ]
    return selection.model_copy(
        update={
            "steps": steps,
            "left_out": {
                name: disclosure.detail(raised, tool=name, **where)
                for name, raised in selection.left_out.items()
            },
        }
    )


def _disclosed_step_failure(step: StepRecord, disclosure: Disclosure, where: dict[str, str]) -> str:
    """A selection step's failure, withheld under the id of the task's failure line it makes
    ("<step>: <failure>", :attr:`SelectionRecord.failure`), so both show the same id."""
    if disclosure.verbose:
        return disclosure.failure(step.failure or "")
    return disclosure.failure(f"{step.step}: {step.failure}", "tool selection", **where)


def _disclosed_tool_run(run: ToolRunRecord, disclosure: Disclosure, task_no: str) -> ToolRunRecord:
    if run.outcome != "error":
        return run
    detail = disclosure.detail(run.detail, tool=run.tool_name, task_no=task_no)
    return run.model_copy(update={"detail": detail})


def _disclosed_coordinator_run(
    run: CoordinatorRunRecord, disclosure: Disclosure, task_no: str
) -> CoordinatorRunRecord:
    if run.outcome != "error":
        return run
    detail = disclosure.detail(run.detail, coordinator=run.coordinator_name, task_no=task_no)
    return run.model_copy(update={"detail": detail})


def _disclosed_routing(
    routing: RoutingRecord | None, disclosure: Disclosure
) -> RoutingRecord | None:
    if routing is None or routing.failure is None:
        return routing
    # the same text is a failure of task 1, so it is shown under the same id
    return routing.model_copy(update={"failure": disclosure.failure(routing.failure)})


def _disclosed_call(call: CallRecord, disclosure: Disclosure) -> CallRecord:
    if call.error is None:
        return call
    return call.model_copy(update={"error": disclosure.detail(call.error, purpose=call.purpose)})


def _walk(task: TaskTrace) -> list[TaskTrace]:
    tasks = [task]
    for sub_task in task.sub_tasks:
        tasks.extend(_walk(sub_task))
    return tasks
