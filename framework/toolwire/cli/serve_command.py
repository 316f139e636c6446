"""``toolwire serve``: the HTTP service (needs the ``toolwire[server]`` extra)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from toolwire.cli.state import (
    INSECURE_NO_AUTH_HELP,
    ConfigOption,
    exit_missing_extra,
    listening_on,
    load_app_or_exit,
    report_error,
    require_extra,
    warn_insecure_no_auth,
)
from toolwire.errors import ConfigError
from toolwire.hookspecs import RegisterCommand, hookimpl


@hookimpl
def register_commands(register: RegisterCommand) -> None:
    """``toolwire serve``."""
    register(serve)


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default: server.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Port to listen on, 0 for a free one (default: server.port, 8000).",
        ),
    ] = None,
    config: ConfigOption = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help=INSECURE_NO_AUTH_HELP)
    ] = False,
) -> None:
    """Serve the chatbot over HTTP: /v1/ask, /v1/domains, /v1/tools, the chat page at /,
    /healthz and /readyz, and the OpenAPI document at /openapi.json (the /docs and /redoc pages
    only with server.api_docs: true).

    The embedded model is started and warmed as the server starts (/readyz says "starting"
    until it is up), or a running 'toolwire model serve' server is used.

    Logs go to stderr, JSON lines when stderr is not a terminal (a readable console rendering
    on a terminal), one http_request event per request with its request id, a plugin_failed
    event per plugin that failed to load. Set
    the environment variable named by server.token_env (TOOLWIRE_API_TOKEN), or server.api_keys,
    to require a bearer token; without one the server listens only on a loopback address unless
    --insecure-no-auth is given.
    """
    require_extra("toolwire serve", "server")
    try:
        from toolwire.server import configure_server_logging
        from toolwire.server import serve as serve_app
    except ImportError as error:
        exit_missing_extra("toolwire serve", "server", error)

    configure_server_logging()  # before the app loads: its plugin_failed events are in this log
    toolwire_app = load_app_or_exit(ctx, config, failures_in_log=True)
    settings = listening_on(toolwire_app.config.server, host, port)
    if insecure_no_auth:
        warn_insecure_no_auth("/v1", settings.host)
    try:
        asyncio.run(serve_app(toolwire_app, settings, insecure_no_auth=insecure_no_auth))
    except ConfigError as error:
        report_error(error)
        raise typer.Exit(1) from None
