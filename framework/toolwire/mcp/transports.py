"""Running a :class:`~toolwire.mcp.server.DomainMcpServer`: stdio, or streamable HTTP.

Over stdio the MCP messages own stdout; toolwire's logs go to stderr as always. Over HTTP the
endpoint is ``/mcp`` on ``server.host`` (loopback by default), stateless (a conversation waiting
for a clarification lives in toolwire's session store, so any replica can take the reply) with
JSON responses, run by the HTTP service's own code (``toolwire.server``): the same API keys
(``server.token_env`` and ``server.api_keys``; when any is set every request needs
``Authorization: Bearer <token>`` of one of them, 401 otherwise, and a conversation belongs to
the key that started it), the same refusal to listen on a non-loopback address without a key,
and the same bounds on what one client can hold (head and body deadlines, idle timeout,
connection limit, body size). ``/healthz`` and ``/readyz`` answer ``GET`` and ``HEAD`` outside
the token check, for load balancers and orchestrators (:class:`HealthEndpoints`). On loopback the
SDK's DNS-rebinding protection accepts only loopback ``Host`` values and those of
``server.mcp_allowed_hosts``; its refusal is toolwire's JSON error (:class:`HostRefusals`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from toolwire.mcp.callers import bind_caller
from toolwire.mcp.server import DomainMcpServer
from toolwire.mcp.unique_keys import UniqueKeyBodies, unique_key_stdio

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from toolwire.server.auth import ApiKey
    from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATHS = ("/healthz", "/readyz")
"""Served outside the bearer gate, for exactly these paths."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The ``server.host`` values on which the SDK turns its DNS-rebinding protection on."""


async def serve_stdio(served: DomainMcpServer) -> None:
    """Serve over this process's stdin and stdout until the client closes them; a message that
    names a key twice is refused (:mod:`toolwire.mcp.unique_keys`)."""
    log.info("mcp_serving", domain=served.domain, transport="stdio", tools=len(served.tools) + 1)
    try:
        async with unique_key_stdio() as (read_stream, write_stream):
            await served.server.run(
                read_stream, write_stream, served.server.create_initialization_options()
            )
    finally:
        await served.app.aclose()


def http_app(served: DomainMcpServer, settings: ServerSettings, keys: list[ApiKey]) -> ASGIApp:
    """The streamable HTTP application at ``/mcp``: behind the API keys when any is given, then
    the HTTP service's request ids and access log, body size limit and body deadline, and the
    refusal of a body that names a key twice (:mod:`toolwire.mcp.unique_keys`); ``/healthz``
    and ``/readyz`` in front of the keys."""
    from toolwire.server.middleware import BodyLimitMiddleware, RequestContextMiddleware

    application = served.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(settings),
        host=settings.host,
    )
    bounded = NoEventStream(
        BodyLimitMiddleware(
            UniqueKeyBodies(HostRefusals(application)),
            limit=lambda: settings.max_body_bytes,
            timeout=lambda: settings.body_timeout_s,
        )
    )
    gated = BearerTokenGate(bounded, keys) if keys else bounded
    return RequestContextMiddleware(HealthEndpoints(gated, served, settings))


def _origins_of(host: str) -> list[str]:
    """The ``Origin`` values of an allowed ``Host``: ``http://`` and ``https://`` of it, and of
    its bare name for a ``name:*`` entry (a browser on the scheme's default port sends no
    port, which the SDK's ``:*`` does not match)."""
    forms = [host, host.removesuffix(":*")] if host.endswith(":*") else [host]
    return [f"{scheme}://{form}" for form in forms for scheme in ("http", "https")]


def transport_security(settings: ServerSettings) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding protection: on a loopback ``server.host`` the SDK's own loopback
    ``Host`` and ``Origin`` values, and ``server.mcp_allowed_hosts`` with their origins; None
    (the SDK's choice: no check) on another address."""
    from mcp.server.transport_security import TransportSecuritySettings

    if settings.host not in LOOPBACK_HOSTS:
        return None
    extra = settings.mcp_allowed_hosts
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", *extra],
        allowed_origins=[
            "http://127.0.0.1:*",
            "http://localhost:*",
            "http://[::1]:*",
            *(origin for host in extra for origin in _origins_of(host)),
        ],
    )


