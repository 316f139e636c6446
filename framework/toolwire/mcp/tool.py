"""An external MCP server's tool as an ordinary toolwire tool.

Discovery (:mod:`toolwire.mcp.discovery`) makes one subclass of :class:`McpTool` per MCP tool,
with a real parameter model (the tool's input schema), description and yes/no question, so the
registry, the container, selection and the tool index treat it like any other
``OrchestratorActivatedTool``. Its singleton is also a typed proxy for direct calls: a plugin tool
that receives it by injection calls ``await tool.call(path="notes.txt")`` (or ``call_sync`` from a
plain method), with the arguments validated against the same parameter model.

This module imports nothing of the ``mcp`` SDK.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from toolwire.errors import McpServerError
from toolwire.llm.prompts import sourced_text
from toolwire.mcp.connections import McpConnections
from toolwire.mcp.records import McpToolResult
from toolwire.tools import OrchestratorActivatedTool, ToolExecutionResult


@dataclass(frozen=True)
class McpBinding:
    """Where an MCP-backed tool comes from."""

    server: str
    """The ``name`` of the ``mcp_servers:`` declaration."""
    remote_name: str
    """The tool's name on the MCP server."""
    transport: str
    """``stdio`` or ``http``."""
    target: str
    """The command line or the URL."""


class McpTool(OrchestratorActivatedTool[BaseModel]):
    """Base of every MCP-backed tool; never registered itself (discovery makes subclasses)."""

    binding: ClassVar[McpBinding]
    remote_description: ClassVar[str] = ""
    """The MCP tool's description (or the declaration's override); also its docstring, so
    ``description()`` returns it."""
    question: ClassVar[str] = ""
    """The yes/no suitability question (derived from the description, or the override)."""

    def __init__(self, mcp_connections: McpConnections) -> None:
        self._connections = mcp_connections

    def executable_instruction(self) -> str:
        return self.question

    def parameter_instruction(self) -> str:
        """Names the tool and its description's first sentence (as external content of the
        server, ``external_source``, when that text is the server's)."""
        described = self.remote_description
        summary = sourced_text(self.external_source, first_sentence(described))
        shown = f" ({summary})" if described else ""
        return f"Fill in the arguments of the tool {self.name!r}{shown} from the text."

    async def execute_with_result(self, params: BaseModel, text: str) -> ToolExecutionResult:
        """Call the MCP tool; its text is ordinary context, a reported error a tool failure."""
        result = await self.call(params)
        if result.is_error:
            raise McpServerError(
                f"MCP tool {self.binding.remote_name!r} of server {self.binding.server!r} "
                f"reported an error: {result.text or '(no message)'}"
            )
        return ToolExecutionResult.context(result.text)

    async def call(self, params: BaseModel | None = None, /, **arguments: Any) -> McpToolResult:
        """Call the MCP tool with ``params`` (an instance of ``params_model``) or with keyword
        arguments validated against it; a connection problem raises ``McpServerError``."""
        validated = self._validated(params, arguments)
        return await self._connections.call(
            self.binding.server, self.binding.remote_name, wire_arguments(validated)
        )

    def call_sync(self, params: BaseModel | None = None, /, **arguments: Any) -> McpToolResult:
        """:meth:`call` for plain (non-``async``) code, which the orchestrator runs in a worker
        thread; never call it from a running event loop (use ``await call(...)`` there)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"{type(self).__name__}.call_sync() was called inside a running event loop; "
                "use 'await tool.call(...)' there"
            )
        validated = self._validated(params, arguments)
        return self._connections.call_sync(
            self.binding.server, self.binding.remote_name, wire_arguments(validated)
        )

    def _validated(self, params: BaseModel | None, arguments: dict[str, Any]) -> BaseModel:
        if params is not None and arguments:
            raise TypeError("pass either a parameter model instance or keyword arguments")
        if params is None:
            return self.params_model.model_validate(arguments)
        return params


def wire_arguments(params: BaseModel) -> dict[str, Any]:
    """The arguments sent to the server: the schema's own names, only what was given, and a null
    only for a required property, at any depth. A null for an optional one means "none" (such
    properties are made to admit it, :func:`toolwire.mcp.discovery.optional_fields_nullable`)
    and is left out; a required nullable one (``str | None`` without a default, as FastMCP
    writes it) must be sent, or the server says it is missing."""
    return _given(params, params.model_dump(mode="json", by_alias=True, exclude_unset=True))


def _given(params: BaseModel, dumped: dict[str, Any]) -> dict[str, Any]:
    """``dumped`` (``params`` as JSON) without the nulls of its optional properties."""
    given: dict[str, Any] = {}
    for name, field in type(params).model_fields.items():
        key = field.serialization_alias or field.alias or name
        if key in dumped and (dumped[key] is not None or field.is_required()):
            given[key] = _given_value(getattr(params, name), dumped[key])
    return given


def _given_value(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel) and isinstance(dumped, dict):
        return _given(value, dumped)
    if isinstance(value, list | tuple) and isinstance(dumped, list):
        return [_given_value(item, sent) for item, sent in zip(value, dumped, strict=True)]
    return dumped


def first_sentence(text: str) -> str:
    """The first line of ``text``, up to its first full stop."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    head, dot, _rest = line.partition(". ")
    return (head + dot).strip().rstrip(".")


def derived_question(description: str, short_name: str) -> str:
    """The yes/no suitability question of an MCP tool whose declaration gives none.

    It names what the tool does, not the tool: a name repeats the description's words, and with
    it the embedded model refused more right tools and accepted more near ones (docs/models.md,
    "Schema-described tools"). The name is all a tool without a description gives."""
    summary = first_sentence(description)
    if not summary:
        return f"Does the question need the tool {short_name!r}?"
    return f"Does the question ask for what this tool does: {summary}?"
