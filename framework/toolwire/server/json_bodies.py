"""The routes' JSON bodies, parsed by :func:`toolwire.strict_json.loads`: a key named twice is
refused (``problems.unreadable_body`` makes the 422), not read with its last value winning.

FastAPI parses a JSON body with ``await request.json()``; the route class hands its handler a
request whose ``json()`` is the strict one. The body is still parsed once.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from toolwire import strict_json


class StrictJsonRequest(Request):
    """A request whose JSON body may not name a key twice."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_json.loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route that parses its JSON body with :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_handler
