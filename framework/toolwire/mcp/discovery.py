"""From ``mcp_servers:`` declarations to tool classes the registry takes like any other.

Registration needs each server's tool list (names, descriptions, input schemas), so
``App.load()`` asks every declared server for it once: all servers at the same time, each bounded
by its ``timeout_s``, each connection closed right after listing. A server whose allow-list gives
every tool's ``input_schema`` is not asked: the YAML says all registration needs. The connection
that calls the tools is a different one, opened on the first call
(:mod:`toolwire.mcp.connections`).

A server that cannot be started or listed is a problem at its declaration's ``path:line``; its
tools are missing and the rest of the app loads. ``toolwire check`` (``McpListing.NONE``) starts no
server: an allow-listed tool is registered with an open parameter model, so names that refer to
it still resolve, and the tools of a server without an allow-list are only known after
connecting (``toolwire check --connect``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from toolwire.config import AppConfig, ToolEntry
from toolwire.errors import McpServerError, Problem
from toolwire.extras import installed, needs_extra
from toolwire.mcp.connections import McpConnections
from toolwire.mcp.declarations import (
    McpServerEntry,
    McpToolOverride,
    duplicate_problems,
    entry_problems,
    short_name_for,
)
from toolwire.mcp.metadata import MAX_TOOL_NAME_CHARS, quoted, schema_refusal
from toolwire.mcp.records import RemoteTool
from toolwire.mcp.tool import McpBinding, McpTool, derived_question
from toolwire.plugins import PluginSet, ToolContribution
from toolwire.references import UnresolvedReference, import_reference
from toolwire.registry import qualify
from toolwire.tools import TOOL_NAME_PATTERN

log = structlog.get_logger(__name__)

MCP_OWNER = "config"
"""MCP servers are declared in the app's configuration, so their tools belong to it (the app's
YAML may still change their priority or disable them by prefixed name)."""


class McpParams(BaseModel):
    """Base of the parameter models made from MCP input schemas."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


@dataclass
class McpDiscovery:
    """What the declarations contributed: tool classes, and the problems found on the way."""

    tools: list[ToolContribution] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    listed: dict[str, list[RemoteTool]] = field(default_factory=dict)
    """Server name → every tool it offered (allow-listed or not), for ``check --connect``."""
    declarations: dict[str, McpServerEntry] = field(default_factory=dict)
    """Server name → its declaration, for the problems found after discovery."""

    def refuse_taken(self, plugin_set: PluginSet, config: AppConfig) -> None:
        """Leave out every MCP tool whose prefixed name a plugin's tool, a tool class the app's
        YAML declares or an earlier server's tool already has (each a problem at the server's
        declaration, logged as ``mcp_tool_refused``), so that a server offering a name that is
        taken costs that tool, not the start of the whole app."""
        taken = declared_tool_names(plugin_set, config)
        kept: list[ToolContribution] = []
        for contribution in self.tools:
            qualified = qualify(contribution.domain, contribution.name or "")
            holder = taken.get(qualified)
            tool_class = contribution.tool_class
            assert issubclass(tool_class, McpTool)  # discovery contributes nothing else
            binding = tool_class.binding
            if holder is None:
                taken[qualified] = f"the tool {binding.remote_name!r} of mcp server " + repr(
                    binding.server
                )
                kept.append(contribution)
                continue
            entry = self.declarations[binding.server]
            reason = f"its name {qualified!r} is taken by {holder}"
            problem = entry.problem(
                f"tool {binding.remote_name!r} is left out: {reason}; give it another short "
                "name with 'as:' in its 'tools:' entry",
                *_allow_list_key(entry, binding.remote_name),
            )
            log.warning(
                "mcp_tool_refused",
                server=binding.server,
                tool=binding.remote_name,
                reason=reason,
                declared_at=f"{problem.path}:{problem.line}" if problem.path else None,
            )
            self.problems.append(problem)
        self.tools = kept


class McpListing(StrEnum):
    """Which declared servers are started (and stopped again) to list their tools."""

    NONE = "none"
    """``toolwire check``: none; allow-listed tools stand in for what a server offers."""
    NEEDED = "needed"
    """``App.load()``: the servers whose tools the YAML does not fully declare."""
    ALL = "all"
    """``toolwire check --connect``: every server."""


