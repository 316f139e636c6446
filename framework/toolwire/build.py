"""From plugin contributions and YAML to the registry and the domains (build time only).

Merge order, later overriding earlier:

1. what plugins register through hooks (``register_domains``, ``register_tools``,
   ``register_coordinators``), in plugin load order;
2. the YAML files plugins ship (``register_config_files``), in plugin load order;
3. the app's own ``config/toolwire.yaml``.

A tool is identified by its prefixed name ``<domain>.<name>`` and a domain by its name. A later
entry for the same tool only changes the keys it writes (``settings`` and ``inject`` are merged
key by key), so the app can disable a plugin's tool or change one setting without repeating the
class. A plugin may refine its own declarations, never another plugin's: that is a duplicate,
reported with both owners. Every problem of every file is collected into one ``ConfigError``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import structlog
from pydantic import ValidationError

from toolwire.config import (
    AppConfig,
    DomainEntry,
    PluginConfigFile,
    ToolEntry,
    in_file_order,
)
from toolwire.container import settings_problems, validated_settings
from toolwire.domain_instructions import instruction_problems
from toolwire.errors import ConfigError, Problem, did_you_mean
from toolwire.orchestrator.domain_orchestrator import DomainOrchestrator
from toolwire.plugins import PluginSet
from toolwire.references import UnresolvedReference, import_reference
from toolwire.registry import (
    DomainSpec,
    LeftOutTool,
    SourceLocation,
    ToolRegistration,
    ToolRegistry,
    class_location,
    duplicate_tool_problem,
    format_loc,
    keyed_domain_reference_problems,
    located,
    qualify,
)
from toolwire.tools import TOOL_NAME_PATTERN, ChatbotTool, validate_tool_class

log = structlog.get_logger(__name__)

APP_OWNER = "config"
"""The owner recorded for declarations made in the app's own configuration."""


@dataclass
class _ToolDecl:
    owner: str
    tool_class: type[ChatbotTool[Any]]
    name: str
    domain: str
    priority: int | None
    enabled: bool = True
    settings: dict[str, Any] = field(default_factory=dict)
    settings_entry: ToolEntry | None = None
    injections: dict[str, str] = field(default_factory=dict)
    examples: list[str] | None = None
    own_event_loop: bool | None = None
    source: SourceLocation | None = None

    @property
    def qualified_name(self) -> str:
        return qualify(self.domain, self.name)


@dataclass
class _DomainDecl:
    spec: DomainSpec
    source: SourceLocation | None = None
    """Where the domain was declared first (a ``register(...)`` call or a YAML entry)."""
    written: dict[str, DomainEntry] = field(default_factory=dict)
    """Each key a YAML entry wrote → the entry that wrote it last."""

    def location_of(self, *key: str | int) -> SourceLocation | None:
        """Where ``key`` was written last: its own line in a YAML entry, else (a hook's
        ``DomainSpec`` set it) where the domain was declared."""
        entry = self.written.get(str(key[0]))
        return _key_location(entry, *key) if entry is not None else self.source


@dataclass
class Built:
    registry: ToolRegistry
    domains: dict[str, DomainSpec]
    orchestrators: dict[str, type[DomainOrchestrator]] = field(default_factory=dict)
    """Domain name → the orchestrator class it names (``DomainSpec.orchestrator``)."""


