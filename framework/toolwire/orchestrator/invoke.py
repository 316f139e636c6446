"""How a failing plugin call reads in the trace."""

from __future__ import annotations

from toolwire.errors import (
    ToolThreadsExhaustedError,
    ToolTimeoutError,
)
from toolwire.errors import describe as describe  # re-exported: callers import it from here


def failed(error: BaseException) -> str:
    """How a failing plugin call reads after its name: ``"raised RuntimeError: boom"``, or
    ``"did not finish within 5 s (…)"``."""
    if isinstance(error, ToolTimeoutError):
        return f"did not finish within {error.timeout_s:g} s (orchestrator.tool_timeout_s)"
    if isinstance(error, ToolThreadsExhaustedError):
        return f"was not run: {error}"
    return f"raised {describe(error)}"