def discover_mcp_tools(
    config: AppConfig, connections: McpConnections, listing: McpListing = McpListing.NEEDED
) -> McpDiscovery:
    """Tool classes for every valid declaration of ``config.mcp_servers`` (module docstring)."""
    entries, default_domain = config.mcp_servers, config.default_domain
    if not entries:
        return McpDiscovery()
    missing = [name for name in ("mcp", "json_schema_to_pydantic") if not installed(name)]
    if missing:
        message = needs_extra("an mcp_servers: entry", "mcp", missing)
        return McpDiscovery(problems=[entry.problem(message) for entry in entries])
    found = McpDiscovery(problems=duplicate_problems(entries))
    usable: dict[str, tuple[McpServerEntry, str]] = {}
    for entry in entries:
        problems = entry_problems(entry)
        domain = entry.domain or default_domain
        if domain is None:
            problems.append(
                entry.problem("has no 'domain' and there is no default_domain; add domain: ...")
            )
        found.problems += problems
        if domain is not None and not problems:
            usable.setdefault(entry.name, (entry, domain))
    found.declarations = {name: entry for name, (entry, _) in usable.items()}
    if not usable:
        return found
    to_list = [
        entry
        for entry, _ in usable.values()
        if listing is McpListing.ALL or (listing is McpListing.NEEDED and not entry.fully_declared)
    ]
    listed = connections.list_tools(to_list) if to_list else {}
    for entry, domain in usable.values():
        offered = listed.get(entry.name)
        if isinstance(offered, McpServerError):
            found.problems.append(entry.problem(str(offered)))
            log.warning("mcp_server_failed", server=entry.name, error=str(offered))
            continue
        if offered is not None:
            found.listed[entry.name] = offered
        _add_tools(found, entry, domain, _allow_listed(entry) if offered is None else offered)
    return found


def declared_tool_names(plugin_set: PluginSet, config: AppConfig) -> dict[str, str]:
    """Prefixed name → who declares it, for every tool the plugins (their hooks and YAML files)
    and the app's YAML declare with a class (an entry without one changes an earlier tool).
    Names the build cannot resolve (a class that does not import) are its problems, not these."""
    names: dict[str, str] = {}
    own_domains: dict[str, list[str]] = {}
    for spec in plugin_set.domains:
        own_domains.setdefault(spec.plugin, []).append(spec.name)
    for contribution in plugin_set.tools:
        name = contribution.name or contribution.tool_class.name
        holder = f"plugin {contribution.plugin!r} ({contribution.tool_class.__qualname__})"
        names.setdefault(qualify(contribution.domain, name), holder)
    for file in plugin_set.config_files:
        domains = own_domains.get(file.plugin, []) + [d.name for d in file.config.domains]
        only = domains[0] if len(set(domains)) == 1 else None
        for entry in file.config.tools:
            _declared(names, entry, only, f"plugin {file.plugin!r}")
    for entry in config.tools:
        _declared(names, entry, config.default_domain, "the app's 'tools:'")
    return names


def _declared(
    names: dict[str, str], entry: ToolEntry, default_domain: str | None, owner: str
) -> None:
    if entry.class_ is None:
        return
    name = entry.name or _class_name(entry.class_)
    domain = entry.domain or default_domain
    if name is not None and domain is not None:
        where = f" at {entry.source}" if entry.source else ""
        names.setdefault(qualify(domain, name), f"{owner}{where}")


def _class_name(reference: str) -> str | None:
    """The ``name`` of the tool class ``reference`` names (None when it cannot be had)."""
    try:
        target = import_reference(reference)
    except UnresolvedReference:
        return None
    name = getattr(target, "name", None)
    return name if isinstance(name, str) else None


def _allow_list_key(entry: McpServerEntry, remote_name: str) -> tuple[str | int, ...]:
    """Where the declaration names the tool: its allow-list entry, else the declaration."""
    for index, tool in enumerate(entry.tools or []):
        if tool.name == remote_name:
            return ("tools", index)
    return ()


def _allow_listed(entry: McpServerEntry) -> list[RemoteTool]:
    """What a server is taken to offer without asking it: its allow-list, with the declared
    schemas (an open one where none is declared)."""
    return [
        RemoteTool(
            name=tool.name,
            description=tool.description or "",
            input_schema=tool.input_schema or {"type": "object"},
        )
        for tool in entry.tools or []
    ]