class _Builder:
    def __init__(self) -> None:
        self.tools: dict[str, _ToolDecl] = {}
        self.domains: dict[str, _DomainDecl] = {}
        self.left_out: dict[str, LeftOutTool] = {}
        """Tool declarations left out for their problems, by prefixed name (for the registry:
        a tool of that name that is registered all the same is found first)."""
        self.left_out_domains: dict[str, SourceLocation | None] = {}
        """Domain entries left out for their problems, by name."""
        self.problems: list[Problem] = []
        self.default_domain: str | None = None
        self.app_config: AppConfig | None = None

    # -- domains -----------------------------------------------------------------------------

    def add_domain_spec(self, spec: DomainSpec, source: SourceLocation | None) -> None:
        existing = self.domains.get(spec.name)
        if existing is not None:
            first = f" at {existing.source}" if existing.source else ""
            self.problems.append(
                located(
                    source,
                    f"duplicate domain {spec.name!r}: registered by plugin "
                    f"{existing.spec.plugin!r}{first} and again by plugin {spec.plugin!r}; "
                    "a plugin adds tools to another plugin's domain with register_coordinators "
                    "or YAML, it does not declare the domain again",
                )
            )
            return
        self.domains[spec.name] = _DomainDecl(spec, source)

    def add_domain_entry(self, entry: DomainEntry, owner: str) -> None:
        if not TOOL_NAME_PATTERN.match(entry.name):
            self._problem(entry, f"domain name {entry.name!r} is not lower snake case", "name")
            self.left_out_domains.setdefault(entry.name, entry.source)
            return
        changes = entry.model_dump(exclude_unset=True, exclude_none=True)
        written = dict.fromkeys(changes, entry)
        existing = self.domains.get(entry.name)
        if existing is None:
            spec = DomainSpec.model_validate({**changes, "plugin": owner})
            self.domains[entry.name] = _DomainDecl(spec, entry.source, written)
            return
        if owner != APP_OWNER and owner != existing.spec.plugin:
            self._problem(
                entry, f"domain {entry.name!r} belongs to plugin {existing.spec.plugin!r}"
            )
            return
        existing.spec = existing.spec.model_copy(update=changes)
        existing.written.update(written)

    # -- tools -------------------------------------------------------------------------------

    def add_tool(self, decl: _ToolDecl) -> None:
        existing = self.tools.get(decl.qualified_name)
        if existing is not None:
            self.problems.append(_duplicate(decl, existing))
            return
        self.tools[decl.qualified_name] = decl

    def add_tool_entries(self, entries: list[ToolEntry], owner: str) -> None:
        seen: dict[str, ToolEntry] = {}
        for entry in entries:
            resolved = self._resolve_entry(entry, owner)
            if not isinstance(resolved, tuple):
                self._leave_out(entry, owner, resolved)
                continue
            tool_class, name, domain = resolved
            qualified = qualify(domain, name)
            first = seen.get(qualified)
            if first is not None:
                first_line = first.source.line if first.source else None
                self._problem(
                    entry,
                    f"duplicate tool {qualified!r} in this file (first declared at line "
                    f"{first_line}); remove one entry or give one a different 'name'",
                )
                continue
            seen[qualified] = entry
            self._merge_entry(entry, owner, tool_class, name, domain, qualified)

    def _resolve_entry(
        self, entry: ToolEntry, owner: str
    ) -> tuple[type[ChatbotTool[Any]] | None, str, str] | type | None:
        """The entry's class, name and domain; else (a problem reported) the class its
        ``class`` imported, if it did (a class refused as a tool is still how a parameter
        autowired by it finds the entry: see :meth:`_leave_out`)."""
        tool_class = None
        if entry.class_ is not None:
            target = self._import_target(entry)
            if target is None:
                return None
            try:
                tool_class = validate_tool_class(target)
            except ConfigError as error:
                self._problem(entry, f"class {entry.class_!r}: {error}", "class")
                return target if isinstance(target, type) else None
        name = entry.name or (tool_class.name if tool_class else None)
        if name is None:
            self._problem(
                entry,
                "a tool entry needs 'class: package.module:ClassName' (or 'name' and "
                "'domain' of a tool declared earlier, to change it)",
            )
            return None
        if not TOOL_NAME_PATTERN.match(name):
            self._problem(entry, f"tool name {name!r} is not lower snake case", "name")
            return tool_class
        domain = entry.domain or self._default_domain_for(owner)
        if domain is None:
            self._problem(entry, f"tool {name!r} has no 'domain' and there is no default domain")
            return tool_class
        return tool_class, name, domain

    def _leave_out(
        self, entry: ToolEntry, owner: str, tool_class: type | None, *, import_class: bool = False
    ) -> None:
        """Remember a tool entry left out for its problems, so a reference to the tool (by
        name, or a parameter autowired by its class) says so rather than "unknown tool".

        Its name and domain are found as for an entry that is kept: ``name``, else the name of
        its class (``tool_class``: what its ``class`` imported; ``import_class``: import it now,
        for an entry its file refused before it was); ``domain``, else the default one. An
        entry with neither name nor class, or with no domain, cannot be referred to.
        """
        if import_class and isinstance(entry.class_, str):
            tool_class = _quiet_import(entry.class_)
        class_name = getattr(tool_class, "name", None)
        name = entry.name or (class_name if isinstance(class_name, str) else None)
        domain = entry.domain or self._default_domain_for(owner)
        if name is not None and domain is not None:
            self._remember_left_out(qualify(domain, name), entry.source, tool_class)

    def _remember_left_out(
        self, qualified: str, source: SourceLocation | None, tool_class: type | None
    ) -> None:
        self.left_out.setdefault(qualified, LeftOutTool(qualified, source, tool_class))

    def add_left_out(self, config: PluginConfigFile, owner: str) -> None:
        """The entries a file's validation left out: its tools for :meth:`_leave_out`, its
        domains for the tools that name them."""
        for tool in config.left_out("tools"):
            if isinstance(tool, ToolEntry):
                self._leave_out(tool, owner, None, import_class=True)
        for domain in config.left_out("domains"):
            if isinstance(domain, DomainEntry):
                self.left_out_domains.setdefault(domain.name, domain.source)

    def _default_domain_for(self, owner: str) -> str | None:
        if owner == APP_OWNER:
            return self.default_domain
        own = [d.spec.name for d in self.domains.values() if d.spec.plugin == owner]
        return own[0] if len(own) == 1 else None

    def _merge_entry(
        self,
        entry: ToolEntry,
        owner: str,
        tool_class: type[ChatbotTool[Any]] | None,
        name: str,
        domain: str,
        qualified: str,
    ) -> None:
        existing = self.tools.get(qualified)
        if existing is None:
            if tool_class is None:
                self._problem(
                    entry,
                    f"no tool {qualified!r} was declared earlier to change; "
                    f"{did_you_mean(qualified, self.tools)}"
                    "add 'class: package.module:ClassName' to declare it",
                )
                return
            existing = _ToolDecl(owner, tool_class, name, domain, None, source=entry.source)
            self.tools[qualified] = existing
        elif owner != APP_OWNER and owner != existing.owner:
            new = _ToolDecl(
                owner, tool_class or existing.tool_class, name, domain, None, source=entry.source
            )
            self.problems.append(_duplicate(new, existing))
            return
        else:
            existing.source = entry.source or existing.source
        if tool_class is not None:
            existing.tool_class = tool_class
        if entry.priority is not None:
            existing.priority = entry.priority
        if entry.enabled is not None:
            existing.enabled = entry.enabled
        if entry.settings:
            existing.settings = {**existing.settings, **entry.settings}
            existing.settings_entry = entry
        existing.injections = {**existing.injections, **entry.inject}
        if entry.examples is not None:
            existing.examples = entry.examples
        if entry.own_event_loop is not None:
            existing.own_event_loop = entry.own_event_loop

    def _import_target(self, entry: ToolEntry) -> object | None:
        """What the entry's ``class`` names; None (a problem reported) if it cannot be had."""
        try:
            target: object = import_reference(entry.class_ or "")
        except UnresolvedReference as error:
            hint = f"; {_class_hint(error.module)}" if error.module is not None else ""
            self._problem(entry, f"class {error}{hint}", "class")
            return None
        return target

    # -- checks after merging ----------------------------------------------------------------

    def registry(self) -> ToolRegistry:
        registry = ToolRegistry()
        for decl in self.tools.values():
            if decl.domain not in self.domains:
                left_out_domain = decl.domain in self.left_out_domains
                self.problems.append(
                    located(decl.source, self._unknown_domain(decl), follow_on=left_out_domain)
                )
                self._remember_left_out(decl.qualified_name, decl.source, decl.tool_class)
                continue
            self._check_settings(decl)
            registration = ToolRegistration(
                short_name=decl.name,
                domain=decl.domain,
                tool_class=decl.tool_class,
                plugin=decl.owner,
                priority=decl.tool_class.priority if decl.priority is None else decl.priority,
                enabled=decl.enabled,
                settings=decl.settings,
                injections=decl.injections,
                examples=tuple(
                    decl.tool_class.examples if decl.examples is None else decl.examples
                ),
                own_event_loop=decl.own_event_loop,
                source=decl.source,
            )
            try:
                registry.add(registration)
            except ConfigError as error:
                self.problems += error.problems
                continue
            log.info(
                "tool_registered",
                tool=registration.qualified_name,
                plugin=registration.plugin,
                domain=registration.domain,
                enabled=registration.enabled,
            )
        for tool in self.left_out.values():
            registry.leave_out(tool)
        return registry

    def _unknown_domain(self, decl: _ToolDecl) -> str:
        """Why a tool's domain is not there: not declared, or its entry left out."""
        if decl.domain in self.left_out_domains:
            where = self.left_out_domains[decl.domain]
            at = f" (at {where})" if where else ""
            return (
                f"tool {decl.qualified_name!r} names domain {decl.domain!r}, whose entry{at} "
                "has problems of its own and was left out; fix those first"
            )
        known = ", ".join(sorted(self.domains)) or "none"
        return (
            f"tool {decl.qualified_name!r} names unknown domain {decl.domain!r}; "
            f"declared domains: {known}"
        )

    def _check_settings(self, decl: _ToolDecl) -> None:
        model = decl.tool_class.settings_model
        entry = decl.settings_entry
        if model is None:
            if decl.settings:
                where = entry.source if entry else decl.source
                line = entry.line_of("settings") if entry else None
                self.problems.append(
                    Problem(
                        f"tool {decl.qualified_name!r} takes no settings "
                        f"({decl.tool_class.__qualname__} has no settings_model)",
                        where.path if where else None,
                        line,
                    )
                )
            return
        try:
            validated_settings(model, decl.settings)
        except ValidationError as error:
            for loc, message in settings_problems(model, error):
                self._settings_problem(decl, loc, message)

    def _settings_problem(self, decl: _ToolDecl, loc: tuple[str | int, ...], message: str) -> None:
        """A problem of one key under a tool's ``settings``, at that key's YAML line."""
        entry = decl.settings_entry
        loc = ("settings", *loc)
        line = entry.line_of(*loc) if entry else (decl.source.line if decl.source else None)
        path = (entry.source or decl.source) if entry else decl.source
        self.problems.append(
            Problem(
                f"tool {decl.qualified_name!r}: {format_loc(loc)}: {message}",
                path.path if path else None,
                line,
            )
        )

    def check_domain_references(self, registry: ToolRegistry) -> None:
        for decl in self.domains.values():
            for reference in keyed_domain_reference_problems(decl.spec, registry):
                where = decl.location_of(*reference.key)
                self.problems.append(
                    located(where, reference.message, follow_on=reference.follow_on)
                )
            if "instructions" in decl.spec.model_fields_set:
                for problem in instruction_problems(decl.spec.instructions):
                    where = decl.location_of("instructions")
                    self.problems.append(located(where, f"domain {decl.spec.name!r}: {problem}"))
        if self.default_domain is not None and self.default_domain not in self.domains:
            known = ", ".join(sorted(self.domains)) or "none (is the domain's plugin installed?)"
            config = self.app_config
            self.problems.append(
                Problem(
                    f"default_domain {self.default_domain!r} is not a declared domain; "
                    f"declared domains: {known}",
                    config.path if config else None,
                    config.line_of("default_domain") if config and config.path else None,
                )
            )

    def orchestrator_classes(self) -> dict[str, type[DomainOrchestrator]]:
        """The orchestrator class of each domain that names one; a reference that does not
        import, or names no ``DomainOrchestrator`` subclass, is a problem where it was named."""
        classes: dict[str, type[DomainOrchestrator]] = {}
        for name, decl in self.domains.items():
            reference = decl.spec.orchestrator
            if reference is None:
                continue
            try:
                target = import_reference(reference)
            except UnresolvedReference as error:
                self.problems.append(
                    located(
                        decl.location_of("orchestrator"), f"domain {name!r}: orchestrator {error}"
                    )
                )
                continue
            if not (isinstance(target, type) and issubclass(target, DomainOrchestrator)):
                self.problems.append(
                    located(
                        decl.location_of("orchestrator"),
                        f"domain {name!r}: orchestrator {reference!r} is not a subclass of "
                        "toolwire.DomainOrchestrator; name a class that extends it",
                    )
                )
                continue
            classes[name] = target
        return classes

    def _problem(self, entry: ToolEntry | DomainEntry, message: str, *key: str) -> None:
        self.problems.append(located(_key_location(entry, *key), message))


