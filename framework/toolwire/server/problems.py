"""Every failure becomes a JSON ``ErrorBody`` with a fitting status code.

toolwire's own errors map by kind: a missing session is 404, a round another replica applied
first is 409, a domain, tool name or session the request got wrong is 400, a failed model call is
502, an unreachable session store is 503, a configuration mistake is 500. The request id is in
every body; a 5xx also carries an error id, and its text stays in the server's log
(``toolwire.disclosure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from toolwire.disclosure import new_error_id
from toolwire.errors import (
    STORING_TURN_FAILED,
    ConfigError,
    ModelError,
    SessionConflictError,
    SessionError,
    SessionStoreUnavailableError,
    ToolNameError,
    ToolwireError,
    UnknownDomainError,
    UnknownSessionError,
)
from toolwire.redaction import redact
from toolwire.server.schemas import ErrorBody
from toolwire.strict_json import DuplicateKeyError

log = structlog.get_logger(__name__)


MAX_PROBLEMS_LISTED = 20
"""Validation problems a 422 lists; the rest are counted. A body of thousands of unknown keys
(``{"a":0,"b":0,…}``) made an answer thirteen times its size, about a megabyte for 64 kB."""


class ApiError(Exception):
    """An error response: the server's own decisions (auth, limits, time, unknown domain) are
    raised as one; every other failure is turned into one by the handlers below."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.details = details or {}
        self.headers = headers

    def body(self) -> ErrorBody:
        """The ``ErrorBody``, carrying the current request's id."""
        return ErrorBody(
            error=self.error,
            message=self.message,
            request_id=current_request_id(),
            details=self.details,
        )

    def response(self) -> JSONResponse:
        """The JSON ``ErrorBody`` response."""
        return JSONResponse(
            self.body().model_dump(mode="json"), status_code=self.status, headers=self.headers
        )


def current_request_id() -> str | None:
    """The id the request middleware bound for the request being handled."""
    value = structlog.contextvars.get_contextvars().get("request_id")
    return value if isinstance(value, str) else None


def toolwire_error_status(error: ToolwireError) -> tuple[int, str, dict[str, Any]]:
    """Status, code and details of one of toolwire's own errors."""
    if isinstance(error, UnknownSessionError):
        return 404, "unknown_session", {"session_id": error.session_id}
    if isinstance(error, SessionConflictError):
        return (
            409,
            "session_conflict",
            {
                "session_id": error.session_id,
                "expected_version": error.expected_version,
                "actual_version": error.actual_version,
            },
        )
    if isinstance(error, SessionStoreUnavailableError):
        return 503, "session_store_unavailable", {}
    if isinstance(error, SessionError):
        return 400, "session_error", {}
    if isinstance(error, UnknownDomainError):
        return 400, "unknown_domain", {}
    if isinstance(error, ToolNameError):
        return 400, "unknown_tool", {"name": error.name, "candidates": error.candidates}
    if isinstance(error, ConfigError):
        return 500, "configuration_error", {"problems": [str(p) for p in error.problems]}
    if isinstance(error, ModelError):
        return 502, "model_error", {"purpose": error.purpose}
    return 500, "toolwire_error", {"type": type(error).__name__}


_GENERIC_REASONS = {
    "configuration_error": "the server's configuration is broken",
    "model_error": "the language model failed",
    "session_store_unavailable": (
        "the session store cannot be reached; nothing was changed, retry later"
    ),
}
_STORING_TURN_REASON = (
    f"the session store failed while storing this turn: {STORING_TURN_FAILED}; retry later"
)
"""The reason of a store that failed once the turn's tools had run: not "nothing was changed"."""
_PUBLIC_DETAILS = {
    "session_id",
    "expected_version",
    "actual_version",
    "name",
    "candidates",
    "purpose",
}
"""Details that describe the request or a stable step, never the server's internals."""


def api_error_for(error: ToolwireError, *, verbose: bool = False) -> ApiError:
    """The response for one of toolwire's own errors, logged as a ``request_error`` event.

    A 4xx says what the request got wrong, in full. A 5xx is the server's own failure: the caller
    gets a generic reason and an error id, and the text (which may name files, hosts or an
    upstream body) stays in the log under that id, unless ``verbose``
    (``server.expose_error_details``). Routes that bind request-scoped log context (the session
    being resumed) call this inside that context, so the event is logged with it; the handler
    below covers every other route.
    """
    status, code, details = toolwire_error_status(error)
    if status < 500:
        log.info("request_error", error=code, status=status, message=str(error))
        return ApiError(status, code, str(error), details=details)
    error_id = new_error_id()
    log.error("request_error", error=code, status=status, message=str(error), error_id=error_id)
    if verbose:
        return ApiError(status, code, redact(str(error)), details={**details, "error_id": error_id})
    reason = _generic_reason(error, code)
    public = {key: value for key, value in details.items() if key in _PUBLIC_DETAILS}
    return ApiError(
        status,
        code,
        f"{reason} (error id {error_id}); the server's log has the details under this id",
        details={**public, "error_id": error_id},
    )


def _generic_reason(error: ToolwireError, code: str) -> str:
    """What a 5xx says in place of the error's own text: what failed, and what it means for
    the request (a session store's failure while storing a turn has not changed nothing)."""
    if isinstance(error, SessionStoreUnavailableError) and error.while_storing:
        return _STORING_TURN_REASON
    return _GENERIC_REASONS.get(code, "the server failed")


def unreadable_body(cause: BaseException) -> ApiError:
    """The 422 of a body FastAPI could not parse for a reason other than broken JSON syntax
    (which is a validation error): it raises a bare 400 "error parsing the body" from it."""
    if isinstance(cause, DuplicateKeyError):
        return _duplicate_key(cause)
    if isinstance(cause, UnicodeDecodeError):
        why = "is not UTF-8 text"
    elif isinstance(cause, RecursionError):
        why = "is nested too deeply"
    else:  # ValueError: an integer of more digits than Python converts, say
        why = f"cannot be read as JSON ({type(cause).__name__})"
    return ApiError(
        422,
        "invalid_request",
        f'the request body {why}: send one JSON object in UTF-8, such as {{"message": "..."}}',
        details={"problems": [{"location": "body", "message": f"the body {why}"}]},
    )


def _duplicate_key(cause: DuplicateKeyError) -> ApiError:
    """The 422 of a body that names a key twice (``toolwire.strict_json``): which of the two
    values counts depends on the parser, so neither does."""
    location = ".".join(["body", *(str(step) for step in cause.location or ())])
    return ApiError(
        422,
        "invalid_request",
        f"the request body has a {cause}: send each key once (JSON parsers disagree on which "
        "value of a repeated key wins)",
        details={"problems": [{"location": location, "message": str(cause)}]},
    )


def _declares_json(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this ``Content-Type`` as JSON: ``application/json`` or
    any ``…/json`` or ``…+json`` type, parameters (``; charset=utf-8``) aside. Without the
    header it does not (FastAPI's strict content type), so curl's ``-d`` default of a form is
    refused like any other."""
    if not content_type:
        return False
    subtype = content_type.split(";", 1)[0].strip().lower().partition("/")[2]
    return subtype == "json" or subtype.endswith("+json")


def _body_not_json(content_type: str | None) -> ApiError:
    """The 415 of a body sent without a JSON ``Content-Type``: FastAPI hands such a body to
    validation as bytes, which said only "Input should be a valid dictionary"."""
    declared = (
        f"this request's Content-Type is {content_type[:100]!r}"
        if content_type
        else "this request has no Content-Type"
    )
    return ApiError(
        415,
        "unsupported_media_type",
        "the request body must be JSON sent with 'Content-Type: application/json' "
        f"({declared}); with curl, add -H 'Content-Type: application/json'",
        details={"content_type": content_type[:100] if content_type else None},
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn exceptions into ``ErrorBody`` responses."""

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def on_toolwire_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ToolwireError)
        settings = request.app.state.toolwire.ready_settings()
        return api_error_for(exc, verbose=settings.expose_error_details).response()

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        content_type = request.headers.get("content-type")
        if not _declares_json(content_type) and any(
            tuple(problem.get("loc", ()))[:1] == ("body",) for problem in errors
        ):
            return _body_not_json(content_type).response()
        problems = [
            {
                "location": ".".join(str(part) for part in problem.get("loc", ())),
                "message": str(problem.get("msg", "")),
            }
            for problem in errors[:MAX_PROBLEMS_LISTED]
        ]
        summary = "; ".join(f"{p['location']}: {p['message']}" for p in problems)
        details: dict[str, Any] = {"problems": problems}
        if len(errors) > len(problems):
            details["problems_not_listed"] = len(errors) - len(problems)
            summary += f"; … and {len(errors) - len(problems)} more problem(s)"
        return ApiError(
            422, "invalid_request", f"the request body is not valid: {summary}", details=details
        ).response()

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and exc.__cause__ is not None:
            return unreadable_body(exc.__cause__).response()
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return ApiError(exc.status_code, code, str(exc.detail), headers=exc.headers).response()

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(ToolwireError, on_toolwire_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
