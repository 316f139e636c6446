"""Where plugin code runs: ``PluginRunner`` awaits ``async`` methods and runs plain (blocking)
ones in ``ToolThreads``, a fixed number of threads apart from everything else, each call within
a time limit. The orchestrator and the MCP server run tools through the app's one runner.

An ``async`` method runs on the caller's event loop, watched by :mod:`toolwire.loop_watchdog`
(one that blocks the loop is logged as ``event_loop_blocked``, by name), unless its tool sets
``own_event_loop``: then it runs in a tool thread, on that thread's own event loop (made once per
thread and reused), so that blocking stops only that thread and the time limit, which is the
caller's, still strikes. Why this is not the default: objects made on the app's loop cannot be
used on another one (an ``httpx.AsyncClient`` raises "bound to a different event loop"), and the
framework's own ``async`` tools use such objects (the injected model's client, its semaphore).

Why not ``asyncio.to_thread``: its pool is the event loop's default executor, which the SQLite
session store (and any library calling ``to_thread``) shares, so a few stuck tools used to starve
the store and fail ``/readyz``. Why not ``concurrent.futures.ThreadPoolExecutor``: its threads
are joined when the interpreter exits, so one tool stuck for good would keep ``toolwire ask`` or a
stopping server from ever exiting. These threads are daemons: an abandoned call (its caller timed
out) occupies its thread until it returns, never more than ``size`` threads, and never blocks exit.
Once every thread is held by such a call, new calls fail at once instead of queueing for ever.
Idle threads end by themselves after a while; :meth:`ToolThreads.release` ends them at once (an
app that is closed does), and a later call starts threads again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import structlog

from toolwire.errors import ToolThreadsExhaustedError, ToolTimeoutError
from toolwire.loop_watchdog import watchdog
from toolwire.settings import OrchestratorSettings

log = structlog.get_logger(__name__)

_Work = tuple[Future[Any], Callable[[], Any]] | None
"""A call and its future; None tells the thread that takes it to end if it is not needed."""

IDLE_EXIT_S = 10.0
"""A thread with nothing to do for this long ends (a new one starts when work comes)."""

OWN_LOOP_ATTRIBUTE = "own_event_loop"
"""The tool attribute (``ChatbotTool.own_event_loop``, YAML ``own_event_loop``) that runs its
``async`` methods on an event loop of their own in a tool thread."""

LEFTOVER_GRACE_S = 1.0
"""How long tasks that an ``own_event_loop`` call started and left running get to end once they
are cancelled (its call is over); tasks still running then are dropped with their loop."""


class ToolThreads:
    """At most ``size`` daemon threads running submitted calls in order of submission.

    A call whose future was cancelled before a thread took it never runs (a caller that timed
    out while it waited in the queue leaves nothing behind); one already running is
    :meth:`abandon`-ed by its caller.
    """

    def __init__(self, size: int, name: str = "toolwire-tool") -> None:
        if size < 1:
            raise ValueError(f"a thread pool needs at least one thread (got {size})")
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._threads: set[threading.Thread] = set()
        self._started = 0
        self._lock = threading.Lock()
        self._busy = 0
        self._outstanding = 0
        """Calls submitted and not finished (queued or running): a thread is started while
        there are more of them than threads, up to ``size``."""
        self._abandoned = 0

    @property
    def busy(self) -> int:
        """Threads running a call right now (including calls whose caller gave up)."""
        return self._busy

    @property
    def alive(self) -> int:
        """Threads of the pool that have not ended (running a call or waiting for one)."""
        with self._lock:
            return sum(thread.is_alive() for thread in self._threads)

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        """Queue ``call``; its future holds the result or whatever it raised."""
        future: Future[Any] = Future()
        with self._lock:
            if self._abandoned >= self.size:
                raise ToolThreadsExhaustedError(self.size)
            self._queue.put((future, call))
            self._outstanding += 1
            if len(self._threads) < self.size and self._outstanding > len(self._threads):
                self._started += 1
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{self._started}", daemon=True
                )
                self._threads.add(thread)
                thread.start()
        return future

    def abandon(self, future: Future[Any]) -> None:
        """The caller stops waiting for ``future``: dropped if still queued; if running, its
        thread counts as held until the call returns."""
        if future.cancel():
            return
        with self._lock:
            self._abandoned += 1
        future.add_done_callback(self._returned)  # runs at once if it has returned meanwhile

    def release(self) -> None:
        """End the idle threads now instead of after ``IDLE_EXIT_S`` (a running call keeps its
        thread until it returns); a later :meth:`submit` starts threads again."""
        with self._lock:
            threads = len(self._threads)
        for _ in range(threads):  # a thread that takes one while it is needed goes on
            self._queue.put(None)

    def _returned(self, _future: Future[Any]) -> None:
        with self._lock:
            self._abandoned -= 1

    def _work(self) -> None:
        try:
            self._serve()
        finally:
            _close_thread_loop()

    def _serve(self) -> None:
        while True:
            try:
                work = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:  # submit() decides under this lock whether to start a thread
                    if self._queue.empty():
                        self._threads.discard(threading.current_thread())
                        return
                continue
            if work is None:  # release(): end unless calls submitted since need this thread
                with self._lock:
                    if self._outstanding < len(self._threads):
                        self._threads.discard(threading.current_thread())
                        return
                continue
            future, call = work
            if future.set_running_or_notify_cancel():
                self._run(future, call)
            with self._lock:
                self._outstanding -= 1

    def _run(self, future: Future[Any], call: Callable[[], Any]) -> None:
        with self._lock:
            self._busy += 1
        try:
            result = call()
        except BaseException as error:  # handed to the caller, who decides what it means
            future.set_exception(error)
        else:
            future.set_result(result)
        finally:
            with self._lock:
                self._busy -= 1


class PluginRunner:
    """Runs tools' and coordinators' methods: ``async`` ones awaited (on the caller's loop, or
    for a tool with ``own_event_loop`` on a tool thread's loop), plain ones (which may block) in
    the tool threads, each call within ``timeout_s`` (None: no limit).

    One runner serves every domain of an app. Its threads are its own: the event loop's default
    executor (the SQLite session store, the server) never waits behind a stuck tool. A call that
    runs out of time raises :class:`ToolTimeoutError`; a call still queued then never starts, one
    running is abandoned (:meth:`ToolThreads.abandon`).
    """

    def __init__(self, *, threads: int, timeout_s: float | None) -> None:
        self.threads = ToolThreads(threads)
        self.timeout_s = timeout_s

    @classmethod
    def of(cls, settings: OrchestratorSettings) -> PluginRunner:
        """The runner ``orchestrator.tool_threads`` and ``orchestrator.tool_timeout_s`` ask for
        (no thread starts before the first plain method runs)."""
        return cls(threads=settings.tool_threads, timeout_s=settings.tool_timeout_s)

    def release_threads(self) -> None:
        """Let the idle tool threads end now (:meth:`ToolThreads.release`)."""
        self.threads.release()

    async def call(self, method: Callable[..., Any], *args: Any) -> Any:
        """``method(*args)``, awaited if needed, with the caller's context variables (structlog's
        bound fields reach the tool's own log events, in its thread too)."""
        timer = asyncio.timeout(self.timeout_s)
        try:
            async with timer:
                if inspect.iscoroutinefunction(method):
                    if runs_on_own_loop(method):
                        return await self._on_own_loop(method, *args)
                    watch = watchdog.start(method)
                    try:
                        return await method(*args)
                    finally:
                        watchdog.finish(watch)
                result = await self._in_thread(method, *args)
                if inspect.isawaitable(result):
                    result = await result
                return result
        except TimeoutError:
            if not timer.expired():
                raise  # the method's own TimeoutError
            name = getattr(method, "__qualname__", repr(method))
            log.warning(
                "plugin_call_timed_out",
                method=name,
                timeout_s=self.timeout_s,
                busy_threads=self.threads.busy,
                threads=self.threads.size,
            )
            assert self.timeout_s is not None
            raise ToolTimeoutError(name, self.timeout_s) from None

    async def _in_thread(self, method: Callable[..., Any], *args: Any) -> Any:
        context = contextvars.copy_context()
        future = self.threads.submit(lambda: context.run(method, *args))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # a time limit (this call's or the request's), a shutdown
            self.threads.abandon(future)
            raise

    async def _on_own_loop(self, method: Callable[..., Any], *args: Any) -> Any:
        call = _OnOwnLoop(method, args, contextvars.copy_context())
        future = self.threads.submit(call)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # as above: the coroutine is cancelled on its loop too
            call.cancel()
            self.threads.abandon(future)
            raise


def runs_on_own_loop(method: Callable[..., Any]) -> bool:
    """Whether ``method`` (a coroutine function) belongs to a tool with ``own_event_loop`` set
    (or, not a bound method, carries the attribute itself)."""
    owner = getattr(method, "__self__", method)
    return getattr(owner, OWN_LOOP_ATTRIBUTE, False) is True


class _OnOwnLoop:
    """A coroutine method called in a tool thread, on that thread's event loop, in the caller's
    context variables; the caller, on its own loop, may :meth:`cancel` it at any time."""

    def __init__(
        self, method: Callable[..., Any], args: tuple[Any, ...], context: contextvars.Context
    ) -> None:
        self._method = method
        self._args = args
        self._context = context
        self._lock = threading.Lock()
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    def __call__(self) -> Any:
        """In the tool thread: run the coroutine to its end, then end the tasks it left."""
        loop, tasks = _thread_loop()
        with self._lock:
            if self._cancelled:  # the caller gave up before it started
                raise asyncio.CancelledError
            task = self._task = loop.create_task(self._method(*self._args), context=self._context)
        try:
            return loop.run_until_complete(task)
        finally:
            _end_leftovers(loop, tasks, task, self._method)

    def cancel(self) -> None:
        """From the caller's thread: cancel the coroutine (at its next ``await``, which comes
        when whatever blocks its loop returns), or never start it."""
        with self._lock:
            self._cancelled = True
            task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its loop was closed: the task is over
                task.get_loop().call_soon_threadsafe(task.cancel)


_local = threading.local()
"""A tool thread's own event loop (``loop``) and the tasks alive on it (``tasks``)."""


def _thread_loop() -> tuple[asyncio.AbstractEventLoop, set[asyncio.Task[Any]]]:
    """This tool thread's event loop, made on its first ``own_event_loop`` call and kept until
    the thread ends; a task factory keeps track of the tasks on it (cheaper than
    ``asyncio.all_tasks``, which looks at every task of the process)."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is not None and not loop.is_closed():
        tasks: set[asyncio.Task[Any]] = _local.tasks
        return loop, tasks
    loop = asyncio.new_event_loop()
    tasks = set()

    def track(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    loop.set_task_factory(track)
    _local.loop, _local.tasks = loop, tasks
    return loop, tasks


def _end_leftovers(
    loop: asyncio.AbstractEventLoop,
    tasks: set[asyncio.Task[Any]],
    main: asyncio.Task[Any],
    method: Callable[..., Any],
) -> None:
    """Cancel the tasks a call started and did not wait for, as ``asyncio.run`` does: the loop
    runs only during calls, so they would otherwise stand still until the next one. Tasks that
    do not end within :data:`LEFTOVER_GRACE_S` are dropped with the loop (the next call on this
    thread gets a new one)."""
    left = [task for task in tasks if task is not main and not task.done()]
    if not left:
        return
    for task in left:
        task.cancel()
    _done, pending = loop.run_until_complete(asyncio.wait(left, timeout=LEFTOVER_GRACE_S))
    if pending:
        log.warning(
            "tool_tasks_left_running",
            method=getattr(method, "__qualname__", repr(method)),
            tasks=len(pending),
            grace_s=LEFTOVER_GRACE_S,
        )
        _local.loop = None
        loop.close()


def _close_thread_loop() -> None:
    """When a tool thread ends: close its event loop, if it made one."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    _local.loop = None
    if loop is None or loop.is_closed():
        return
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:  # an async generator's cleanup failed: the loop is closed all the same
        log.warning("tool_loop_close_failed", exc_info=True)
    finally:
        loop.close()
