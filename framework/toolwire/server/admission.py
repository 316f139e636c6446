"""How many questions one server process answers at once (``server.max_concurrent_questions``).

Every question holds memory, tool threads and a place in the model's queue: an embedded model
answers one call at a time, so a question that waits behind many others runs out of
``server.request_timeout_s`` after holding all that for nothing. Past the limit ``POST /v1/ask``
is therefore answered at once with 503 ``busy`` and ``Retry-After``, so that a client (or the load
balancer, which may try another replica) comes back later instead of queueing without bound.

A place is taken once the request's body is in (the body has its own deadline,
``server.body_timeout_s``, and a client slow to send it holds no question's place) and given back
when the response has been sent, streamed answers included (a stream holds its question until it
ends or its client goes away): the middleware wraps the whole response, so no way out of a
request (an error, a cancelled stream) can leave its place taken. Nor can a client that stops
reading: ``server.request_timeout_s`` after the place was taken, the place is given back
whatever the response is doing (the question itself stops at that time too, by its own timer),
and a response still being sent :data:`RESPONSE_GRACE_S` later has its connection dropped
(``request_overran``), so that nothing of the request is left running. The
MCP ``<domain>.ask`` tool takes its places the same way (:class:`QuestionPlaces`, refused with
the same ``busy`` words; ``toolwire.mcp.server``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolwire.server.connections import ABORT_EXTENSION
from toolwire.server.problems import ApiError

log = structlog.get_logger(__name__)

RETRY_AFTER_S = 5
"""What a refused client is told to wait (``Retry-After``): about one question's time."""

RESPONSE_GRACE_S = 2.0
"""How long past ``server.request_timeout_s`` a response may still take to reach its client (a
timeout's error event, the end of an answer read slowly) before its connection is dropped."""


class QuestionPlaces:
    """At most ``limit()`` questions at once in this process; one past it is refused at once.

    One process runs one event loop, so the count needs no lock."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.in_flight = 0

    def take(self) -> Place:
        """A place, held until the returned context ends (or :meth:`Place.release`);
        :func:`busy` raised when none is free.

        The refusal comes from this call, not from entering the context, so that a caller tells
        it apart from what fails while it holds the place."""
        limit = self.limit()
        if self.in_flight >= limit:
            log.warning("question_refused", reason="busy", in_flight=self.in_flight, limit=limit)
            raise busy(self.in_flight, limit)
        self.in_flight += 1
        return Place(self)


class Place:
    """One question's place; given back once, by :meth:`release` or by leaving the context."""

    def __init__(self, places: QuestionPlaces) -> None:
        self._places: QuestionPlaces | None = places

    def release(self) -> None:
        if self._places is not None:
            self._places.in_flight -= 1
            self._places = None

    def __enter__(self) -> Place:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()


class QuestionAdmission:
    """ASGI middleware: at most ``limit()`` ``POST`` requests to ``path`` at once, 503 past it;
    each holds its place for at most ``request_timeout()`` seconds, and its connection is dropped
    :data:`RESPONSE_GRACE_S` later if its response is still being sent.

    Put it inside the body's size limit and deadline (``BodyLimitMiddleware``), so that the body
    is in before a place is taken."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: Callable[[], int],
        path: str,
        request_timeout: Callable[[], float],
    ) -> None:
        self.app = app
        self.places = QuestionPlaces(limit)
        self.path = path
        self.request_timeout = request_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        try:
            place = self.places.take()
        except ApiError as refusal:
            await refusal.response()(scope, receive, send)
            return
        with place, _Overrun(scope, place, self.request_timeout()) as overrun:
            await self.app(scope, receive, overrun.watched(send))


class _Overrun:
    """The time limit of one admitted request: at ``request_timeout_s`` its place is given back;
    :data:`RESPONSE_GRACE_S` later a response still being sent has its connection dropped
    (which ends the request the way a client that went away does), or, where the server offers
    no way to drop it, the request's task is cancelled."""

    def __init__(self, scope: Scope, place: Place, request_timeout_s: float) -> None:
        self.scope = scope
        self.place = place
        self.request_timeout_s = request_timeout_s
        self.started = False
        self.finished = False
        self.task = asyncio.current_task()
        self.timers: list[asyncio.TimerHandle] = []

    def __enter__(self) -> _Overrun:
        loop = asyncio.get_running_loop()
        self.timers = [
            loop.call_later(self.request_timeout_s, self.place.release),
            loop.call_later(self.request_timeout_s + RESPONSE_GRACE_S, self._overran),
        ]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for timer in self.timers:
            timer.cancel()

    def watched(self, send: Send) -> Send:
        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)  # waits while the client does not read (uvicorn's flow control)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.finished = True

        return watched_send

    def _overran(self) -> None:
        if self.finished:
            return  # sent whole: only the application's own end is late, nobody waits on it
        abort = self.scope.get("extensions", {}).get(ABORT_EXTENSION)
        log.warning(
            "request_overran",
            timeout_s=self.request_timeout_s,
            grace_s=RESPONSE_GRACE_S,
            response_started=self.started,
            reason=(
                "the client did not read the response"
                if self.started
                else "the request did not end within its time"
            ),
            action="connection dropped" if callable(abort) else "request cancelled",
        )
        if callable(abort):
            abort()
        elif self.task is not None:
            self.task.cancel()


def busy(in_flight: int, limit: int) -> ApiError:
    """The 503 of a question past the limit."""
    return ApiError(
        503,
        "busy",
        f"the server is answering {in_flight} questions, its limit "
        f"(server.max_concurrent_questions: {limit}); send the question again in "
        f"{RETRY_AFTER_S} s, or raise the limit if the model keeps up",
        details={"in_flight": in_flight, "limit": limit, "retry_after_s": RETRY_AFTER_S},
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )
