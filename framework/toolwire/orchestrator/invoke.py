"""Calling the model with bounded retries; how a failing plugin call reads in the trace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from toolwire.errors import (
    ModelError,
    TimeBudgetSpentError,
    ToolThreadsExhaustedError,
    ToolTimeoutError,
)
from toolwire.errors import describe as describe  # re-exported: callers import it from here

T = TypeVar("T")

log = structlog.get_logger(__name__)


async def call_model(
    purpose: str,
    attempts: int,
    call: Callable[[], Awaitable[T | None]],
    is_valid: Callable[[T], bool] = lambda _: True,
) -> T:
    """Make a model call up to ``attempts`` times; ``ModelError`` when every attempt failed.

    An attempt fails when the model raises ``ModelError`` or returns None or invalid output; a
    spent time budget ends the attempts at once (it is raised as it is).
    """
    problem = "no attempt made"
    for attempt in range(1, attempts + 1):
        try:
            result = await call()
        except TimeBudgetSpentError:
            raise
        except ModelError as error:
            problem = error.detail
        else:
            if result is not None and is_valid(result):
                return result
            problem = "the model returned invalid output"
        log.warning("model_call_failed", purpose=purpose, attempt=attempt, problem=problem)
    raise ModelError(purpose, f"{problem} (after {attempts} attempt(s))")


def failed(error: BaseException) -> str:
    """How a failing plugin call reads after its name: ``"raised RuntimeError: boom"``, or
    ``"did not finish within 5 s (…)"``."""
    if isinstance(error, ToolTimeoutError):
        return f"did not finish within {error.timeout_s:g} s (orchestrator.tool_timeout_s)"
    if isinstance(error, ToolThreadsExhaustedError):
        return f"was not run: {error}"
    return f"raised {describe(error)}"
