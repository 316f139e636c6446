"""Calling the model with bounded attempts: what every step that asks the model shares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from toolwire.errors import ModelError, TimeBudgetSpentError

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
