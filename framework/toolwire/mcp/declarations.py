"""``mcp_servers:`` in ``config/toolwire.yaml``: external MCP servers whose tools join a domain.

A declaration is checked here without starting anything (``toolwire check``): the transport
(``command`` or ``url``, exactly one), the tool names and overrides, the bearer token variable.
This module does not import the ``mcp`` SDK, so a configuration that declares no server needs no
extra installed.
"""

from __future__ import annotations

import re
import shlex
import shutil
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator

from toolwire.errors import Problem
from toolwire.located import Located
from toolwire.settings import Section
from toolwire.tools import TOOL_NAME_PATTERN

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RESULT_BYTES = 32_000_000
"""The largest answer read from a server: a tool's result of some 16 MB of text, which a
Python SDK server sends twice (as text and as structured content)."""


class McpToolOverride(Section):
    """One allow-listed tool of a server, with what toolwire should say about it.

    ``tools: [read_file]`` is short for ``tools: [{name: read_file}]``.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    """The tool's name on the MCP server."""
    as_: str | None = Field(default=None, alias="as")
    """The short name in toolwire (default: ``name`` in lower snake case, ``short_name_for``)."""
    question: str | None = None
    """The yes/no suitability question (default: derived from the tool's description)."""
    description: str | None = None
    """Replaces the server's description of the tool (what selection and answers read)."""
    input_schema: dict[str, Any] | None = None
    """The tool's input schema (JSON schema), replacing the server's. When every allow-listed
    tool of a server gives one, ``App.load()`` does not start the server to list its tools."""
    priority: int | None = None


class McpServerEntry(Located):
    """One external MCP server declared in YAML."""

    name: str
    """Names the server in messages, ``toolwire tools`` and ``toolwire check --connect``."""
    domain: str | None = None
    """The domain its tools join (default: ``default_domain``)."""
    command: list[str] | str | None = None
    """Start the server as a child process speaking MCP over stdio (a list, or one shell-quoted
    string)."""
    url: str | None = None
    """Or reach a running server over streamable HTTP (``http://127.0.0.1:9000/mcp``)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of a ``command`` server (it inherits only the SDK's safe variables:
    ``HOME``, ``PATH``, ``USER`` …)."""
    cwd: str | None = None
    bearer_token_env: str | None = None
    """For ``url``: the environment variable whose value is sent as ``Authorization: Bearer``."""
    tools: list[McpToolOverride] | None = None
    """Allow-list (and per-tool overrides); None: every tool the server offers."""
    priority: int = 100
    """Priority of its tools unless a tool entry says otherwise."""
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """Bound on starting the server and listing its tools, and on each tool call."""
    max_result_bytes: int = Field(default=DEFAULT_MAX_RESULT_BYTES, gt=0)
    """The largest message read from the server, as it sends it (JSON): a larger tool result
    fails that call at once, naming its size."""

    @field_validator("tools", mode="before")
    @classmethod
    def _names_are_short_entries(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("command")
    @classmethod
    def _command_splits(cls, value: list[str] | str | None) -> list[str] | str | None:
        if isinstance(value, str):
            try:
                shlex.split(value)
            except ValueError as error:  # an unclosed quote, a trailing escape
                raise ValueError(
                    f"cannot be split into a command line ({error}); check its quotes, or "
                    "give it as a list"
                ) from None
        return value

    @field_validator("url")
    @classmethod
    def _url_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                urlsplit(value).port  # noqa: B018 (parsing the port is the check)
            except ValueError as error:  # an unclosed IPv6 bracket, a port out of range
                raise ValueError(f"is not a URL ({error})") from None
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give exactly one of 'command' (a server started over stdio) or "
                "'url' (a streamable HTTP server)"
            )
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def argv(self) -> list[str]:
        """The command as a list (a string is split the way a POSIX shell would)."""
        if self.command is None:
            return []
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)

    @property
    def target(self) -> str:
        """The command line or the URL, as messages show it."""
        return shlex.join(self.argv) if self.command is not None else str(self.url)

    @property
    def fully_declared(self) -> bool:
        """Whether the YAML says all toolwire needs to register the tools (an allow-list whose
        every tool has an ``input_schema``), so listing them needs no server."""
        return self.tools is not None and all(tool.input_schema for tool in self.tools)

    def allowed(self) -> dict[str, McpToolOverride] | None:
        """MCP tool name → its entry, for an allow-listed server (None: every tool)."""
        return None if self.tools is None else {tool.name: tool for tool in self.tools}

    def problem(self, message: str, *key: str | int) -> Problem:
        """A problem located at this declaration (or at one of its keys)."""
        source = self.source
        line = self.line_of(*key) if key else (source.line if source else None)
        path = source.path if source else None
        return Problem(f"mcp server {self.name!r}: {message}", path, line)


def short_name_for(remote_name: str) -> str:
    """The toolwire short name of an MCP tool: lower snake case (``readFile``, ``read-file`` and
    ``fs.read_file`` become ``read_file``, ``read_file`` and ``fs_read_file``).

    A name that still does not match ``[a-z][a-z0-9_]*`` (one starting with a digit) needs an
    ``as:`` in the declaration.
    """
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", remote_name)
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")


def duplicate_problems(entries: list[McpServerEntry]) -> list[Problem]:
    """A server name declared twice."""
    problems: list[Problem] = []
    seen: dict[str, McpServerEntry] = {}
    for entry in entries:
        first = seen.setdefault(entry.name, entry)
        if first is not entry:
            line = first.source.line if first.source else None
            problems.append(
                entry.problem(f"declared twice (first at line {line}); give one another name")
            )
    return problems


def entry_problems(entry: McpServerEntry) -> list[Problem]:
    """What is wrong with one declaration, found without starting the server (its domain is
    checked with its tools, once the build knows every domain)."""
    problems = _transport_problems(entry)
    for index, tool in enumerate(entry.tools or []):
        short = tool.as_ or short_name_for(tool.name)
        if not TOOL_NAME_PATTERN.match(short):
            problems.append(
                entry.problem(
                    f"tool {tool.name!r} becomes {short!r}, which is not lower snake case; "
                    "give it a name with 'as: <short_name>'",
                    "tools",
                    index,
                )
            )
    return problems


def _transport_problems(entry: McpServerEntry) -> list[Problem]:
    if entry.command is not None:
        argv = entry.argv
        if not argv:
            return [entry.problem("'command' is empty", "command")]
        if shutil.which(argv[0]) is None:
            return [
                entry.problem(
                    f"command {argv[0]!r} is not an executable on PATH; give its full path or "
                    "install it",
                    "command",
                )
            ]
        return []
    parts = urlsplit(str(entry.url))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [entry.problem(f"url {entry.url!r} is not an http(s) URL", "url")]
    return []
