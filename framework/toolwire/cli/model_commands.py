"""``toolwire model serve|status|stop``: keep the embedded model running between commands.

``serve`` leaves the embedded model's server running after it ends and records it in the model
cache directory; ``toolwire ask``, ``chat``, ``serve`` and ``mcp serve`` with the same model,
window and threads then use it instead of starting their own (:mod:`toolwire.llm.served_model`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console

from toolwire.cli.live import LiveView
from toolwire.cli.state import ConfigOption, config_option, load_app_or_exit, report_error
from toolwire.cli.text import literal
from toolwire.errors import ConfigError, ModelError, PluginError, ToolwireError
from toolwire.events import observing
from toolwire.hookspecs import RegisterCommand, hookimpl
from toolwire.mcp.discovery import McpListing
from toolwire.printable import printable

if TYPE_CHECKING:
    from toolwire.llm.served_model import Lookup, ServedModel

model_app = typer.Typer(
    name="model",
    help="Keep the embedded model running between commands: serve, status, stop (docs/models.md).",
    no_args_is_help=True,
)

NOT_RUNNING = "no model server is running (toolwire model serve starts one)"
BUSY = (
    "no model server is running yet: another toolwire model command is starting or stopping "
    "one (it holds {lock}); wait for it to finish, then run: toolwire model status"
)


@hookimpl
def register_commands(register: RegisterCommand) -> None:
    """``toolwire model ...``."""
    register(model_app)


@model_app.command("serve")
def serve(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Start the embedded model's server and leave it running after this command ends.

    It is started with the configuration's llm.local_model, the model profile's context window
    and llm.local_threads, and warmed up (its weights loaded, toolwire's fixed text read into its
    cache). toolwire ask, chat, serve and mcp serve with the same model, window and threads use
    it instead of starting their own. 'toolwire model stop' stops it.
    """
    from toolwire.llm.factory import provider_name, resolve_settings
    from toolwire.llm.model_service import detached_server
    from toolwire.llm.providers import EMBEDDED
    from toolwire.llm.served_model import look_up, model_server_lock

    app = load_app_or_exit(ctx, config, mcp_listing=McpListing.NONE)
    settings = resolve_settings(app.config.llm)
    provider = provider_name(settings, os.environ)
    if provider != EMBEDDED:
        _exit_with(
            f"toolwire model serve serves the embedded model, and this configuration uses the "
            f"{provider!r} model provider (llm.provider, TOOLWIRE_LLM_BASE_URL or an API key): "
            "nothing to serve"
        )
    with _failures_said():
        server = detached_server(settings, app.model_profile.context_window_tokens)
        server.check_installed()
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    with _failures_said(), model_server_lock(server.directory):
        found = look_up(server.directory, holding_lock=True)
        if found.removed:
            err.print(f"[dim]a stale record was removed: {literal(found.removed)}[/dim]")
        if found.unreadable:
            err.print(f"[dim]a record cannot be read: {literal(found.unreadable)}[/dim]")
        running = found.running
        if running is not None:
            if not server.matches(running):
                _exit_with(
                    f"a model server with other settings is running ({running.settings_text()}"
                    f"; pid {running.pid}), and this configuration asks for "
                    f"{server.settings_text()}: stop it first with: toolwire model stop"
                )
            if not running.answers():
                _exit_with(
                    f"the embedded model {running.model} is running (pid {running.pid}, up "
                    f"{running.uptime()}), not answering yet: {_not_answering(running)}; "
                    "toolwire model status says when it answers, toolwire model stop stops it"
                )
            out.print(
                f"the embedded model {running.model} is already running at "
                f"{running.base_url} (pid {running.pid}, up {running.uptime()}); "
                "toolwire model stop stops it",
                markup=False,
            )
            return
        err.print(
            f"[dim]starting the embedded model ({literal(server.settings_text())}); it keeps "
            "running after this command[/dim]"
        )
        view = LiveView(out, err, stream_text=False)
        with view, observing(view.show):
            record = asyncio.run(server.serve())
    out.print(
        f"the embedded model {record.model} is running at {record.base_url} (pid {record.pid}): "
        "toolwire ask, chat, serve and mcp serve with this configuration use it; "
        "toolwire model stop stops it",
        markup=False,
    )


