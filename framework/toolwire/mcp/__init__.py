"""MCP both ways (the ``toolwire[mcp]`` extra; docs/mcp.md).

- Consume: ``mcp_servers:`` in YAML turns an external MCP server's tools into toolwire tools of a
  domain (:mod:`toolwire.mcp.declarations`, :mod:`toolwire.mcp.discovery`,
  :mod:`toolwire.mcp.tool`, :mod:`toolwire.mcp.connections`).
- Serve: ``toolwire mcp serve`` exposes a domain as an MCP server (:mod:`toolwire.mcp.server`).

Importing this package imports nothing of the ``mcp`` SDK: the modules that need it import it
when a server is contacted or served.
"""

from toolwire.mcp.records import McpToolResult
from toolwire.mcp.tool import McpTool

__all__ = ["McpTool", "McpToolResult"]
