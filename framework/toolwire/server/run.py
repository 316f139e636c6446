"""Run the HTTP service in this process: logging, the listening socket, uvicorn.

``serve_asgi`` runs any of toolwire's HTTP applications (``toolwire serve``'s API, ``toolwire mcp
serve --http``'s endpoint): it binds the socket itself, so ``port=0`` picks a free port, and logs
one event with the address actually bound (tests and scripts read it). It refuses an address
other hosts can reach when no API key is set, and bounds what one client can hold: a deadline and
a size limit for the request head (``toolwire.server.connections``; 431 beyond the size), an idle
timeout between requests, and a limit on open connections (503 beyond it). The body's deadline is
the application's (``toolwire.server.middleware.BodyLimitMiddleware``).
"""

from __future__ import annotations

import errno
import ipaddress
import math
import socket

import structlog
import uvicorn
from starlette.types import ASGIApp

from toolwire.app import App
from toolwire.errors import ConfigError
from toolwire.logging import configure_logging
from toolwire.request_progress import record_progress
from toolwire.server.auth import read_api_keys
from toolwire.server.connections import h11_event_limit, protocol_class
from toolwire.server.factory import create_app
from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)


def configure_server_logging() -> None:
    """Events at ``info`` (``TOOLWIRE_LOG_LEVEL`` overrides), with step tracking for 504s: JSON
    lines when stderr is not a terminal, a readable console rendering on a terminal.

    Call it before ``App.load`` so every logger of the process uses this configuration.
    """
    configure_logging(force=True, default_level="info", extra_processors=[record_progress])


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; one that cannot be had (the port taken by another
    process, a port below 1024 without the right, an address not of this machine, a port out
    of range) is a ``ConfigError`` of one line naming the address and the option that chooses
    it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except (OSError, OverflowError) as error:
        sock.close()
        raise ConfigError(_bind_refusal(host, port, error)) from None
    sock.setblocking(False)
    return sock


def _bind_refusal(host: str, port: int, error: OSError | OverflowError) -> str:
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(error, OverflowError):
        return (
            f"cannot listen on {where}: port {port} is not between 0 and 65535; choose another "
            "with --port (server.port)"
        )
    if error.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: port {port} is already in use by another process; stop "
            "it, or choose another port with --port (server.port; --port 0 picks a free one)"
        )
    if error.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: this user may not use port {port} (ports below 1024 "
            "need privileges); choose another port with --port (server.port)"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine; choose "
            "another with --host (server.host)"
        )
    reason = error.strerror or type(error).__name__
    return f"cannot listen on {where}: {reason}; check --host and --port (server.host, server.port)"


async def serve(
    app: App,
    settings: ServerSettings | None = None,
    *,
    insecure_no_auth: bool = False,
    start_model: bool = True,
) -> None:
    """Serve ``app``'s API until SIGINT/SIGTERM, then close it (in the loop that used it).

    Refuses (``ConfigError``) to serve without an API key on an address that is not loopback,
    unless ``insecure_no_auth`` (``toolwire serve --insecure-no-auth``) says that is wanted.
    ``start_model``: start and warm the model as the server starts (``create_app``), not at the
    first question.
    """
    settings = settings or app.config.server
    api_keys = read_api_keys(settings)
    await serve_asgi(
        create_app(app, settings, api_keys=api_keys, start_model=start_model),
        app,
        settings,
        guarded="/v1",
        has_keys=bool(api_keys),
        insecure_no_auth=insecure_no_auth,
        listening_event="server_listening",
    )


async def serve_asgi(
    asgi: ASGIApp,
    app: App,
    settings: ServerSettings,
    *,
    guarded: str,
    has_keys: bool,
    insecure_no_auth: bool,
    listening_event: str,
    path: str = "",
    **event_fields: object,
) -> None:
    """Run ``asgi`` on ``settings``' address until SIGINT/SIGTERM; close ``app`` afterwards.

    ``guarded`` names what the API keys protect (``/v1``, ``/mcp``) in the refusal of
    :func:`check_exposure`, which closes the socket and ``app`` before raising. Once listening,
    logs ``listening_event`` with the host, port and URL (``path`` appended) actually bound, and
    ``event_fields``.
    """
    try:
        sock = bind_socket(settings.host, settings.port)
    except ConfigError:
        await app.aclose()
        raise
    host, port = sock.getsockname()[:2]
    try:
        check_exposure(
            host, settings, guarded=guarded, has_keys=has_keys, insecure_no_auth=insecure_no_auth
        )
        server = uvicorn.Server(uvicorn_config(asgi, settings))
        url = f"http://{host}:{port}{path}"
        log.info(listening_event, host=host, port=port, url=url, **event_fields)
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        await app.aclose()


def uvicorn_config(asgi: ASGIApp, settings: ServerSettings) -> uvicorn.Config:
    """uvicorn with toolwire's bounds on what one client can hold (``server.*`` settings)."""
    return uvicorn.Config(
        asgi,
        log_config=None,
        access_log=False,  # RequestContextMiddleware logs http_request events with the request id
        lifespan="on",
        http=protocol_class(settings.header_timeout_s, settings.max_header_bytes),
        h11_max_incomplete_event_size=h11_event_limit(settings.max_header_bytes),
        timeout_keep_alive=settings.keep_alive_s,
        # uvicorn answers 503 once the count (the new connection included) reaches its limit
        limit_concurrency=settings.max_connections + 1,
        timeout_graceful_shutdown=math.ceil(settings.request_timeout_s),
    )


def check_exposure(
    host: str, settings: ServerSettings, *, guarded: str, has_keys: bool, insecure_no_auth: bool
) -> None:
    """No API key on an address other hosts can reach: refuse, unless explicitly wanted."""
    if has_keys or ipaddress.ip_address(host).is_loopback:
        return
    if not insecure_no_auth:
        raise ConfigError(
            f"refusing to serve {guarded} without authentication on {host}, an address other "
            f"hosts can reach: set {settings.token_env} (server.token_env) or server.api_keys "
            "to require a bearer token, listen on 127.0.0.1 (--host), or pass "
            "--insecure-no-auth if the network in front of this server authenticates callers"
        )
    log.warning("serving_without_authentication", host=host, path=guarded)
