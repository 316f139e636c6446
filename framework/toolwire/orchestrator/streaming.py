"""A question watched as it is answered: its step events as they happen, then the answer.

:class:`WatchedQuestion` runs one ``ask`` in its own task and queues the events it emits
(:mod:`toolwire.events`); ``next()`` hands them out, then :class:`Answered` with the same
``Answer`` that ``ask`` returns, and raises a failure as ``ask`` raises it. Cancelling it (the
caller went away, or ran out of time) cancels the question: a round that did not finish stores
nothing, so a conversation waiting for a reply still waits for it. ``stream_question`` is the
same as an async iterator (``App.ask_stream``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from toolwire.events import Event, StepEvents, observing
from toolwire.orchestrator.answer import Answer


class Answered(BaseModel):
    """The last event of a question: the same ``Answer`` a plain ``ask`` returns."""

    type: Literal["answer"] = "answer"
    answer: Answer


AskEvent = Annotated[StepEvents | Answered, Field(discriminator="type")]
"""What a watched question yields: step events, then :class:`Answered`."""

_DONE = object()


class WatchedQuestion:
    """One ``ask()`` running in its own task, observed; started at creation (in a running loop).

    Events reach the queue from the question's tasks and from worker threads (the embedded
    model is assembled in one) alike.
    """

    def __init__(self, ask: Callable[[], Awaitable[Answer]]) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._finished = False

        async def run() -> Answer:
            return await ask()

        with observing(self._observe):
            self._task = asyncio.create_task(run())  # the task's context carries the observer
        self._task.add_done_callback(lambda _: self._queue.put_nowait(_DONE))

    def _observe(self, event: Event) -> None:
        if threading.get_ident() == self._loop_thread:
            self._queue.put_nowait(event)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def next(self) -> Event | Answered | None:
        """The next event; ``Answered`` once the question is done, None after that. The
        question's failure is raised instead of ``Answered``; a question cancelled, even while
        this waited (:meth:`cancel` by a time limit), has no answer: None. Waiting may be
        cancelled (by a time limit) without losing an event."""
        if self._finished:
            return None
        item = await self._queue.get()
        if item is not _DONE:
            assert isinstance(item, Event)
            return item
        self._finished = True
        if self._task.cancelled():  # its result() would raise CancelledError into the caller
            return None
        return Answered(answer=self._task.result())

    async def cancel(self) -> None:
        """Stop the question if it still runs, and wait until it has stopped."""
        self._finished = True
        if not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])  # raises nothing of the task's

    @property
    def running(self) -> bool:
        return not self._task.done()


async def stream_question(
    ask: Callable[[], Awaitable[Answer]],
) -> AsyncGenerator[Event | Answered, None]:
    """Run ``ask()`` watched; yield its events, then the answer (see module doc)."""
    question = WatchedQuestion(ask)
    try:
        while (event := await question.next()) is not None:
            yield event
    finally:
        await question.cancel()