def build(
    plugin_set: PluginSet,
    app_config: AppConfig,
    config_problems: Sequence[Problem] = (),
    wiring_problems: Callable[[ToolRegistry], list[Problem]] | None = None,
) -> Built:
    """Merge every declaration (order in the module docstring) into a registry and domains.

    ``config_problems`` are the app file's own problems (see ``parse_app_config``): they are
    reported together with everything found while building from the file's valid part, and,
    when there are any, with ``wiring_problems`` of the registry that part gave (a misspelt
    ``inject:`` is reported beside a misspelt key, not only once the key is fixed).
    """
    builder = _Builder()
    builder.problems += config_problems
    builder.default_domain = app_config.default_domain
    builder.app_config = app_config
    for spec in plugin_set.domains:
        builder.add_domain_spec(spec, plugin_set.domain_sources.get((spec.plugin, spec.name)))
    for contribution in plugin_set.tools:
        name = contribution.name or contribution.tool_class.name
        builder.add_tool(
            _ToolDecl(
                contribution.plugin,
                contribution.tool_class,
                name,
                contribution.domain,
                contribution.priority,
                source=contribution.source,
            )
        )
    for file in plugin_set.config_files:
        builder.problems += file.problems
        _add_file(builder, file.config, file.plugin)
    _add_file(builder, app_config, APP_OWNER)
    registry = builder.registry()
    builder.check_domain_references(registry)
    orchestrators = builder.orchestrator_classes()
    if builder.problems:
        wiring = wiring_problems(registry) if wiring_problems is not None else []
        raise ConfigError(in_file_order([*builder.problems, *wiring]))
    domains = {name: decl.spec for name, decl in builder.domains.items()}
    return Built(registry, domains, orchestrators)


