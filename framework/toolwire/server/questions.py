"""What every ``POST /v1/ask`` (streamed or not) and every MCP ``<domain>.ask`` does around its
question: the request's log context and redaction, the progress kept for a timeout's message, the
time limit and that message; and for the plain request, what the streamed one gets from its
response: the question stops when the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import structlog
from starlette.types import Receive

from toolwire.llm.budget import question_budget
from toolwire.redaction import scrubbing, session_ref
from toolwire.request_progress import RequestProgress, tracking_progress
from toolwire.server.problems import ApiError
from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)

T = TypeVar("T")


def check_message(message: str, settings: ServerSettings) -> None:
    """A message over ``server.max_message_chars`` is refused (422) before anything runs
    (``POST /v1/ask`` and the MCP ``<domain>.ask`` tool)."""
    if len(message) > settings.max_message_chars:
        raise ApiError(
            422,
            "message_too_long",
            f"the message has {len(message)} characters; the limit is "
            f"{settings.max_message_chars} (server.max_message_chars); shorten it",
            details={"length": len(message), "limit": settings.max_message_chars},
        )


MODEL_SHARE_OF_REQUEST = 0.95
"""The model calls of a request must end within this share of ``server.request_timeout_s``."""


@contextmanager
def question_scope(
    session_id: str | None, caller: str | None, request_timeout_s: float
) -> Iterator[RequestProgress]:
    """Inside: events are logged with the caller and the resumed session's short hash (never its
    id), the question's progress is tracked for :func:`timeout_error`, and its model calls end
    before the request's time does (so a slow model is a 502 or an answer, not a 504; the
    orchestrator's own budget never extends this one)."""
    session = session_ref(session_id) if session_id else None
    model_time = request_timeout_s * MODEL_SHARE_OF_REQUEST
    with (
        structlog.contextvars.bound_contextvars(session=session, caller=caller),
        scrubbing({session_id: f"<session {session}>"} if session_id else {}),
        tracking_progress() as progress,
        question_budget(model_time, "server.request_timeout_s"),
    ):
        yield progress


async def within_request_time(work: Awaitable[T], limit: float, progress: RequestProgress) -> T:
    """``work``'s result; past ``limit`` seconds (``server.request_timeout_s``) it is cancelled,
    so a round it interrupts stores nothing (unless its store write had begun: that write is
    finished), and :func:`timeout_error` is raised. A
    ``TimeoutError`` of the work's own passes through as it is."""
    timer = asyncio.timeout(limit)
    try:
        async with timer:
            return await work
    except TimeoutError:
        if not timer.expired():
            raise
        raise timeout_error(limit, progress) from None


def timeout_error(limit: float, progress: RequestProgress) -> ApiError:
    """The 504 of a question that ran past ``server.request_timeout_s``: the last step it
    logged, and what was stored for the round (logged as ``request_timed_out``)."""
    step = progress.describe()
    details = {
        "timeout_s": limit,
        "step": progress.last_event,
        "step_logged_after_s": round(progress.last_event_at, 3),
        **progress.details,
    }
    log.warning(
        "request_timed_out", timeout_s=limit, last_step=step, turn_stored=progress.turn_stored
    )
    return ApiError(
        504,
        "timeout",
        f"the question did not finish within {limit:g} s "
        f"(server.request_timeout_s); the last step it logged was {step}. "
        f"{what_was_stored(progress)}",
        details=details,
    )


def what_was_stored(progress: RequestProgress) -> str:
    """What an interrupted question left in the conversation, for its caller: nothing, or (when
    the time ran out during its store write, which is always finished) its whole turn."""
    if progress.turn_stored is None:
        return (
            "Nothing was stored for this round: a waiting conversation can be continued by "
            "sending the message again"
        )
    return (
        f"Its answer was stored as turn {progress.turn_stored} of the conversation before the "
        "time ran out: send the next message, not this one again"
    )


def client_gone(progress: RequestProgress) -> ApiError:
    """What a plain request whose client went away ends with (logged as ``request_abandoned``):
    nobody reads it, but the access log's status (499, as nginx counts it) says what happened."""
    log.info(
        "request_abandoned",
        reason="the client went away; the round is dropped",
        turn_stored=progress.turn_stored,
    )
    return ApiError(
        499,
        "client_closed_request",
        f"the client closed the connection before the answer was ready. "
        f"{what_was_stored(progress)}",
    )


class ClientGone(Exception):
    """The client closed the connection before the work was done."""


async def until_the_client_leaves(receive: Receive, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; the work runs in its own task, cancelled (and waited for, so that a
    round it interrupts stores nothing) when the client disconnects first (``ClientGone``) or
    when the caller is cancelled (a time limit).

    ``receive`` is the request's, its body already read: what it returns next is the client's
    disconnect (the same way Starlette's streaming response listens for it)."""
    task = asyncio.create_task(work)
    gone = asyncio.create_task(_disconnect(receive))
    try:
        done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait([task])  # raises nothing of the task's
    if task not in done:
        gone.result()  # a failure to read the connection is raised as it is
        raise ClientGone
    return task.result()


async def _disconnect(receive: Receive) -> None:
    """Return once the client has disconnected."""
    while (await receive())["type"] != "http.disconnect":
        pass
