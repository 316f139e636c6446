"""An MCP server whose tools break their own output schemas, for tests (on the SDK's low-level
``Server``, which sends a result as the handler returns it).

Run as ``python schema_server.py`` (stdio). Its tools: ``count_notes`` (declares ``{"count":
integer}`` and returns ``{"count": "many"}``), ``list_titles`` (declares an output schema and
returns no structured content) and ``process_id`` (the server process's id, no output schema).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

NOTHING: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS = [
    Tool(
        name="count_notes",
        description="Count the user's notes.",
        input_schema=NOTHING,
        output_schema={
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        },
    ),
    Tool(
        name="list_titles",
        description="List the titles of the user's notes.",
        input_schema=NOTHING,
        output_schema={"type": "object", "properties": {"titles": {"type": "array"}}},
    ),
    Tool(name="process_id", description="The server process's id.", input_schema=NOTHING),
]


async def list_tools(_ctx: ServerRequestContext[Any], _params: Any) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def call_tool(
    _ctx: ServerRequestContext[Any], params: CallToolRequestParams
) -> CallToolResult:
    if params.name == "count_notes":
        return CallToolResult(
            content=[TextContent(text="many")], structured_content={"count": "many"}
        )
    if params.name == "list_titles":
        return CallToolResult(content=[TextContent(text="groceries, meeting")])
    return CallToolResult(content=[TextContent(text=str(os.getpid()))])


server = Server("schemas", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