def _key_location(entry: ToolEntry | DomainEntry, *key: str | int) -> SourceLocation | None:
    """Where a key of an entry is written (the entry's own line without a key)."""
    source = entry.source
    if source is None:
        return None
    return SourceLocation(source.path, entry.line_of(*key) if key else source.line)


def _add_file(builder: _Builder, config: PluginConfigFile, owner: str) -> None:
    for domain in config.domains:
        builder.add_domain_entry(domain, owner)
    builder.add_tool_entries(config.tools, owner)
    builder.add_left_out(config, owner)


def _quiet_import(reference: str) -> type | None:
    """The class ``reference`` names, or None: for an entry left out before its ``class`` was
    imported (its file refused it), whose import problems are not this entry's to report."""
    try:
        target = import_reference(reference)
    except UnresolvedReference:
        return None
    return target if isinstance(target, type) else None


def _class_hint(module: ModuleType) -> str:
    """How to fix a missing class name: the tool classes the module does define."""
    classes = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, ChatbotTool)
        and not inspect.isabstract(value)  # leaves out imported bases such as ChatbotTool
    )
    if not classes:
        return "it defines no tool class"
    return f"tool classes it defines: {', '.join(classes)}"


def _duplicate(new: _ToolDecl, existing: _ToolDecl) -> Problem:
    return duplicate_tool_problem(
        new.qualified_name,
        (existing.owner, existing.source or class_location(existing.tool_class)),
        (new.owner, new.source or class_location(new.tool_class)),
    )
