"""What every ``POST /v1/ask`` does around its question, streamed or not: the request's log
context and redaction, the progress kept for a timeout's message, and that message."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from toolwire.llm.budget import question_budget
from toolwire.redaction import scrubbing, session_ref
from toolwire.server.problems import ApiError
from toolwire.server.progress import RequestProgress, tracking_progress
from toolwire.server.schemas import AskRequest
from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)


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
    body: AskRequest, caller: str | None, request_timeout_s: float
) -> Iterator[RequestProgress]:
    """Inside: events are logged with the caller and the resumed session's short hash (never its
    id), the question's progress is tracked for :func:`timeout_error`, and its model calls end
    before the request's time does (so a slow model is a 502 or an answer, not a 504; the
    orchestrator's own budget never extends this one)."""
    session = session_ref(body.session_id) if body.session_id else None
    model_time = request_timeout_s * MODEL_SHARE_OF_REQUEST
    with (
        structlog.contextvars.bound_contextvars(session=session, caller=caller),
        scrubbing({body.session_id: f"<session {session}>"} if body.session_id else {}),
        tracking_progress() as progress,
        question_budget(model_time, "server.request_timeout_s"),
    ):
        yield progress


def timeout_error(limit: float, progress: RequestProgress) -> ApiError:
    """The 504 of a question that ran past ``server.request_timeout_s``: the last step it
    logged, and that nothing was stored for the round (logged as ``request_timed_out``)."""
    step = progress.describe()
    details = {
        "timeout_s": limit,
        "step": progress.last_event,
        "step_logged_after_s": round(progress.last_event_at, 3),
        **progress.details,
    }
    log.warning("request_timed_out", timeout_s=limit, last_step=step)
    return ApiError(
        504,
        "timeout",
        f"the question did not finish within {limit:g} s "
        f"(server.request_timeout_s); the last step it logged was {step}. "
        "Nothing was stored for this round: a waiting conversation can be continued "
        "by sending the message again",
        details=details,
    )
