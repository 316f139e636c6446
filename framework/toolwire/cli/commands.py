"""Finding the ``toolwire`` subcommands: toolwire's own, then the installed plugins'.

Every command arrives through the ``register_commands`` hook; toolwire's own come from the
modules in :data:`COMMAND_MODULES`, loaded first like built-in plugins.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.plugins import PluginSet, discover

COMMAND_MODULES = (
    "toolwire.cli.build_commands",
    "toolwire.cli.ask_commands",
    "toolwire.cli.serve_command",
    "toolwire.cli.mcp_commands",
    "toolwire.cli.model_commands",
)
"""toolwire's own commands: plugins of the ``register_commands`` hook, loaded before any other."""


def discover_commands(
    plugins: Sequence[object] = (), *, load_entry_points: bool = True
) -> PluginSet:
    """The commands the built-in modules and the plugins register (``PluginSet.commands``), and
    the plugins whose registration failed (a taken or badly formed name). A failure is not
    logged here: the command line finds its commands before a command configures its logging,
    and the command says each failure (``toolwire.cli.state.load_app_or_exit``)."""
    return discover(
        plugins,
        load_entry_points=load_entry_points,
        builtins=COMMAND_MODULES,
        hooks=("register_commands",),
        log_failures=False,
    )
