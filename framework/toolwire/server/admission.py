"""How many questions one server process answers at once (``server.max_concurrent_questions``).

Every question holds memory, tool threads and a place in the model's queue: an embedded model
answers one call at a time, so a question that waits behind many others runs out of
``server.request_timeout_s`` after holding all that for nothing. Past the limit ``POST /v1/ask``
is therefore answered at once with 503 ``busy`` and ``Retry-After``, so that a client (or the load
balancer, which may try another replica) comes back later instead of queueing without bound.

The count is of requests to the path between their first byte and their last, streamed answers
included (a stream holds its question until it ends or its client goes away): the middleware
wraps the whole response, so no way out of a request (an error, a cancelled stream) can leave its
place taken. The MCP ``<domain>.ask`` tool takes its places the same way
(:class:`QuestionPlaces`, refused with the same ``busy`` words; ``toolwire.mcp.server``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from toolwire.server.problems import ApiError

log = structlog.get_logger(__name__)

RETRY_AFTER_S = 5
"""What a refused client is told to wait (``Retry-After``): about one question's time."""


class QuestionPlaces:
    """At most ``limit()`` questions at once in this process; one past it is refused at once.

    One process runs one event loop, so the count needs no lock."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.in_flight = 0

    def take(self) -> AbstractContextManager[None]:
        """A place, held until the returned context ends; :func:`busy` raised when none is free.

        The refusal comes from this call, not from entering the context, so that a caller tells
        it apart from what fails while it holds the place."""
        limit = self.limit()
        if self.in_flight >= limit:
            log.warning("question_refused", reason="busy", in_flight=self.in_flight, limit=limit)
            raise busy(self.in_flight, limit)
        self.in_flight += 1
        return self._held()

    @contextmanager
    def _held(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.in_flight -= 1


class QuestionAdmission:
    """ASGI middleware: at most ``limit()`` ``POST`` requests to ``path`` at once, 503 past it."""

    def __init__(self, app: ASGIApp, *, limit: Callable[[], int], path: str) -> None:
        self.app = app
        self.places = QuestionPlaces(limit)
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        try:
            place = self.places.take()
        except ApiError as refusal:
            await refusal.response()(scope, receive, send)
            return
        with place:
            await self.app(scope, receive, send)


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
