"""Calling plugin code that may be plain or ``async``; calling the model with bounded retries."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from toolwire.errors import ModelError

T = TypeVar("T")

log = structlog.get_logger(__name__)


async def call_plugin(method: Callable[..., Any], *args: Any) -> Any:
    """Await an ``async`` method; run a plain one in a worker thread (it may block)."""
    if inspect.iscoroutinefunction(method):
        return await method(*args)
    result = await asyncio.to_thread(method, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def call_model(
    purpose: str,
    attempts: int,
    call: Callable[[], Awaitable[T | None]],
    is_valid: Callable[[T], bool] = lambda _: True,
) -> T:
    """Make a model call up to ``attempts`` times; ``ModelError`` when every attempt failed.

    An attempt fails when the model raises ``ModelError`` or returns None or invalid output.
    """
    problem = "no attempt made"
    for attempt in range(1, attempts + 1):
        try:
            result = await call()
        except ModelError as error:
            problem = error.detail
        else:
            if result is not None and is_valid(result):
                return result
            problem = "the model returned invalid output"
        log.warning("model_call_failed", purpose=purpose, attempt=attempt, problem=problem)
    raise ModelError(purpose, f"{problem} (after {attempts} attempt(s))")


def describe(error: BaseException) -> str:
    """``"RuntimeError: boom"``: how an exception appears in the trace."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