def _add_tools(
    found: McpDiscovery, entry: McpServerEntry, domain: str, listing: list[RemoteTool]
) -> None:
    allowed = entry.allowed()
    listing = _named_within_bounds(found, entry, listing)
    offered = {remote.name: remote for remote in listing}
    if allowed is not None:
        for index, name in enumerate(allowed):
            if name not in offered:
                close = ", ".join(sorted(offered)) or "none"
                found.problems.append(
                    entry.problem(
                        f"the server offers no tool {name!r}; it offers: {close}", "tools", index
                    )
                )
    short_names: dict[str, str] = {}
    for remote in listing:
        if allowed is not None and remote.name not in allowed:
            continue
        override = allowed.get(remote.name) if allowed is not None else None
        if _schema_refused(found, entry, remote, override):
            continue
        short = (override.as_ if override else None) or short_name_for(remote.name)
        clash = short_names.setdefault(short, remote.name)
        if clash != remote.name or not TOOL_NAME_PATTERN.match(short):
            reason = (
                f"both {clash!r} and {remote.name!r} become {short!r}"
                if clash != remote.name
                else f"{remote.name!r} becomes {short!r}, which is not lower snake case"
            )
            found.problems.append(
                entry.problem(
                    f"{reason}; list the tool under 'tools:' with 'as: <short_name>'", "tools"
                )
            )
            continue
        try:
            tool_class = tool_class_for(entry, remote, short, override)
        except Exception as error:  # the library's schema errors have no common base
            found.problems.append(
                entry.problem(
                    f"tool {remote.name!r}: its input schema cannot become a parameter model "
                    f"({type(error).__name__}: {error}); leave it out with a 'tools:' allow-list"
                )
            )
            continue
        priority = override.priority if override and override.priority is not None else None
        found.tools.append(
            ToolContribution(
                MCP_OWNER,
                tool_class,
                domain,
                short,
                entry.priority if priority is None else priority,
                source=entry.source,
            )
        )


def _named_within_bounds(
    found: McpDiscovery, entry: McpServerEntry, listing: list[RemoteTool]
) -> list[RemoteTool]:
    """The listed tools whose names MCP allows in length; each other one is a problem."""
    for remote in listing:
        if len(remote.name) > MAX_TOOL_NAME_CHARS:
            found.problems.append(
                entry.problem(
                    f"the server offers a tool whose name has {len(remote.name):,} characters "
                    f"(MCP allows {MAX_TOOL_NAME_CHARS}), {quoted(remote.name)}; it is left out"
                )
            )
    return [remote for remote in listing if len(remote.name) <= MAX_TOOL_NAME_CHARS]


def _schema_refused(
    found: McpDiscovery,
    entry: McpServerEntry,
    remote: RemoteTool,
    override: McpToolOverride | None,
) -> bool:
    """Whether the tool is left out for a listed input schema unfit for the prompts (recorded as
    a problem and logged as ``mcp_tool_refused``); a YAML ``input_schema`` is trusted."""
    if override is not None and override.input_schema:  # what tool_class_for uses then
        return False
    reason = schema_refusal(remote.input_schema)
    if reason is None:
        return False
    log.warning("mcp_tool_refused", server=entry.name, tool=remote.name, reason=reason)
    found.problems.append(
        entry.problem(
            f"tool {remote.name!r}: its input schema has {reason}; it is left out (a 'tools:' "
            "entry for it with its own input_schema is used as written)"
        )
    )
    return True


def tool_class_for(
    entry: McpServerEntry, remote: RemoteTool, short_name: str, override: McpToolOverride | None
) -> type[McpTool]:
    """The :class:`McpTool` subclass for one MCP tool."""
    description = (override.description if override else None) or remote.description
    schema = (override.input_schema if override else None) or remote.input_schema
    question = (override.question if override else None) or derived_question(
        description, short_name
    )
    class_name = _camel(f"{entry.name}_{short_name}")
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": f"{class_name}Tool",
        "__doc__": description or f"The tool {short_name!r} of the MCP server {entry.name!r}.",
        "name": short_name,
        "params_model": params_model_for(schema, f"{class_name}Params", description),
        "remote_description": description,
        "question": question,
        "binding": McpBinding(entry.name, remote.name, entry.transport, entry.target),
        "external_source": None if _all_declared(override) else external_source(entry.name),
    }
    return type(f"{class_name}Tool", (McpTool,), namespace)


