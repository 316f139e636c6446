"""Who calls over MCP: the name of the API key the HTTP bearer gate accepted.

The gate runs as ASGI middleware; the tool handler runs later, in the SDK's own task, and gets
the Starlette ``Request`` of the HTTP message it answers (``ServerRequestContext.request``). The
caller travels between the two in that request's ASGI scope, under the ``state`` key Starlette
reads ``request.state`` from. Over stdio there is no request, and no caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Scope

CALLER_STATE = "toolwire_caller"


def bind_caller(scope: Scope, caller: str | None) -> None:
    """Record the authenticated caller of an HTTP request in its scope."""
    scope.setdefault("state", {})[CALLER_STATE] = caller


def caller_of(request: object) -> str | None:
    """The caller recorded for a handler's request (None: stdio, or a server without keys)."""
    from starlette.requests import Request

    if not isinstance(request, Request):
        return None
    caller = request.scope.get("state", {}).get(CALLER_STATE)
    return caller if isinstance(caller, str) else None
