"""Running a :class:`~toolwire.mcp.server.DomainMcpServer`: stdio, or streamable HTTP.

Over stdio the MCP messages own stdout; toolwire's logs go to stderr as always. Over HTTP the
endpoint is ``/mcp`` on ``server.host`` (loopback by default), stateless (a conversation waiting
for a clarification lives in toolwire's session store, so any replica can take the reply) with
JSON responses, behind the same API keys as ``toolwire serve`` (``server.token_env`` and
``server.api_keys``): when any is set, every request needs ``Authorization: Bearer <token>`` of
one of them (401 otherwise).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import structlog

from toolwire.mcp.server import DomainMcpServer

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from toolwire.server.auth import ApiKey
    from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)

MCP_PATH = "/mcp"


async def serve_stdio(served: DomainMcpServer) -> None:
    """Serve over this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    log.info("mcp_serving", domain=served.domain, transport="stdio", tools=len(served.tools) + 1)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await served.server.run(
                read_stream, write_stream, served.server.create_initialization_options()
            )
    finally:
        await served.app.aclose()


def http_app(served: DomainMcpServer, settings: ServerSettings) -> ASGIApp:
    """The streamable HTTP application at ``/mcp``, behind the API keys when any is set."""
    from toolwire.server.auth import read_api_keys

    application = served.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=settings.host,
        max_request_body_size=settings.max_body_bytes,
    )
    keys = read_api_keys(settings)
    return BearerTokenGate(application, keys) if keys else application


async def serve_http(served: DomainMcpServer, settings: ServerSettings) -> None:
    """Serve over streamable HTTP until SIGINT/SIGTERM; logs ``mcp_server_listening`` with the
    URL actually bound (``port: 0`` picks a free port)."""
    import uvicorn

    from toolwire.server.run import bind_socket

    sock = bind_socket(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        http_app(served, settings),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.request_timeout_s),
    )
    log.info(
        "mcp_server_listening",
        domain=served.domain,
        host=host,
        port=port,
        url=f"http://{host}:{port}{MCP_PATH}",
        tools=len(served.tools) + 1,
    )
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
        await served.app.aclose()


class BearerTokenGate:
    """ASGI middleware: the HTTP service's token check (``toolwire.server.auth``) in front of an
    application that is not FastAPI."""

    def __init__(self, app: ASGIApp, keys: list[ApiKey]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from fastapi.security import HTTPAuthorizationCredentials
        from starlette.requests import Request

        from toolwire.server.auth import authenticate
        from toolwire.server.problems import ApiError

        header = Request(scope).headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        given = (
            HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials.strip())
            if scheme.lower() == "bearer" and credentials.strip()
            else None
        )
        try:
            authenticate(self.keys, given)
        except ApiError as error:
            log.info("mcp_unauthorized", path=scope.get("path"), reason=error.message)
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)
