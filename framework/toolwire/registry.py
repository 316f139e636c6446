"""Every tool's domain-prefixed name, and resolution of short and prefixed names (SPEC §4).

The registry owns the prefix: authors write short names, the registry answers for
``"<domain>.<short>"``, and an unknown, ambiguous or duplicate name is an error that names the
candidates and the owners.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from toolwire.errors import (
    AmbiguousToolError,
    ConfigError,
    Problem,
    ToolNameError,
    UnknownToolError,
)
from toolwire.tools import ChatbotTool

WIRE_SEPARATOR = "-"
"""Replaces the dot in wire names: LLM function names may not contain dots, and tool and domain
names may not contain a dash, so the wire form is reversible."""


class DomainSpec(BaseModel):
    """A chatbot domain: its tools live under ``"<name>."``."""

    name: str
    description: str = ""
    instructions: str = ""
    """The domain's own instructions for the model: voice, answer format, procedures, hard
    rules. Every call of the domain reads them in its fixed prefix, after toolwire's rules
    (:mod:`toolwire.domain_instructions`); "" for none."""
    prompt_types: list[str] = Field(default_factory=list)
    rag_tool: str | None = None
    """The retrieval tool that runs beside suitability-activated tools (never with required)."""
    deep_fallback: dict[str, str] = Field(default_factory=dict)
    """Prompt type → deep search coordinator tool; ``"*"`` covers every other type."""
    excluded_tools: list[str] = Field(default_factory=list)
    orchestrator: str | None = None
    """The domain's orchestrator class, ``'package.module:ClassName'``: a ``DomainOrchestrator``
    subclass (overriding ``get_deep_fallback_tool``, say). None: ``DomainOrchestrator``."""
    plugin: str = "config"


@dataclass(frozen=True)
class SourceLocation:
    """Where something was declared, for error messages."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class FollowOnProblem(Problem):
    """A problem that follows from another one reported with it: a reference to an entry left
    out for its own problems. ``toolwire.config.in_file_order`` lists it after the other
    problems of its file, so the effect never comes before its cause."""


def located(source: SourceLocation | None, message: str, *, follow_on: bool = False) -> Problem:
    """A problem at ``source`` (unlocated when the source is unknown); ``follow_on``: a
    :class:`FollowOnProblem`."""
    kind = FollowOnProblem if follow_on else Problem
    return kind(message, source.path if source else None, source.line if source else None)


def format_loc(loc: Sequence[str | int]) -> str:
    """``("tools", 0, "priority")`` → ``"tools[0].priority"``: a key's path as the
    configuration's problems write it (``deep_fallback.general``, ``excluded_tools[1]``)."""
    text = ""
    for key in loc:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def class_location(cls: type) -> SourceLocation | None:
    """Where a class is defined: the location of a tool that a hook, not YAML, declared.

    Only error paths call this (finding a class's line reads and parses its module).
    """
    try:
        path = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):  # built in, or defined where no source file exists
        return None
    return SourceLocation(path, line) if path else None


def duplicate_tool_problem(
    qualified_name: str,
    first: tuple[str, SourceLocation | None],
    second: tuple[str, SourceLocation | None],
) -> Problem:
    """Two owners (plugin or ``config``, where) declared the same prefixed name."""
    return located(
        second[1],
        f"duplicate tool {qualified_name!r}: declared by {_owner(*first)} and again by "
        f"{_owner(*second)}; rename one (the 'name' key in its YAML, or "
        "register(..., name=...) in its register_tools hook), or leave one plugin out with "
        "TOOLWIRE_PLUGINS",
    )


def _owner(plugin: str, where: SourceLocation | None) -> str:
    return f"plugin {plugin!r}" + (f" at {where}" if where else "")


@dataclass(frozen=True)
class ToolRegistration:
    """One declared tool: what the container builds and what every name resolves to."""

    short_name: str
    domain: str
    tool_class: type[ChatbotTool[Any]]
    plugin: str
    priority: int
    enabled: bool = True
    settings: Mapping[str, Any] = field(default_factory=dict)
    injections: Mapping[str, str] = field(default_factory=dict)
    """Constructor parameter → tool name (short or prefixed), overriding autowiring by type."""
    examples: tuple[str, ...] = ()
    """Sample user messages the tool answers (YAML ``examples``, else the class's)."""
    own_event_loop: bool | None = None
    """YAML ``own_event_loop``; None: the class's ``own_event_loop``."""
    source: SourceLocation | None = None

    @property
    def qualified_name(self) -> str:
        return qualify(self.domain, self.short_name)

    @property
    def wire_name(self) -> str:
        return to_wire_name(self.qualified_name)

    def location(self) -> SourceLocation | None:
        """Where the tool was declared: its YAML entry, else its class (see class_location)."""
        return self.source or class_location(self.tool_class)


