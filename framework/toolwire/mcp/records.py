"""What MCP servers send, as toolwire models (no ``mcp`` SDK import at run time)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from toolwire.mcp.metadata import listed_schema, listed_text

if TYPE_CHECKING:
    from mcp.types import CallToolResult


class RemoteTool(BaseModel):
    """One tool as an MCP server lists it (the fields toolwire uses), its description and its
    schema's descriptions made fit for the prompts (:mod:`toolwire.mcp.metadata`)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @field_validator("description")
    @classmethod
    def _description_for_prompts(cls, description: str) -> str:
        return listed_text(description)

    @field_validator("input_schema")
    @classmethod
    def _schema_for_prompts(cls, schema: dict[str, Any]) -> dict[str, Any]:
        cleaned: dict[str, Any] = listed_schema(schema)
        return cleaned


class McpToolResult(BaseModel):
    """What one MCP tool call returned."""

    text: str
    """The result's content as text: text blocks and embedded text resources, one per line;
    other blocks named in brackets (``[image/png image]``); the structured content as JSON when
    there is no text."""
    structured: Any = None
    """The result's structured content, when the server sent one."""
    is_error: bool = False
    """The tool reported a failure (its text says which)."""


def tool_result(result: CallToolResult) -> McpToolResult:
    """The SDK's ``CallToolResult`` as toolwire's :class:`McpToolResult`."""
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        elif block.type == "resource":
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else f"[{block.resource.uri} (binary)]")
        elif block.type == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{block.mime_type} {block.type}]")
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return McpToolResult(
        text=text, structured=result.structured_content, is_error=bool(result.is_error)
    )

