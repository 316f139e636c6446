"""The ``toolwire`` command line: one typer app; each command module adds its commands.

Command modules expose ``register(app: typer.Typer) -> None``; they import heavy optional
dependencies (FastAPI for ``serve``) only when their command runs.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer

from toolwire.cli.state import CliState
from toolwire.logging import configure_logging

COMMAND_MODULES = (
    "toolwire.cli.build_commands",
    "toolwire.cli.ask_commands",
    "toolwire.cli.serve_command",
    "toolwire.cli.mcp_commands",
)

app = typer.Typer(
    name="toolwire",
    help="Build domain chatbots out of tools: ask, chat, serve, and inspect plugins and tools.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Configuration file (default: $TOOLWIRE_CONFIG, then ./config/toolwire.yaml).",
        ),
    ] = None,
) -> None:
    configure_logging()
    ctx.obj = CliState(config=config)


def _register_commands() -> None:
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(app)


_register_commands()


def main() -> None:
    """The ``toolwire`` console script."""
    app()


__all__ = ["app", "main"]