def qualify(domain: str, short_name: str) -> str:
    """``("pharma", "substance_lookup")`` → ``"pharma.substance_lookup"``: the prefixed name."""
    return f"{domain}.{short_name}"


def to_wire_name(qualified_name: str) -> str:
    """``"pharma.substance_lookup"`` → ``"pharma-substance_lookup"`` (safe as a function name)."""
    return qualified_name.replace(".", WIRE_SEPARATOR, 1)


def from_wire_name(wire_name: str) -> str:
    """The inverse of :func:`to_wire_name`."""
    return wire_name.replace(WIRE_SEPARATOR, ".", 1)


@dataclass(frozen=True)
class LeftOutTool:
    """A tool whose declaration was left out of the registry for problems reported at it."""

    qualified_name: str
    source: SourceLocation | None
    tool_class: type | None = None
    """The class its ``class`` imported, when it did (even one that is no valid tool class):
    a parameter autowired by that class, or a base of it, finds the declaration by it."""

    @property
    def short_name(self) -> str:
        return self.qualified_name.partition(".")[2]

    def reason(self) -> str:
        """Why a reference to the tool finds nothing: not a missing tool, its own problems."""
        where = f" (declared at {self.source})" if self.source else ""
        return (
            f"tool {self.qualified_name!r}{where} has problems of its own and was left out; "
            "fix those first"
        )


class LeftOutToolError(UnknownToolError):
    """A name that finds a tool left out for its own problems (:meth:`LeftOutTool.reason`): a
    problem that follows from those (see :class:`FollowOnProblem`)."""

    def __init__(self, tool: LeftOutTool, *, name: str) -> None:
        self.left_out = tool
        super().__init__(tool.reason(), name=name, candidates=[])


