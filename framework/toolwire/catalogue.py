"""What an app is made of, described once for every front end.

``toolwire tools --json`` and the HTTP service's ``GET /v1/tools`` both describe the registered
tools; they call :func:`tool_records` so the two can never disagree on a field's meaning.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire.app import App
from toolwire.mcp.tool import McpTool
from toolwire.registry import ToolRegistration
from toolwire.tools import tool_kinds


class McpSource(BaseModel):
    """Where an MCP-backed tool comes from."""

    server: str = Field(description="The name of its mcp_servers: declaration.")
    tool: str = Field(description="The tool's own name on the MCP server.")
    transport: str = Field(description="stdio (a command) or http (a URL).")
    target: str = Field(description="The command line or the URL.")


class ToolRecord(BaseModel):
    """One registered tool (field order is the order ``toolwire tools --json`` prints)."""

    name: str = Field(description="The short name, e.g. 'substance_lookup'.")
    qualified_name: str = Field(description="The domain-prefixed name, e.g. 'pharma.lookup'.")
    domain: str
    priority: int
    plugin: str = Field(description="The plugin that declared it; 'config' for the app's YAML.")
    kinds: list[str] = Field(description="activated, coordinator, context_consumer, ...")
    injects: list[str] = Field(description="Prefixed names of the tools injected into it.")
    mcp: McpSource | None = Field(
        default=None, description="For a tool of an external MCP server: which server and tool."
    )
    enabled: bool = Field(description="Disabled tools are registered but never built or run.")


def tool_records(app: App) -> list[ToolRecord]:
    """Every registered tool, in registry order."""
    graph = app.container.graph()
    return [
        ToolRecord(
            name=registration.short_name,
            qualified_name=registration.qualified_name,
            domain=registration.domain,
            priority=registration.priority,
            plugin=registration.plugin,
            kinds=[str(kind) for kind in tool_kinds(registration.tool_class)],
            injects=graph.get(registration.qualified_name, []),
            mcp=mcp_source(registration),
            enabled=registration.enabled,
        )
        for registration in app.registry
    ]


def mcp_source(registration: ToolRegistration) -> McpSource | None:
    """The MCP server and tool behind a registered tool (None: not MCP-backed)."""
    tool_class = registration.tool_class
    if not issubclass(tool_class, McpTool):
        return None
    binding = tool_class.binding
    return McpSource(
        server=binding.server,
        tool=binding.remote_name,
        transport=binding.transport,
        target=binding.target,
    )
