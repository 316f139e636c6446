"""An MCP server whose one tool returns a result as large as asked, for tests of huge results.

Run as ``python report_server.py`` (stdio) or ``python report_server.py --http PORT [--json]``
(streamable HTTP on 127.0.0.1; ``--json``: each answer one plain JSON body instead of an event
stream). Its tool: ``full_report`` (``megabytes`` of text).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from pydantic import Field

server = MCPServer("reports")

LINE = "sales row 0123456789 north region, widgets, 12 units\n"


@server.tool()
def full_report(
    megabytes: int = Field(description="How many megabytes of report text to return"),
) -> str:
    """Return the full sales report, as many megabytes of text as asked."""
    size = megabytes * 1_000_000
    return (LINE * (size // len(LINE) + 1))[:size]


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--http":
        port, json_response = int(sys.argv[2]), "--json" in sys.argv[3:]
        server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
    else:
        server.run()
