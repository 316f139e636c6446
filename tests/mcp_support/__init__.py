"""Support for the MCP tests: a small MCP server written with the SDK, and launchers."""