async def serve_http(
    served: DomainMcpServer, settings: ServerSettings, *, insecure_no_auth: bool = False
) -> None:
    """Serve over streamable HTTP until SIGINT/SIGTERM; logs ``mcp_server_listening`` with the
    URL actually bound (``port: 0`` picks a free port). Without an API key, an address other
    hosts can reach is refused (``ConfigError``) unless ``insecure_no_auth``."""
    from toolwire.server.auth import read_api_keys
    from toolwire.server.run import serve_asgi

    keys = read_api_keys(settings)
    await serve_asgi(
        http_app(served, settings, keys),
        served.app,
        settings,
        guarded=MCP_PATH,
        has_keys=bool(keys),
        insecure_no_auth=insecure_no_auth,
        listening_event="mcp_server_listening",
        path=MCP_PATH,
        domain=served.domain,
        tools=len(served.tools) + 1,
        api_keys=[key.name for key in keys],
    )


class NoEventStream:
    """ASGI middleware: ``GET /mcp`` (a client asking for a stream of server-initiated messages)
    is answered with 405 and ``Allow: POST`` at once, as the MCP specification lets a server
    that offers no such stream answer. The endpoint is stateless: no session, so no message of
    the server's own could ever be sent on that stream, and the SDK kept it open with pings
    alone, each such client holding a connection (of ``server.max_connections``) for good."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        from toolwire.server.problems import ApiError

        log.info("mcp_event_stream_refused", path=scope.get("path"))
        refusal = ApiError(
            405,
            "method_not_allowed",
            f"this MCP endpoint is stateless and sends no messages of its own, so it offers no "
            f"event stream to GET; send each JSON-RPC message with POST {MCP_PATH}",
            headers={"Allow": "POST", "Connection": "close"},  # its slot is free at once
        )
        await refusal.response()(scope, receive, send)


class BearerTokenGate:
    """ASGI middleware: the HTTP service's token check (``toolwire.server.auth``) in front of an
    application that is not FastAPI; the accepted key's name is the request's caller, recorded in
    its scope for the tool handler (:mod:`toolwire.mcp.callers`)."""

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
            caller = authenticate(self.keys, given)
        except ApiError as error:
            log.info("mcp_unauthorized", path=scope.get("path"), reason=error.message)
            await error.response()(scope, receive, send)
            return
        bind_caller(scope, caller)
        await self.app(scope, receive, send)


class HealthEndpoints:
    """ASGI middleware: ``/healthz`` (the process serves) and ``/readyz`` (the session store
    answers, as ``toolwire serve``'s readiness checks it) for ``GET`` and ``HEAD``, in front of
    the bearer gate and the refusal of ``GET``, so that a load balancer or an orchestrator can
    probe them without a token; exactly these two paths, every other goes on to the gate."""

    def __init__(self, app: ASGIApp, served: DomainMcpServer, settings: ServerSettings) -> None:
        self.app = app
        self.served = served
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in HEALTH_PATHS:
            await self.app(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        from toolwire.server.factory import session_store_health
        from toolwire.server.problems import ApiError
        from toolwire.server.schemas import Health

        if scope["method"] not in ("GET", "HEAD"):
            refusal = ApiError(
                405,
                "method_not_allowed",
                f"{scope['path']} answers GET and HEAD",
                headers={"Allow": "GET, HEAD"},
            )
            await refusal.response()(scope, receive, send)
            return
        status, health = 200, Health(status="ok")
        if scope["path"] == "/readyz":
            verbose = self.settings.expose_error_details
            status, health = await session_store_health(self.served.app, verbose=verbose)
        await JSONResponse(health.model_dump(), status_code=status)(scope, receive, send)


class HostRefusals:
    """ASGI middleware around the SDK's application: its refusal of a ``Host`` its DNS-rebinding
    protection does not accept (421, a bare ``Invalid Host header``) becomes toolwire's JSON
    error naming the ``Host`` and ``server.mcp_allowed_hosts``, logged as
    ``mcp_host_refused``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = False

        async def rewritten(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 421:
                refused = True
                return
            if not refused:
                await send(message)
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await _host_refusal(scope)(scope, receive, send)

        await self.app(scope, receive, rewritten)


def _host_refusal(scope: Scope) -> ASGIApp:
    from starlette.datastructures import Headers

    from toolwire.server.problems import ApiError

    host = Headers(scope=scope).get("host", "")[:200]
    log.info("mcp_host_refused", host=host, path=scope.get("path"))
    return ApiError(
        421,
        "misdirected_request",
        f"this MCP server does not answer to the Host {host!r} (DNS-rebinding protection on "
        f"its loopback address): a proxy in front of it that keeps the client's Host header "
        "needs that host in server.mcp_allowed_hosts, or it sends a Host of 127.0.0.1:<port>",
        details={"host": host},
    ).response()
