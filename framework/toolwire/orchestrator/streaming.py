"""A question watched as it is answered: its step events as they happen, then the answer.

``ask_stream`` runs one ``ask`` in its own task and yields the events it emits
(:mod:`toolwire.events`) while it runs, then :class:`Answered` with the same ``Answer`` that
``ask`` returns; a failure is raised from the iterator, as ``ask`` raises it. Closing the
iterator early (the caller went away) cancels the question: a round that did not finish stores
nothing, so a conversation waiting for a reply still waits for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import suppress
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from toolwire.events import Event, StepEvents, observing
from toolwire.orchestrator.answer import Answer


class Answered(BaseModel):
    """The last event of a question: the same ``Answer`` a plain ``ask`` returns."""

    type: Literal["answer"] = "answer"
    answer: Answer


AskEvent = Annotated[StepEvents | Answered, Field(discriminator="type")]
"""What ``ask_stream`` yields: step events, then :class:`Answered`."""

_DONE = object()


async def stream_question(
    ask: Callable[[], Awaitable[Answer]],
) -> AsyncGenerator[Event | Answered, None]:
    """Run ``ask()`` while observing it; yield its events, then the answer (see module doc)."""
    queue: asyncio.Queue[object] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def observe(event: Event) -> None:
        if threading.get_ident() == loop_thread:
            queue.put_nowait(event)
        else:  # the embedded model is assembled in a worker thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

    async def run() -> Answer:
        return await ask()

    with observing(observe):
        question = asyncio.create_task(run())  # the task's context carries the observer
    question.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        while (item := await queue.get()) is not _DONE:
            assert isinstance(item, Event)
            yield item
        yield Answered(answer=question.result())
    finally:
        if not question.done():
            question.cancel()
            with suppress(asyncio.CancelledError):
                await question
