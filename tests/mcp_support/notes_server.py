"""A small MCP server written with the SDK, used as a tool source in toolwire's tests.

Run as ``python notes_server.py`` (stdio) or ``python notes_server.py --http PORT`` (streamable
HTTP on 127.0.0.1). Its tools: ``read_note`` (a note's text; an unknown title is an error
result), ``listNotes`` (camel case, so toolwire names it ``list_notes``), ``process_id`` and
``crash`` (the process dies in the middle of the call).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

NOTES = {
    "groceries": "milk, eggs, three lemons",
    "meeting": "Thursday 10:00 with the pharmacy team, room 4",
}

server = MCPServer("notes")


@server.tool()
def read_note(
    title: str = Field(description="The note's title, e.g. 'groceries'"),
) -> str:
    """Read the text of one of the user's notes by its title."""
    if title not in NOTES:
        raise ToolError(f"no note titled {title!r}; notes: {', '.join(sorted(NOTES))}")
    return NOTES[title]


@server.tool(name="listNotes")
def list_notes() -> str:
    """List the titles of the user's notes."""
    return ", ".join(sorted(NOTES))


@server.tool()
def process_id() -> str:
    """The server process's id (to tell whether a connection was reused)."""
    return str(os.getpid())


@server.tool()
def crash(reason: str = "") -> str:
    """Stop the server process in the middle of the call (to test a crashing server)."""
    sys.stderr.write(f"notes server crashing on purpose: {reason}\n")
    sys.stderr.flush()
    os._exit(17)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
