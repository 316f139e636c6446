"""Notices plugin code that blocks the event loop it runs on, and says which.

An ``async`` tool method runs on the app's event loop (``toolwire.tool_threads.PluginRunner``).
One that blocks it (``time.sleep``, CPU work, a blocking client) stops everything on that loop:
other questions, the HTTP server, ``/readyz``, and the time limits, whose timers are callbacks of
the same loop. Nothing can interrupt it there, so the least the framework owes the operator is a
log line naming it while it happens: the loop's beat (a callback every :data:`BEAT_S`, scheduled
only while an ``async`` plugin method runs on it) stops, and a daemon thread that finds no beat for
:data:`BLOCKED_WARN_S` logs ``event_loop_blocked`` with the method, where it is stuck and the
question's log context (``domain``, ``task_no``, ``tool``, ``request_id``); once the loop runs
again, ``event_loop_resumed`` says for how long it stood. The remedy is the tool's
``own_event_loop`` (docs/orchestrator.md, "Tools that block or hang").
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any

import structlog

log = structlog.get_logger(__name__)

BLOCKED_WARN_S = 1.0
"""A loop that has not run for this long while plugin code runs on it is reported blocked.
(A candidate for a setting, ``orchestrator.loop_blocked_warn_s``; a constant meanwhile.)"""
BEAT_S = 0.1
"""How often a watched loop beats, and how often the watchdog looks."""
IDLE_EXIT_S = 10.0
"""The watchdog thread ends after this long with nothing to watch (it starts again when needed)."""


class _Call:
    """One ``async`` plugin method running on a watched loop."""

    __slots__ = ("code", "context", "loop", "name")

    def __init__(
        self,
        name: str,
        code: CodeType | None,
        context: contextvars.Context,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.name = name
        self.code = code
        self.loop = loop
        self.context = context
        """The caller's context variables: the report is logged in a copy of them (a copy each
        time: one context cannot be entered by two threads at once)."""


class _Loop:
    """A watched loop: its thread, its last beat and the plugin calls running on it."""

    __slots__ = ("beat", "blocked_by", "blocked_since", "calls", "loop", "thread_id")

    def __init__(self, loop: asyncio.AbstractEventLoop, thread_id: int) -> None:
        self.loop = loop
        self.thread_id = thread_id
        self.beat = time.monotonic()
        self.calls: dict[_Call, None] = {}
        self.blocked_since: float | None = None
        """The last beat before a stall that was reported (None: none reported)."""
        self.blocked_by: _Call | None = None
        """The call found on the loop's stack when the stall was reported."""


