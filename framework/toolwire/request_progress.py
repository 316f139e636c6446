"""Which step a question is in, so a request that runs out of time can say where it stopped.

The server opens a ``RequestProgress`` for every question and keeps it in a context variable;
tasks the orchestrator starts inherit it. A structlog processor copies each log event of the
request into it, so the last orchestrator or model event (its name and its purpose, tool or task
fields) is known when the time limit strikes. Nothing here changes the events themselves.

The conversation service notes here when a turn was stored (:func:`note_turn_stored`): a round
the time limit interrupts during its store write still finishes that write, and the caller's
error must then say that the turn was stored, not that nothing was.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

STEP_FIELDS = ("purpose", "tool", "tool_name", "task_no", "coordinator", "domain")
"""Event fields that say what a step was doing; copied into the progress when present."""


@dataclass
class RequestProgress:
    """The last step one question reached."""

    started: float = field(default_factory=time.monotonic)
    last_event: str | None = None
    last_event_at: float = 0.0
    """Seconds after the start of the question."""
    details: dict[str, str] = field(default_factory=dict)
    turn_stored: int | None = None
    """The number of the turn this question stored (None: it stored none)."""

    def record(self, event: str, fields: MutableMapping[str, Any]) -> None:
        self.last_event = event
        self.last_event_at = time.monotonic() - self.started
        self.details = {name: str(fields[name]) for name in STEP_FIELDS if name in fields}

    def describe(self) -> str:
        """``"tool_activated (tool=pharma.lookup, task_no=1), logged 0.02 s after the start"``.

        Steps log when they begin (``tool_activated``) or end (``llm_call``), so the time the
        event was logged tells whether the question hung in that step or after it.
        """
        if self.last_event is None:
            return "none yet: no step had logged an event (the question was still starting)"
        shown = ", ".join(f"{name}={value}" for name, value in self.details.items())
        step = f"{self.last_event} ({shown})" if shown else self.last_event
        return f"{step}, logged {self.last_event_at:.2f} s after the start"


_current: ContextVar[RequestProgress | None] = ContextVar("toolwire_request_progress", default=None)


@contextmanager
def tracking_progress() -> Iterator[RequestProgress]:
    """Record every structlog event logged inside the block (and its child tasks)."""
    progress = RequestProgress()
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)


def note_turn_stored(turn: int) -> None:
    """The current question stored its turn ``turn`` (nothing outside a tracked question)."""
    progress = _current.get()
    if progress is not None:
        progress.turn_stored = turn


def record_progress(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: note the event in the current request's progress, if any."""
    progress = _current.get()
    if progress is not None:
        progress.record(str(event_dict.get("event", "")), event_dict)
    return event_dict
