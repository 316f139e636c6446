"""What a caller sees of internal errors: a generic reason and an error id, never the text.

A tool's exception can hold a connection string, a model server's error body can echo an API key,
a configuration problem names files on the server. An answer's ``failures``, the error details in
its ``trace`` (failed tools and coordinators, the tool selection's failure and the tools it left
out, notes) and its ``model_calls`` are therefore shown
to callers as, for example, ``"task 1: tool shop.lookup failed (error id 3f9c0a17b2e4)"``; the
text behind each id is logged once as an ``error_withheld`` event (redacted of secret shapes,
like every event), so an operator finds it from the id. Identical texts share an id.

The verbose form (``verbose=True``: every detail, secret shapes still masked) is an explicit
choice: ``toolwire ask --trace`` locally, ``server.expose_error_details`` for a deployment whose
callers are trusted. What tools answered (the text, guaranteed contexts, a tool's result) is the
answer itself and passes unchanged either way.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import structlog

from toolwire.llm.base import CallRecord
from toolwire.orchestrator.answer import Answer, TaskTrace
from toolwire.redaction import redact

log = structlog.get_logger(__name__)


def new_error_id() -> str:
    """A fresh id for one withheld error (what a caller quotes to an operator)."""
    return secrets.token_hex(6)


@dataclass
class _Disclosure:
    """How the error texts of one answer are shown: withheld behind ids, or shown redacted."""

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

    def _id_for(self, text: str, where: dict[str, str]) -> str:
        error_id = self.ids.get(text)
        if error_id is None:
            error_id = self.ids[text] = new_error_id()
            log.warning("error_withheld", error_id=error_id, detail=text, **where)
        return error_id


def disclosed_answer(answer: Answer, *, verbose: bool = False) -> Answer:
    """``answer`` as a caller may see it (see the module docstring)."""
    disclosure = _Disclosure(verbose)
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
            "trace": trace,
            "model_calls": [_disclosed_call(call, disclosure) for call in answer.model_calls],
        }
    )


def _disclosed_trace(task: TaskTrace, disclosure: _Disclosure) -> TaskTrace:
    where = {"task_no": task.task_no}
    steps = {run.detail: f"tool {run.tool_name}" for run in task.tools if run.outcome == "error"}
    selection = task.selection
    if selection is not None:
        if selection.failure is not None:
            steps.setdefault(selection.failure, "tool selection")
        selection = selection.model_copy(
            update={
                "failure": selection.failure
                and disclosure.failure(selection.failure, "tool selection", **where),
                "left_out": {
                    name: disclosure.detail(raised, tool=name, **where)
                    for name, raised in selection.left_out.items()
                },
            }
        )
    return task.model_copy(
        update={
            "selection": selection,
            "tools": [
                run.model_copy(
                    update={"detail": disclosure.detail(run.detail, tool=run.tool_name, **where)}
                )
                if run.outcome == "error"
                else run
                for run in task.tools
            ],
            "coordinators": [
                run.model_copy(
                    update={
                        "detail": disclosure.detail(
                            run.detail, coordinator=run.coordinator_name, **where
                        )
                    }
                )
                if run.outcome == "error"
                else run
                for run in task.coordinators
            ],
            "failures": [
                disclosure.failure(failure, steps.get(failure), **where)
                for failure in task.failures
            ],
            "notes": [redact(note) for note in task.notes],
            "sub_tasks": [_disclosed_trace(sub_task, disclosure) for sub_task in task.sub_tasks],
        }
    )


def _disclosed_call(call: CallRecord, disclosure: _Disclosure) -> CallRecord:
    if call.error is None:
        return call
    return call.model_copy(update={"error": disclosure.detail(call.error, purpose=call.purpose)})


def _walk(task: TaskTrace) -> list[TaskTrace]:
    tasks = [task]
    for sub_task in task.sub_tasks:
        tasks.extend(_walk(sub_task))
    return tasks