class LoopWatchdog:
    """Watches the loops ``async`` plugin methods run on, while they run (one per process:
    :data:`watchdog`). Costs a dictionary entry per call and a beat per :data:`BEAT_S`."""

    def __init__(self, blocked_warn_s: float = BLOCKED_WARN_S, beat_s: float = BEAT_S) -> None:
        self.blocked_warn_s = blocked_warn_s
        self.beat_s = beat_s
        self._lock = threading.Lock()
        self._loops: dict[asyncio.AbstractEventLoop, _Loop] = {}
        self._thread: threading.Thread | None = None

    def start(self, method: Callable[..., Any]) -> _Call:
        """``method`` is about to be awaited on the running loop: watch the loop until
        :meth:`finish` (call it in a ``finally``)."""
        loop = asyncio.get_running_loop()
        function = getattr(method, "__func__", method)
        call = _Call(
            getattr(method, "__qualname__", repr(method)),
            getattr(function, "__code__", None),
            contextvars.copy_context(),
            loop,
        )
        with self._lock:
            watched = self._loops.get(loop)
            first = watched is None
            if watched is None:
                watched = self._loops[loop] = _Loop(loop, threading.get_ident())
            watched.calls[call] = None
            watched.beat = time.monotonic()  # the loop runs right now
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="toolwire-loop-watchdog", daemon=True
                )
                self._thread.start()
        if first:
            loop.call_later(self.beat_s, self._beat, watched)
        return call

    def finish(self, call: _Call) -> None:
        """The call :meth:`start` returned has ended (returned, raised or was cancelled)."""
        with self._lock:
            watched = self._loops.get(call.loop)
            if watched is None:  # its loop was closed meanwhile
                return
            watched.calls.pop(call, None)
            resumed = self._resumed(watched)
        if resumed is not None:
            self._log_resumed(call, resumed)

    def _beat(self, watched: _Loop) -> None:
        """Every :data:`BEAT_S` on a watched loop, until a beat finds no call on it (the entry
        outlives its last call by a beat, so calls one after another share one beat)."""
        with self._lock:
            if self._loops.get(watched.loop) is not watched:
                return
            if not watched.calls:
                del self._loops[watched.loop]
                return
            watched.beat = time.monotonic()
            resumed = self._resumed(watched)
            call = next(iter(watched.calls))
        if resumed is not None:
            self._log_resumed(call, resumed)
        watched.loop.call_later(self.beat_s, self._beat, watched)

    def _resumed(self, watched: _Loop) -> tuple[float, _Call | None] | None:
        """Seconds the loop stood and the call found blocking it, if a stall of it was reported
        (under the lock)."""
        if watched.blocked_since is None:
            return None
        stood = time.monotonic() - watched.blocked_since
        culprit, watched.blocked_since, watched.blocked_by = watched.blocked_by, None, None
        return stood, culprit

    def _log_resumed(self, call: _Call, resumed: tuple[float, _Call | None]) -> None:
        stood, culprit = resumed
        (culprit or call).context.copy().run(
            log.info,
            "event_loop_resumed",
            blocked_s=round(stood, 2),
            method=culprit.name if culprit else None,
        )

    def _watch(self) -> None:
        idle_since: float | None = None
        while True:
            time.sleep(self.beat_s)
            now = time.monotonic()
            with self._lock:
                for loop in [loop for loop in self._loops if loop.is_closed()]:
                    del self._loops[loop]  # closed with a watched call never finished
                if not self._loops:
                    idle_since = idle_since or now
                    if now - idle_since >= IDLE_EXIT_S:
                        self._thread = None
                        return
                    continue
                idle_since = None
                reports = [
                    self._stalled(watched, now)
                    for watched in self._loops.values()
                    if watched.calls
                    and watched.blocked_since is None
                    and now - watched.beat >= self.blocked_warn_s
                ]
            for culprit, fields in reports:
                if culprit is None:
                    log.warning("event_loop_blocked", **fields)
                else:  # with the question's log context: domain, task_no, tool, request_id
                    culprit.context.copy().run(log.warning, "event_loop_blocked", **fields)

    def _stalled(self, watched: _Loop, now: float) -> tuple[_Call | None, dict[str, Any]]:
        """Mark ``watched`` reported; the watched call found on its thread's stack (the
        outermost frame of one of their methods) and what to log (under the lock)."""
        watched.blocked_since = watched.beat
        stack = list(_frames(sys._current_frames().get(watched.thread_id)))
        by_code = {call.code: call for call in watched.calls if call.code is not None}
        culprit = next((by_code[f.f_code] for f in stack if f.f_code in by_code), None)
        watched.blocked_by = culprit
        fields: dict[str, Any] = {
            "blocked_s": round(now - watched.beat, 2),
            "method": culprit.name if culprit else None,
            "where": _where(stack[0]) if stack else None,
            "hint": "an async method must not block: await, or run it on an event loop of "
            "its own (own_event_loop = True, or own_event_loop: true in its YAML entry)",
        }
        if culprit is None:
            fields["running"] = [call.name for call in watched.calls]
        return culprit, fields


def _frames(frame: FrameType | None) -> Iterator[FrameType]:
    """``frame`` and its callers, innermost first."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def _where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


watchdog = LoopWatchdog()
"""The process's watchdog (one thread, whichever loops and apps it watches)."""
