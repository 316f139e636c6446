"""The ``toolwire`` command line: one typer app, its commands registered through plugins.

Every command arrives through the ``register_commands`` hook: toolwire's own (``ask``, ``chat``,
``serve``, ``plugins``, ``tools``, ``check``, ``graph``, ``mcp``) from the modules in
:data:`COMMAND_MODULES`, loaded first like built-in plugins, then each installed plugin's. Command
modules import heavy optional dependencies (FastAPI for ``serve``) only when their command runs.
A command that needs the app takes the shared ``--config`` option (:data:`ConfigOption`) and builds
the app with :func:`load_app_or_exit`, which says each plugin that failed to load as a plain line
(``serve`` and ``mcp serve``: as a ``plugin_failed`` event of their log).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import structlog
import typer

from toolwire.cli.commands import COMMAND_MODULES, discover_commands
from toolwire.cli.state import CliState, ConfigOption, load_app_or_exit
from toolwire.errors import PluginError
from toolwire.logging import configure_logging
from toolwire.plugins import CommandRegistration

log = structlog.get_logger(__name__)


def _options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Configuration file (default: $TOOLWIRE_CONFIG, then ./config/toolwire.yaml).",
        ),
    ] = None,
) -> None:
    _configure_logging()
    ctx.obj = CliState(config=config)


def _configure_logging() -> None:
    """toolwire's logging (unless the host configured its own), without ``plugin_failed``
    events: the interactive commands say a failed plugin as a plain line instead."""
    configure_logging(extra_processors=[_said_by_the_command])


def _said_by_the_command(
    logger: object, method_name: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Drop ``plugin_failed`` (logged by ``App.load``; finding the commands logs none): the
    command that builds the app says each failed plugin in a plain line (``load_app_or_exit``,
    ``toolwire check``'s problems, ``toolwire plugins``), not a log line beside it. ``serve``
    and ``mcp serve`` configure their own logging, without this processor, before they load the
    app: their log keeps the event, redacted like every other."""
    if event.get("event") == "plugin_failed":
        raise structlog.DropEvent
    return event


def build_cli(plugins: Sequence[object] = (), *, load_entry_points: bool = True) -> typer.Typer:
    """The ``toolwire`` app with toolwire's commands and those the plugins register: installed
    ones (``TOOLWIRE_PLUGINS`` limits them) and the plugin objects passed in. A plugin whose
    registration fails (a taken or badly formed name) contributes no command; ``toolwire check``
    reports it. A plugin that stops every plugin from loading (a misspelt hook) leaves only
    toolwire's own commands, which report it."""
    _configure_logging()
    cli = typer.Typer(
        name="toolwire",
        help="Build domain chatbots out of tools: ask, chat, serve, and inspect plugins and tools.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    cli.callback()(_options)
    try:
        found = discover_commands(plugins, load_entry_points=load_entry_points)
    except PluginError as error:
        # No plugin can load (a misspelt or malformed hook): toolwire's own commands still
        # run, and building the app in them reports the error as path:line: message.
        log.warning("plugin_commands_left_out", problem=str(error))
        found = discover_commands(load_entry_points=False)
    for command in found.commands.values():
        _add_command(cli, command)
    return cli


def _add_command(cli: typer.Typer, command: CommandRegistration) -> None:
    if isinstance(command.value, typer.Typer):
        cli.add_typer(command.value, name=command.name)
    else:
        cli.command(command.name)(command.value)


app = build_cli()
"""The ``toolwire`` app with the installed plugins' commands, built at import."""


def main() -> None:
    """The ``toolwire`` console script."""
    app()


__all__ = ["COMMAND_MODULES", "ConfigOption", "app", "build_cli", "load_app_or_exit", "main"]