def external_source(server: str) -> str:
    """The source an MCP server's tool text is shown as external content of in the prompts."""
    return f"mcp server {server}"


def _all_declared(override: McpToolOverride | None) -> bool:
    """Whether the YAML gives every text of the tool the prompts show: its description (the
    question is the YAML's too, or derived from that description) and its input schema. Such a
    tool is trusted configuration, shown as written; any other MCP tool's text is the server's
    (``McpTool.external_source``)."""
    return override is not None and bool(override.description and override.input_schema)


def params_model_for(
    input_schema: dict[str, Any], model_name: str, description: str = ""
) -> type[BaseModel]:
    """A pydantic model of an MCP input schema (its own field names as aliases)."""
    from json_schema_to_pydantic import create_model

    schema = {**optional_fields_nullable(input_schema), "title": model_name}
    schema.setdefault("type", "object")
    with warnings.catch_warnings():
        # a field called "schema" or "json" shadows a BaseModel attribute: the alias keeps the
        # wire name, so the warning says nothing the model gets wrong
        warnings.filterwarnings("ignore", message="Field name .* shadows an attribute")
        model: type[BaseModel] = create_model(
            schema,
            base_model_type=McpParams,
            allow_undefined_array_items=True,
            allow_undefined_type=True,
            populate_by_name=True,
        )
    model.__doc__ = description or None
    return model


_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("$defs", "definitions", "patternProperties")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains")
_ANNOTATIONS = ("title", "description", "default", "examples")


def optional_fields_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a copy) with every optional property, at any depth, admitting ``null``.

    A server's schema often says ``{"type": "string", "default": null}`` for an optional field,
    which no value satisfies when left out: the model, shown that default, writes null, and the
    parameter model refused it, failing the call. Made nullable (``"type": ["string",
    "null"]``, or an ``anyOf`` with ``{"type": "null"}``), the schema the model sees is the one
    toolwire's own tools show for ``str | None = None``, and a null is accepted, then dropped
    from the arguments sent (:func:`toolwire.mcp.tool.wire_arguments`). Required properties are
    left as they are."""
    shaped: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA_LISTS and isinstance(value, list):
            value = [_shaped(item) for item in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {name: _shaped(item) for name, item in value.items()}
        elif key in _SUBSCHEMAS:
            value = _shaped(value)
        shaped[key] = value
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        shaped["properties"] = {
            name: _shaped(prop) if name in needed else _nullable(_shaped(prop))
            for name, prop in properties.items()
        }
    return shaped


def _shaped(value: Any) -> Any:
    return optional_fields_nullable(value) if isinstance(value, dict) else value


def _nullable(schema: Any) -> Any:
    """``schema`` admitting ``null`` as well (unchanged when it already does)."""
    if not isinstance(schema, dict) or _admits_null(schema):
        return schema
    kind = schema.get("type")
    combined = any(key in schema for key in ("anyOf", "oneOf", "allOf", "$ref", "const"))
    if kind is not None and not combined:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        nullable = {**schema, "type": [*kinds, "null"]}
        if isinstance(schema.get("enum"), list):
            nullable["enum"] = [*schema["enum"], None]
        return nullable
    if "anyOf" in schema and set(schema) - {"anyOf"} <= set(_ANNOTATIONS):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    inner = {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
    outer = {key: value for key, value in schema.items() if key in _ANNOTATIONS}
    return {"anyOf": [inner, {"type": "null"}], **outer}


def _admits_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in schema:
        return schema["const"] is None
    if isinstance(schema.get("enum"), list) and kind is None:
        return None in schema["enum"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and any(
            isinstance(option, dict) and _admits_null(option) for option in options
        ):
            return True
    constraining = {"type", "enum", "anyOf", "oneOf", "allOf", "$ref", "not", "properties"}
    return not constraining & set(schema)  # {} and annotations alone admit anything


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^a-zA-Z0-9]+", name) if part)
