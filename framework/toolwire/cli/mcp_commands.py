"""``toolwire mcp serve``: a domain as an MCP server (needs the ``toolwire[mcp]`` extra)."""

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
    report_problems,
    require_extra,
    warn_insecure_no_auth,
)
from toolwire.errors import ConfigError, PluginError, UnknownDomainError
from toolwire.hookspecs import RegisterCommand, hookimpl
from toolwire.logging import configure_logging

mcp_app = typer.Typer(
    name="mcp",
    help="The Model Context Protocol: serve a domain to MCP clients (docs/mcp.md).",
    no_args_is_help=True,
)


@hookimpl
def register_commands(register: RegisterCommand) -> None:
    """``toolwire mcp ...``."""
    register(mcp_app)


@mcp_app.command("serve")
def serve(
    ctx: typer.Context,
    domain: Annotated[
        str | None, typer.Option(help="The domain to serve (default: default_domain).")
    ] = None,
    http: Annotated[
        bool, typer.Option("--http", help="Streamable HTTP at /mcp instead of stdio.")
    ] = False,
    host: Annotated[
        str | None, typer.Option(help="With --http: address (default: server.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="With --http: port, 0 for a free one (default: server.port)."
        ),
    ] = None,
    config: ConfigOption = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help=f"With --http: {INSECURE_NO_AUTH_HELP}")
    ] = False,
) -> None:
    """Serve a domain over MCP: its tools as MCP tools, and <domain>.ask for the whole chatbot.

    By default over stdio (for a desktop assistant or an IDE to start); with --http over
    streamable HTTP, with toolwire serve's rules: the same API keys (server.token_env,
    api_keys), only a loopback address without one unless --insecure-no-auth is given, and the
    same limits on slow or numerous clients.
    """
    # the SDK is imported only once a server is built: without this check, a traceback there
    require_extra("toolwire mcp serve", "mcp")
    try:
        from toolwire.mcp.server import DomainMcpServer
        from toolwire.mcp.transports import MCP_PATH, serve_http, serve_stdio
    except ImportError as error:
        exit_missing_extra("toolwire mcp serve", "mcp", error)
    from toolwire.request_progress import record_progress

    # the steps logged are tracked, so that a <domain>.ask past server.request_timeout_s names
    # its last one (over stdio, at warning, only with TOOLWIRE_LOG_LEVEL=info); configured
    # before the app loads, so that each plugin that failed to load is a plugin_failed event
    configure_logging(
        force=True,
        default_level="info" if http else "warning",
        extra_processors=[record_progress],
    )
    app = load_app_or_exit(ctx, config, failures_in_log=True)
    try:
        served = DomainMcpServer(app, domain)
    except (ConfigError, PluginError) as error:
        report_error(error)
        raise typer.Exit(1) from None
    except UnknownDomainError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    report_problems(app.mcp_problems)
    if not http:
        asyncio.run(serve_stdio(served))
        return
    settings = listening_on(app.config.server, host, port)
    if insecure_no_auth:
        warn_insecure_no_auth(MCP_PATH, settings.host)
    try:
        asyncio.run(serve_http(served, settings, insecure_no_auth=insecure_no_auth))
    except ConfigError as error:  # an API key whose variable is missing or empty; exposure
        report_error(error)
        raise typer.Exit(1) from None