@model_app.command("status")
def status(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Say whether a 'toolwire model serve' server is running.

    Prints its address, model, pid and uptime, and whether this configuration uses it. Exits 0
    when one runs (answering or not: one that does not answer yet is said so), 1 when none does
    (a stale record is removed; another toolwire model command starting or stopping one is
    said so).
    """
    from toolwire.llm.local import model_cache_dir
    from toolwire.llm.served_model import LOCK_FILE, lock_held, log_path, look_up, settings_text

    directory = model_cache_dir()
    found = look_up(directory)
    out = Console(highlight=False, soft_wrap=True)
    running = found.running
    if running is None:
        if lock_held(directory):
            out.print(BUSY.format(lock=directory / LOCK_FILE), markup=False)
        else:
            out.print(_nothing_running(found), markup=False)
        raise typer.Exit(1)
    answering = running.answers()
    state = "running" if answering else "running, not answering yet"
    out.print(
        f"{state}: the embedded model {running.model} at {running.base_url}, pid {running.pid}, "
        f"up {running.uptime()} ({running.settings_text()}; log: {log_path(directory)})",
        markup=False,
    )
    if not answering:
        out.print(f"{_not_answering(running)}; toolwire model stop stops it", markup=False)
    wanted = _configured(ctx, config)
    if wanted is not None and not running.matches(*wanted):
        out.print(
            f"this configuration does not use it: it asks for {settings_text(*wanted)} (toolwire "
            "model stop, then toolwire model serve, serves that)",
            markup=False,
        )


@model_app.command("stop")
def stop() -> None:
    """Stop the 'toolwire model serve' server and remove its record (nothing running: says so)."""
    from toolwire.llm.local import model_cache_dir
    from toolwire.llm.model_service import stop_served
    from toolwire.llm.served_model import look_up, model_server_lock

    directory = model_cache_dir()
    out = Console(highlight=False, soft_wrap=True)
    with _failures_said(), model_server_lock(directory):
        found = look_up(directory, holding_lock=True, to_stop=True)
        running = found.running
        if running is None:
            out.print(_nothing_running(found), markup=False)
            return
        stop_served(running, directory)
    out.print(
        f"stopped the embedded model {running.model} (pid {running.pid}, up {running.uptime()})",
        markup=False,
    )


def _nothing_running(found: Lookup) -> str:
    """That no server runs, and what became of a record that said otherwise."""
    if found.removed:
        return f"{NOT_RUNNING}; a stale record was removed: {found.removed}"
    if found.unreadable:
        return f"{NOT_RUNNING}; a record cannot be read (left as it is): {found.unreadable}"
    return NOT_RUNNING


def _not_answering(running: ServedModel) -> str:
    """Why a server that runs is not used."""
    from toolwire.llm.served_model import HEALTH_TIMEOUT_S

    return (
        f"it did not answer on {running.health_url} within {HEALTH_TIMEOUT_S:g} s (it may still "
        "be loading the model, or the machine is busy), and no command uses it until it does"
    )


def _configured(ctx: typer.Context, config: Path | None) -> tuple[str, int, int | None] | None:
    """The model, window and threads of the embedded server this configuration would start,
    as ``ServedModel.matches`` takes them (None: it uses another provider, or cannot be loaded:
    said in one line on stderr, as ``status`` reports the running server all the same)."""
    from toolwire.app import App
    from toolwire.llm.factory import provider_name, resolve_settings
    from toolwire.llm.providers import EMBEDDED

    try:
        app = App.load(config_option(ctx, config), mcp_listing=McpListing.NONE)
        settings = resolve_settings(app.config.llm)
        if provider_name(settings, os.environ) != EMBEDDED:
            return None
        window = app.model_profile.context_window_tokens
    except (ConfigError, PluginError) as error:
        problems = "; ".join(str(error).splitlines())
        _say(f"cannot tell whether this configuration uses it: {problems}")
        return None
    return settings.local_model, window, settings.local_threads


@contextmanager
def _failures_said() -> Iterator[None]:
    """A failure of the block as one line and exit 1: a configuration problem (the model's
    parts) as toolwire ask says it, a failed start or stop with what failed."""
    try:
        yield
    except (ConfigError, PluginError) as error:
        report_error(error)
        raise typer.Exit(1) from None
    except (ToolwireError, OSError) as error:
        _exit_with(_reason(error))


def _reason(error: ToolwireError | OSError) -> str:
    """What failed: a model error's own text (it names the server and what it wrote)."""
    return error.detail if isinstance(error, ModelError) else str(error)


def _say(message: str) -> None:
    """One plain line on stderr."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(printable(message), markup=False)


def _exit_with(message: str) -> NoReturn:
    """One plain line on stderr, exit 1."""
    _say(message)
    raise typer.Exit(1)
