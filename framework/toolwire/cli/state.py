"""What the global options give every command, and building the app for a command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from toolwire.app import App
from toolwire.errors import ConfigError, PluginError, Problem
from toolwire.extras import missing_modules, needs_extra
from toolwire.mcp.discovery import McpListing
from toolwire.plugins import PluginInfo
from toolwire.printable import printable
from toolwire.settings import ServerSettings


@dataclass(frozen=True)
class CliState:
    """The global options (``toolwire --config P <command>``)."""

    config: Path | None = None


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Configuration file (overrides the global option)."),
]
"""The ``--config`` of every command that builds the app (``toolwire tools --config P``, as
well as ``toolwire --config P tools``): pass it to :func:`load_app_or_exit`."""


def config_option(ctx: typer.Context, override: Path | None = None) -> Path | None:
    """The command's own ``--config``, else the global one, else None (the default lookup)."""
    if override is not None:
        return override
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    return state.config


def load_app_or_exit(
    ctx: typer.Context,
    config: Path | None = None,
    *,
    mcp_listing: McpListing = McpListing.NEEDED,
    failures_in_log: bool = False,
) -> App:
    """Build the app; on a configuration or plugin error print it plainly and exit 1. The
    plugins that failed to load are said one line each (:func:`report_failed_plugins`), or,
    with ``failures_in_log`` (``serve``, ``mcp serve``: their logging configured first), left
    to the ``plugin_failed`` events ``App.load`` logs, a plain line being no log line."""
    try:
        app = App.load(config_option(ctx, config), mcp_listing=mcp_listing)
    except (ConfigError, PluginError) as error:
        report_error(error)
        raise typer.Exit(1) from None
    if not failures_in_log:
        report_failed_plugins(app)
    return app


def failed_plugins(app: App) -> list[PluginInfo]:
    """The plugins that failed to load, in load order."""
    return [info for info in app.plugins if info.error is not None]


def report_failed_plugins(app: App) -> None:
    """Each plugin that failed to load as one plain line on stderr (``plugin 'shop' failed to
    load: …``, at its line when known): on the command line this line says it, not a
    ``plugin_failed`` log event (``toolwire.cli`` keeps those off the terminal)."""
    report_problems([info.problem() for info in failed_plugins(app)])


def exit_if_plugins_failed(app: App) -> None:
    """Exit 1 when a plugin failed to load (``load_app_or_exit`` said which): a listing of the
    build without its contributions is not a success for a script."""
    if failed_plugins(app):
        raise typer.Exit(1)


def report_error(error: ConfigError | PluginError) -> None:
    """One line per problem on stderr, ``path:line: message`` where the location is known."""
    report_problems(error.problems if isinstance(error, ConfigError) else [str(error)])


def report_problems(problems: Sequence[Problem | str]) -> None:
    """Each problem as one plain line on stderr."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for problem in problems:
        err.print(printable(str(problem)), markup=False)  # may quote an MCP server's stderr


PIPED_WIDTH = 100_000
"""Columns a table may take when stdout is not a terminal: whole values, never cut."""


def table_console() -> Console:
    """The console tables are printed on: the terminal's width, or (piped, redirected) as wide
    as the values need, so that ``toolwire tools | grep …`` sees whole names."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=PIPED_WIDTH)
    return console


def require_extra(command: str, *extras: str) -> None:
    """Before ``command`` imports anything optional: exit 2 with one line naming the first of
    ``extras`` that is not fully installed, and its missing modules."""
    for extra in extras:
        missing = missing_modules(extra)
        if missing:
            typer.echo(needs_extra(command, extra, missing), err=True)
            raise typer.Exit(2)


def exit_missing_extra(command: str, extra: str, error: ImportError) -> NoReturn:
    """A command whose optional dependencies failed to import: say which extra, exit 2."""
    typer.echo(needs_extra(command, extra, [error.name or str(error)]), err=True)
    raise typer.Exit(2)


INSECURE_NO_AUTH_HELP = (
    "Serve without API keys on an address other hosts can reach (refused otherwise)."
)


def warn_insecure_no_auth(guarded: str, host: str) -> None:
    """Say on stderr what ``--insecure-no-auth`` leaves open."""
    typer.echo(
        f"warning: --insecure-no-auth: {guarded} on {host} answers anyone who can reach it "
        "when no API key is set",
        err=True,
    )


def listening_on(settings: ServerSettings, host: str | None, port: int | None) -> ServerSettings:
    """The server settings with the command line's ``--host`` and ``--port`` applied."""
    given = {"host": host, "port": port}
    updates = {key: value for key, value in given.items() if value is not None}
    # validated, as the configuration file is (model_copy would take a port of 70000)
    return ServerSettings.model_validate({**settings.model_dump(), **updates})
