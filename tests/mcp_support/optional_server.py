"""An MCP server whose tool has optional parameters written as many servers write them, for
tests: ``{"type": "string", "default": null}`` (a default no value of the type satisfies).

Run as ``python optional_server.py`` (stdio). Its tool ``forecast`` answers with the arguments
it received, as JSON; a null for ``day`` or ``hours`` fails the server's own validation, as it
would on a server that means "leave it out". Its tool ``remind`` has a required nullable
parameter (``note: str | None`` without a default, which FastMCP lists as required) and answers
with what it received."""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server = MCPServer("optional")


class Window(BaseModel):
    hours: int = Field(default=None, description="How many hours ahead")  # type: ignore[assignment]


@server.tool()
def forecast(
    city: str = Field(description="The city"),
    day: str = Field(default=None, description="The day, e.g. 'Monday'"),  # type: ignore[assignment]
    window: Annotated[Window, Field(description="Which hours")] = None,  # type: ignore[assignment]
) -> str:
    """The weather forecast for a city."""
    given = {"city": city, "day": day, "window": window.model_dump() if window else None}
    return json.dumps({key: value for key, value in given.items() if value is not None})


@server.tool()
def remind(note: str | None, day: str = "today") -> str:
    """Set a reminder, with a note or none."""
    return json.dumps({"note": note, "day": day})


if __name__ == "__main__":
    server.run()
