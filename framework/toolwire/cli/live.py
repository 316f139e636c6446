"""A question watched on the terminal: ``toolwire ask`` and ``toolwire chat`` consume the same
step events as the HTTP stream (:mod:`toolwire.events`).

On stderr, when it is a terminal, a status line names the step the question is in and the time
so far; the embedded model's first start (assembly, server start) always leaves a line with how
long it took, terminal or not, so a first question is never a silent minute. The answer's text
goes to stdout piece by piece as the model writes it (unless the caller prints JSON).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.status import Status

from toolwire.app import App
from toolwire.cli.text import literal
from toolwire.events import (
    AnswerDelta,
    CoordinatorStarted,
    DeepSearchRound,
    Event,
    ModelCallStarted,
    ModelProgress,
    Routed,
    TaskStarted,
    ToolsChosen,
    ToolStarted,
)
from toolwire.orchestrator import Answer
from toolwire.orchestrator.streaming import Answered
from toolwire.printable import printable

MB = 1_000_000


@dataclass
class LiveView:
    """What the terminal shows of one watched question (see the module docstring)."""

    out: Console
    err: Console
    stream_text: bool
    streamed: list[str] = field(default_factory=list)
    task_no: str = "1"
    started: float = field(default_factory=time.monotonic)
    status: Status | None = None
    line: str = ""
    """The status line's last text (kept also when stderr is no terminal)."""

    def __enter__(self) -> LiveView:
        if self.err.is_terminal:
            self.status = Status("thinking…", console=self.err, spinner="dots")
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_status()

    @property
    def text(self) -> str:
        """The answer's text as it was streamed so far."""
        return "".join(self.streamed)

    def show(self, event: Event) -> None:
        if isinstance(event, AnswerDelta):
            self._answer_piece(event.text)
        elif isinstance(event, ModelProgress):
            self._model_progress(event)
        else:
            step = self._describe(event)
            if step is not None:
                self._set_status(step)

    def _describe(self, event: Event) -> str | None:
        """The status line for a step event (None: the line stays as it is)."""
        if isinstance(event, TaskStarted):
            self.task_no = event.task_no
            return f"task {event.task_no}: {_short(event.task_prompt)}"
        task = f"task {self.task_no}"
        if isinstance(event, Routed):
            return f"routed to {event.routing.domain or 'the default domain'}"
        if isinstance(event, CoordinatorStarted):
            return f"task {event.task_no}: coordinator {event.coordinator_name}"
        if isinstance(event, ToolsChosen):
            chosen = ", ".join(record.tool_name for record in event.tools) or "no tool"
            return f"task {event.task_no}: chose {chosen}"
        if isinstance(event, ToolStarted):
            return f"task {event.task_no}: running {event.tool_name} ({event.reason})"
        if isinstance(event, DeepSearchRound):
            return f"task {event.task_no}: deep search, round {event.round}"
        if isinstance(event, ModelCallStarted):
            return f"{task}: asking the model ({event.purpose})"
        return None

    def _set_status(self, text: str) -> None:
        self.line = text
        if self.status is not None:
            elapsed = time.monotonic() - self.started
            self.status.update(f"{literal(text)} [dim]{elapsed:.1f} s[/dim]")

    def _answer_piece(self, text: str) -> None:
        self.streamed.append(text)
        if not self.stream_text:
            return
        self._stop_status()  # the answer owns the terminal from here on
        # no markup at all: a piece ending in a backslash would get a second one from escape()
        self.out.print(printable(text), end="", soft_wrap=True, highlight=False, markup=False)
        self.out.file.flush()

    def _model_progress(self, event: ModelProgress) -> None:
        if event.stage == "assembling":
            share = f"{event.bytes_done // MB} of {event.bytes_total // MB} MB"
            self._set_status(f"assembling the embedded model {event.model} ({share})")
        elif event.stage == "starting":
            self._set_status(f"starting the embedded model {event.model}")
        else:
            done = "assembled" if event.stage == "assembled" else "ready"
            size = f" ({event.bytes_total // MB} MB)" if event.stage == "assembled" else ""
            self.err.print(
                f"[dim]embedded model {literal(event.model)} {done}{size} in "
                f"{event.seconds:.1f} s[/dim]"
            )

    def _stop_status(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


async def watch(
    app: App,
    message: str,
    domain: str | None,
    session_id: str | None,
    view: LiveView,
) -> Answer:
    """Ask, showing the question's steps and text in ``view``; the answer (errors raise)."""
    with view:
        async for event in app.ask_stream(message, domain, session_id):
            if isinstance(event, Answered):
                return event.answer
            view.show(event)
    raise AssertionError("unreachable: a watched question ends with its answer or raises")


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
