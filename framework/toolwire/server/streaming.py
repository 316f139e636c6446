"""``POST /v1/ask`` as Server-Sent Events: the question's steps as they happen, then the answer.

Every message is ``event: <type>`` and ``data: <JSON>``, the JSON carrying the same ``type`` and
``turn``, the conversation's turn the round answers (what its ``round_started`` says, written here
on every message of the stream; null only when the conversation named could not be continued):

- the step events of :mod:`toolwire.events` (``task_started``, ``tools_chosen``,
  ``tool_finished``, ``answer_delta`` …), their error texts disclosed like the answer body's;
- ``answer``: ``{"type": "answer", "answer": <the Answer the non-streamed request returns>}``;
- ``error``: the error body the non-streamed request would have answered with, plus its
  ``status`` (the stream's own status is 200 once it has begun).

A comment (``: keep-alive``) after ``server.sse_keep_alive_s`` of silence keeps proxies from
closing the connection while the model thinks. The stream ends after ``answer`` or ``error``. A
client that goes away cancels the question: nothing is stored for a round that did not finish.
So does ``server.request_timeout_s``, whether or not the client reads: a client that stops
reading leaves this generator waiting in a send, so the question is stopped by a timer of its
own, not by the loop below (and the admission drops the connection a little later,
``toolwire.server.admission``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import structlog
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from toolwire.app import App
from toolwire.disclosure import Disclosure, disclosed_answer, disclosed_event
from toolwire.errors import ToolwireError
from toolwire.events import Event, RoundStarted
from toolwire.orchestrator.streaming import Answered, WatchedQuestion
from toolwire.server.problems import ApiError, api_error_for
from toolwire.server.questions import question_scope, timeout_error
from toolwire.server.schemas import AskRequest, StreamError
from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)

SSE_MEDIA_TYPE = "text/event-stream"
KEEP_ALIVE = b": keep-alive\n\n"


def event_stream_response(
    app: App, body: AskRequest, caller: str | None, settings: ServerSettings
) -> StreamingResponse:
    """The streamed answer to ``body`` (see the module docstring)."""
    return StreamingResponse(
        answer_events(app, body, caller, settings),
        media_type=SSE_MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def message(kind: str, payload: BaseModel, turn: int | None = None) -> bytes:
    """One Server-Sent Event (its JSON on one ``data:`` line), ``"turn"`` first in the JSON
    unless ``payload`` has a field of that name (``round_started`` and ``round_finished`` say it
    themselves)."""
    data = payload.model_dump_json()
    if "turn" not in type(payload).model_fields:
        rest = f",{data[1:]}" if data != "{}" else "}"
        data = f'{{"turn":{json.dumps(turn)}{rest}'
    return f"event: {kind}\ndata: {data}\n\n".encode()


async def answer_events(
    app: App, body: AskRequest, caller: str | None, settings: ServerSettings
) -> AsyncIterator[bytes]:
    """The messages of one streamed question, ending with ``answer`` or ``error``."""
    disclosure = Disclosure(settings.expose_error_details)
    turn: int | None = None  # the round's, once its round_started says it
    loop = asyncio.get_running_loop()
    limit = settings.request_timeout_s
    deadline = loop.time() + limit
    with question_scope(body.session_id, caller, limit) as progress:
        question = WatchedQuestion(
            lambda: app.ask(body.message, body.domain, body.session_id, caller=caller)
        )
        stopping: list[asyncio.Future[None]] = []

        def stop_at_deadline() -> None:
            if question.running:
                stopping.append(asyncio.ensure_future(question.cancel()))

        timer = loop.call_at(deadline, stop_at_deadline)
        try:
            while True:
                remaining = deadline - loop.time()
                wait = min(settings.sse_keep_alive_s, remaining)
                try:
                    event = await asyncio.wait_for(question.next(), timeout=max(wait, 0))
                except TimeoutError:
                    if deadline - loop.time() > 0:
                        yield KEEP_ALIVE
                        continue
                    await question.cancel()
                    yield _error(timeout_error(limit, progress), turn)
                    return
                if event is None:
                    if stopping:  # stopped by the timer while this waited for the client
                        yield _error(timeout_error(limit, progress), turn)
                    return
                if isinstance(event, RoundStarted):
                    turn = event.turn
                yield _shown(event, disclosure, turn)
        except ToolwireError as error:  # logged here, where the session is scrubbed
            yield _error(api_error_for(error, verbose=settings.expose_error_details), turn)
        except Exception:
            log.exception("request_crashed", path="/v1/ask", stream=True)
            yield _error(
                ApiError(
                    500,
                    "internal_error",
                    "the server failed while answering; the request id finds the traceback "
                    "in the server's log",
                ),
                turn,
            )
        finally:
            timer.cancel()
            if question.running and not stopping:
                log.info("stream_abandoned", reason="the client went away; the round is dropped")
            await question.cancel()


def _shown(event: Event | Answered, disclosure: Disclosure, turn: int | None) -> bytes:
    if isinstance(event, Answered):
        shown = disclosed_answer(event.answer, disclosure=disclosure)
        return message("answer", Answered(answer=shown), turn)
    kind = str(getattr(event, "type", "event"))
    return message(kind, disclosed_event(event, disclosure), turn)


def _error(error: ApiError, turn: int | None) -> bytes:
    body = error.body()
    return message("error", StreamError(status=error.status, **body.model_dump()), turn)
