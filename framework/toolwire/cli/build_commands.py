"""Build-time commands: ``plugins``, ``tools``, ``check`` and ``graph``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text

from toolwire import catalogue
from toolwire.catalogue import ToolRecord
from toolwire.cli.commands import discover_commands
from toolwire.cli.state import (
    PIPED_WIDTH,
    ConfigOption,
    exit_if_plugins_failed,
    failed_plugins,
    load_app_or_exit,
    report_error,
    report_problems,
    table_console,
)
from toolwire.errors import PluginError, UnknownDomainError
from toolwire.hookspecs import RegisterCommand, hookimpl
from toolwire.logging import configure_logging
from toolwire.mcp.discovery import McpListing
from toolwire.plugins import PluginInfo, discover
from toolwire.printable import printable
from toolwire.registry import to_wire_name

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def plugins(json_output: JsonFlag = False) -> None:
    """List the installed plugins, their domains, and why any failed to load."""
    try:
        found = discover().plugins
    except PluginError as error:
        report_error(error)
        raise typer.Exit(1) from None
    if json_output:
        typer.echo(json.dumps([plugin_record(info) for info in found], indent=2))
        return
    table = Table("plugin", "version", "domains", "error")
    for info in found:
        table.add_row(info.name, info.version or "", ", ".join(info.domains), info.error or "")
    table_console().print(table)


def plugin_record(info: PluginInfo) -> dict[str, Any]:
    """A plugin as ``toolwire plugins --json`` prints it."""
    return {
        "name": info.name,
        "version": info.version,
        "domains": list(info.domains),
        "error": info.error,
    }


def tools(
    ctx: typer.Context,
    domain: Annotated[
        str | None, typer.Option("--domain", help="Only the tools of this domain.")
    ] = None,
    json_output: JsonFlag = False,
    config: ConfigOption = None,
) -> None:
    """List the registered tools with their prefixed names, kinds and injections; exit 1 when
    a plugin failed to load (its tools are missing)."""
    app = load_app_or_exit(ctx, config)
    if domain is not None:
        try:
            app.check_domain(domain)
        except UnknownDomainError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(1) from None
    records = [
        record
        for record in catalogue.tool_records(app)
        if domain is None or record.domain == domain
    ]
    if json_output:
        # the records GET /v1/tools serves, without the enabled flag (the table shows it)
        dumped = [record.model_dump(exclude={"enabled"}) for record in records]
        typer.echo(json.dumps(dumped, indent=2))
    else:
        print_tools(records)
    report_problems(app.mcp_problems)  # on stderr: stdout stays the listing
    exit_if_plugins_failed(app)


def print_tools(records: Sequence[ToolRecord]) -> None:
    """The tools as one table, or one block per tool where the table would cut a column."""
    console = table_console()
    table = tools_table(records)
    unbounded = console.options.update_width(PIPED_WIDTH)  # measured unclamped
    if Measurement.get(console, unbounded, table).minimum <= console.width:
        console.print(table)
    else:  # a column would be cut to "…": one block per tool, wrapped at the terminal's width
        for record in records:
            console.print(tool_block(record))


def tools_table(records: Sequence[ToolRecord]) -> Table:
    """The tools as one table, a row each (the source column only when an MCP tool is there)."""
    columns = ["plugin", "priority", "kinds", "injects", "enabled"]
    with_mcp = any(record.mcp for record in records)
    table = Table(Column("tool", no_wrap=True), *columns, *(["source"] if with_mcp else []))
    for record in records:
        row = [
            record.qualified_name,
            record.plugin,
            str(record.priority),
            ", ".join(record.kinds),
            ", ".join(record.injects),
            "yes" if record.enabled else "no",
        ]
        if with_mcp:
            row.append(mcp_source_text(record))
        table.add_row(*(Text(printable(cell)) for cell in row))
    return table


def tool_block(record: ToolRecord) -> Group:
    """One tool for a terminal too narrow for the table: its name, then the table's columns as
    indented lines, a long value wrapped under itself."""
    facts = {
        "plugin": record.plugin,
        "priority": str(record.priority),
        "kinds": ", ".join(record.kinds),
        "injects": ", ".join(record.injects),
        "enabled": "yes" if record.enabled else "no",
        "source": mcp_source_text(record),
    }
    grid = Table.grid(Column(no_wrap=True), Column(overflow="fold"), padding=(0, 2))
    for label, value in facts.items():
        if value:
            grid.add_row(Text(label, style="dim"), Text(printable(value)))
    return Group(
        Text(printable(record.qualified_name), style="bold"),
        Padding(grid, (0, 0, 0, 2), expand=False),
    )


def mcp_source_text(record: ToolRecord) -> str:
    """Where an MCP tool comes from (``mcp notes: search``); empty for any other tool."""
    return f"mcp {record.mcp.server}: {record.mcp.tool}" if record.mcp else ""


def check(
    ctx: typer.Context,
    config: ConfigOption = None,
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="Also start every declared MCP server and list the tools it offers.",
        ),
    ] = False,
) -> None:
    """Build everything once and report every problem as path:line: message; exit 1 if any.

    Declared MCP servers are checked without being started (their allow-listed tools stand in
    for what they offer) unless --connect is given.
    """
    # every warning of the build is also a reported problem: keep the output to those lines
    configure_logging(force=True, default_level="critical")
    listing = McpListing.ALL if connect else McpListing.NONE
    app = load_app_or_exit(ctx, config, mcp_listing=listing)  # says the failed plugins
    failed = {info.name for info in failed_plugins(app)}
    # a command name taken from toolwire's own: only the command line's discovery sees it
    commands_failed = [info for info in discover_commands().failed if info.name not in failed]
    report_problems([info.problem() for info in commands_failed])
    report_problems(app.mcp_problems)
    if connect:
        for server, offered in app.mcp_discovery.listed.items():
            names = ", ".join(tool.name for tool in offered) or "no tools"
            typer.echo(printable(f"mcp server {server!r} offers: {names}"))  # the server's names
    if failed or commands_failed or app.mcp_problems:
        raise typer.Exit(1)
    servers = len(app.config.mcp_servers)
    mcp = (
        f", {servers} MCP servers ({'started and listed' if connect else 'not started'})"
        if servers
        else ""
    )
    typer.echo(
        f"ok: {len(app.plugins)} plugins, {len(app.domains)} domains, "
        f"{len(app.registry)} tools{mcp} ({app.config.path or 'built-in defaults'})"
    )


def graph(
    ctx: typer.Context,
    mermaid: Annotated[bool, typer.Option("--mermaid", help="Print a Mermaid flowchart.")] = False,
    config: ConfigOption = None,
) -> None:
    """Show which tool is injected into which ("a -> b": b is injected into a); exit 1 when a
    plugin failed to load (its tools are missing)."""
    app = load_app_or_exit(ctx, config)
    edges = app.container.graph()
    typer.echo(render_mermaid(edges) if mermaid else render_text(edges))
    exit_if_plugins_failed(app)


def render_text(edges: dict[str, list[str]]) -> str:
    lines = []
    for tool, injected in edges.items():
        lines += [f"{tool} -> {target}" for target in injected] or [tool]
    return "\n".join(lines)


def render_mermaid(edges: dict[str, list[str]]) -> str:
    """Mermaid ids may not contain dots: nodes use wire names, labelled with prefixed names."""
    lines = ["flowchart LR"]
    for tool in edges:
        lines.append(f'    {to_wire_name(tool)}["{tool}"]')
    for tool, injected in edges.items():
        lines += [f"    {to_wire_name(tool)} --> {to_wire_name(target)}" for target in injected]
    return "\n".join(lines)


@hookimpl
def register_commands(register: RegisterCommand) -> None:
    """The build-time commands: ``plugins``, ``tools``, ``check``, ``graph``."""
    register(plugins)
    register(tools)
    register(check)
    register(graph)