class ToolRegistry:
    """All registered tools, in registration order, addressable by short or prefixed name."""

    def __init__(self) -> None:
        self._by_qualified: dict[str, ToolRegistration] = {}
        self._left_out: dict[str, LeftOutTool] = {}

    def add(self, registration: ToolRegistration) -> None:
        """Register a tool; a second tool with the same prefixed name is an error naming both."""
        existing = self._by_qualified.get(registration.qualified_name)
        if existing is not None:
            raise ConfigError(
                duplicate_tool_problem(
                    registration.qualified_name,
                    (existing.plugin, existing.location()),
                    (registration.plugin, registration.location()),
                )
            )
        self._by_qualified[registration.qualified_name] = registration

    def leave_out(self, tool: LeftOutTool) -> None:
        """Remember a declaration left out for its problems: a name (:meth:`resolve`) or a class
        (:meth:`left_out_of_class`) that finds no tool then says why, instead of following the
        problems with "unknown tool" and a guess at another one."""
        self._left_out.setdefault(tool.qualified_name, tool)

    def _left_out_exactly(self, name: str, domain: str | None) -> LeftOutTool | None:
        """The left-out tool a prefixed name, or a short one in ``domain``, names."""
        names = [name, from_wire_name(name), *([qualify(domain, name)] if domain else [])]
        return next((self._left_out[n] for n in names if n in self._left_out), None)

    def _left_out_anywhere(self, name: str) -> LeftOutTool | None:
        """The one left-out tool of any domain with the short name ``name``."""
        same_short = [tool for tool in self._left_out.values() if tool.short_name == name]
        return same_short[0] if len(same_short) == 1 else None

    def left_out_of_class(self, wanted: object) -> LeftOutTool | None:
        """The one left-out tool whose class is ``wanted`` or derives from it (autowiring by
        type would have found it), compared as class objects: however its ``class`` was written
        (``shopx:Tool``, re-exported, names ``shopx.tools.Tool``)."""
        if not isinstance(wanted, type) or wanted is object:
            return None
        matches = [
            tool
            for tool in self._left_out.values()
            if tool.tool_class is not None and _derives(tool.tool_class, wanted)
        ]
        return matches[0] if len(matches) == 1 else None

    def __iter__(self) -> Iterator[ToolRegistration]:
        return iter(self._by_qualified.values())

    def __len__(self) -> int:
        return len(self._by_qualified)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._by_qualified

    def in_domain(self, domain: str) -> list[ToolRegistration]:
        """The domain's tools in registry order (the order suitability prompts list them)."""
        return [reg for reg in self._by_qualified.values() if reg.domain == domain]

    def resolve(self, name: str, domain: str | None = None) -> ToolRegistration:
        """Find a tool by prefixed name, or by short name in ``domain`` first, then anywhere."""
        exact = self._by_qualified.get(name) or self._by_qualified.get(from_wire_name(name))
        if exact is not None:
            return exact
        if domain is not None:
            local = self._by_qualified.get(qualify(domain, name))
            if local is not None:
                return local
        left_out = self._left_out_exactly(name, domain)  # before another domain's namesake
        if left_out is not None:
            raise LeftOutToolError(left_out, name=name)
        matches = [reg for reg in self._by_qualified.values() if reg.short_name == name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            candidates = sorted(reg.qualified_name for reg in matches)
            scope = f" and none in domain {domain!r}" if domain else ""
            raise AmbiguousToolError(
                f"tool name {name!r} is ambiguous: it matches {', '.join(candidates)}{scope}; "
                "use the prefixed name",
                name=name,
                candidates=candidates,
            )
        left_out = self._left_out_anywhere(name)
        if left_out is not None:
            raise LeftOutToolError(left_out, name=name)
        candidates = self._close_names(name, domain)
        hint = f"; did you mean {', '.join(candidates)}?" if candidates else ""
        scope = f" (looked in domain {domain!r} and by prefixed name)" if domain else ""
        raise UnknownToolError(
            f"unknown tool {name!r}{scope}{hint}", name=name, candidates=candidates
        )

    def _close_names(self, name: str, domain: str | None) -> list[str]:
        names = list(self._by_qualified)
        short_in_domain = [reg.short_name for reg in self.in_domain(domain)] if domain else []
        close = difflib.get_close_matches(name, names + short_in_domain, n=5, cutoff=0.5)
        if not close and domain:
            close = [reg.qualified_name for reg in self.in_domain(domain)]
        return close


def domain_reference_problems(
    spec: DomainSpec,
    registry: ToolRegistry,
    is_built: Callable[[ToolRegistration], bool] = lambda registration: registration.enabled,
) -> list[str]:
    """What is wrong with a domain's tool references: every name must resolve, and the RAG and
    deep fallback tools must also be enabled (an excluded tool may be disabled).

    ``App.load``/``toolwire check`` and the orchestrator both call this, so a reference that
    passes the build never fails at the first question.
    """
    return [
        problem.message for problem in keyed_domain_reference_problems(spec, registry, is_built)
    ]


DomainKey = tuple[str] | tuple[str, str] | tuple[str, int]
"""A key of a domain's declaration: ``("rag_tool",)``, ``("deep_fallback", "general")``,
``("excluded_tools", 0)``."""


class DomainReferenceProblem(NamedTuple):
    """One of :func:`keyed_domain_reference_problems`."""

    key: DomainKey
    message: str
    follow_on: bool = False
    """It names a tool left out for its own problems (see :class:`FollowOnProblem`)."""


def keyed_domain_reference_problems(
    spec: DomainSpec,
    registry: ToolRegistry,
    is_built: Callable[[ToolRegistration], bool] = lambda registration: registration.enabled,
) -> list[DomainReferenceProblem]:
    """:func:`domain_reference_problems`, each with the key it is about, so the build can
    locate it at that key's line; the message names the key too, as the configuration's
    problems write one (``deep_fallback.general``: one domain may name an unknown tool under
    several keys)."""
    references: list[tuple[DomainKey, str, bool]] = []
    if spec.rag_tool:
        references.append((("rag_tool",), spec.rag_tool, True))
    references += [
        (("deep_fallback", kind), name, True) for kind, name in spec.deep_fallback.items()
    ]
    references += [
        (("excluded_tools", i), name, False) for i, name in enumerate(spec.excluded_tools)
    ]
    problems: list[DomainReferenceProblem] = []
    for key, name, must_run in references:
        label = format_loc(key)
        try:
            registration = registry.resolve(name, spec.name)
        except ToolNameError as error:
            follow_on = isinstance(error, LeftOutToolError)
            message = f"domain {spec.name!r}: {label}: {error}"
            problems.append(DomainReferenceProblem(key, message, follow_on))
            continue
        if must_run and not is_built(registration):
            message = (
                f"domain {spec.name!r}: {label} {name!r} names tool "
                f"{registration.qualified_name!r}, which is disabled; enable it or change {label}"
            )
            problems.append(DomainReferenceProblem(key, message))
    return problems


def _derives(candidate: type, wanted: type) -> bool:
    try:
        return issubclass(candidate, wanted)
    except TypeError:  # a protocol with data members cannot be checked structurally
        return False
