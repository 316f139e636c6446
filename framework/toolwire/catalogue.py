"""What an app is made of, described once for every front end.

``toolwire tools --json`` and the HTTP service's ``GET /v1/tools`` both describe the registered
tools; they call :func:`tool_records` so the two can never disagree on a field's meaning.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire.app import App
from toolwire.tools import tool_kinds


class ToolRecord(BaseModel):
    """One registered tool (field order is the order ``toolwire tools --json`` prints)."""

    name: str = Field(description="The short name, e.g. 'substance_lookup'.")
    qualified_name: str = Field(description="The domain-prefixed name, e.g. 'pharma.lookup'.")
    domain: str
    priority: int
    plugin: str = Field(description="The plugin that declared it; 'config' for the app's YAML.")
    kinds: list[str] = Field(description="activated, coordinator, context_consumer, ...")
    injects: list[str] = Field(description="Prefixed names of the tools injected into it.")
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
            enabled=registration.enabled,
        )
        for registration in app.registry
    ]
