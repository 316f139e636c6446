"""Run the HTTP service in this process: logging, the listening socket, uvicorn.

``serve`` binds the socket itself, so ``port=0`` picks a free port, and logs one
``server_listening`` event with the address actually bound (tests and scripts read it).
"""

from __future__ import annotations

import math
import socket

import structlog
import uvicorn

from toolwire.app import App
from toolwire.logging import configure_logging
from toolwire.server.factory import create_app
from toolwire.server.progress import record_progress
from toolwire.settings import ServerSettings

log = structlog.get_logger(__name__)


def configure_server_logging() -> None:
    """JSON events at ``info`` (``TOOLWIRE_LOG_LEVEL`` overrides), with step tracking for 504s.

    Call it before ``App.load`` so every logger of the process uses this configuration.
    """
    configure_logging(force=True, default_level="info", extra_processors=[record_progress])


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve(app: App, settings: ServerSettings | None = None) -> None:
    """Serve ``app`` until SIGINT/SIGTERM, then close it (in the loop that used it)."""
    settings = settings or app.config.server
    sock = bind_socket(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        create_app(app, settings),
        log_config=None,
        access_log=False,  # RequestContextMiddleware logs http_request events with the request id
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.request_timeout_s),
    )
    server = uvicorn.Server(config)
    log.info("server_listening", host=host, port=port, url=f"http://{host}:{port}")
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        await app.aclose()
