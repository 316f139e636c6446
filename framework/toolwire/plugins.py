"""Plugin discovery: installed distributions' ``toolwire`` entry points plus explicit objects.

Every plugin goes through one path: registered with pluggy, checked against the hook
specifications, then asked for its contributions hook by hook. A plugin that fails to import or
raises inside a hook is reported as ``PluginInfo(name, error=...)`` and contributes nothing; the
others still load. A hook implementation that matches no specification (a misspelt hook) is a
``PluginError`` at start, as pluggy's ``check_pending()`` intends.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

import pluggy
import structlog

from toolwire import hookspecs
from toolwire.config import PluginConfigFile, parse_file
from toolwire.errors import (
    PLUGIN_FAILURES,
    ConfigError,
    PluginError,
    Problem,
    ToolDeclarationError,
    ToolwireError,
    describe,
    did_you_mean,
)
from toolwire.hookspecs import (
    Command,
    ModelFactory,
    RegisterCommand,
    RegisterConfigFile,
    RegisterCoordinator,
    RegisterDomain,
    RegisterTool,
    SessionStoreFactory,
)
from toolwire.llm.profiles import ModelProfile
from toolwire.registry import DomainSpec, SourceLocation, located
from toolwire.selection.state import StepFactory
from toolwire.tools import (
    TOOL_NAME_PATTERN,
    AgentCoordinator,
    ChatbotTool,
    validate_tool_class,
)

log = structlog.get_logger(__name__)

ENTRY_POINT_GROUP = hookspecs.PROJECT_NAME
PLUGINS_ENV = "TOOLWIRE_PLUGINS"
"""Comma-separated entry-point names: when set (even empty), only these installed plugins load.
Plugin objects passed to ``App.load(plugins=...)`` always load."""

HOOK_ORDER = (
    "register_domains",
    "register_tools",
    "register_coordinators",
    "register_config_files",
    "register_models",
    "register_model_profiles",
    "register_selection_steps",
    "register_session_stores",
    "register_commands",
)

BUILTIN_PLUGINS = (
    "toolwire.llm.providers",
    "toolwire.llm.builtin_profiles",
    "toolwire.selection.steps",
    "toolwire.selection.english",
    "toolwire.sessions.factory",
)
"""toolwire's own plugins (the OpenAI-compatible and the embedded model providers and their
profiles; the selection steps and the English language pack; the memory, SQLite and Redis session
stores): loaded before every other plugin through the same hooks, whatever ``TOOLWIRE_PLUGINS``
says, and not listed among the installed plugins. The built-in CLI commands are plugins too, loaded
by the CLI (``toolwire.cli``)."""
BUILTIN_PLUGIN_NAME = "toolwire"

DOTTED_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
"""Selection step names: lower snake case words joined by dots (a pack's or plugin's prefix)."""

COMMAND_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]*$")
"""``toolwire`` subcommand names: lower case words joined by ``-``, as typer writes them."""

T = TypeVar("T", covariant=True)


@dataclass(frozen=True)
class Named(Generic[T]):
    """Something a plugin registered under a name: a model provider (``register_models``), a
    model profile (``register_model_profiles``), a session store (``register_session_stores``)
    or a CLI command (``register_commands``)."""

    name: str
    value: T
    plugin: str
    """The plugin that registered it (``toolwire`` for the built-in ones)."""
    source: SourceLocation | None = None
    """The ``register(...)`` line."""


R = TypeVar("R")


def built_by(registered: Named[Callable[..., R]], kind: str, expected: type, *args: object) -> R:
    """What the factory registered as ``registered`` builds from ``args``.

    The factory is plugin code, called when the app first needs a model or a store, or builds
    its selection steps at load: one that raises (not a toolwire error, which says what to fix
    itself) or returns something else than ``expected`` is a ``PluginError`` at its
    ``register(...)`` line, instead of a traceback from ``App.load`` or the first question.
    ``kind``: what it builds ("session store").
    """
    source = registered.source

    def failure(message: str) -> PluginError:
        return PluginError(
            registered.plugin,
            f"the {kind} factory {registered.name!r} {message}",
            path=source.path if source else None,
            line=source.line if source else None,
        )

    try:
        built = registered.value(*args)
    except ToolwireError:
        raise
    except PLUGIN_FAILURES as error:
        raise failure(f"raised {describe(error)}") from error
    if not isinstance(built, expected):
        raise failure(f"returned {type(built).__name__}, not a {expected.__name__}")
    return built


ModelProvider = Named[ModelFactory]
"""``llm.provider: <name>`` selects it."""
SessionStoreProvider = Named[SessionStoreFactory]
"""``sessions.store: <name>`` selects it."""
ModelProfileRegistration = Named[ModelProfile]
"""``llm.profile: <name>`` selects it, or its ``models`` patterns do."""
SelectionStepProvider = Named[StepFactory]
"""``orchestrator.selection.steps: [<name>, ...]`` lists it."""
CommandRegistration = Named[Command]
"""``toolwire <name>`` runs it."""


@dataclass(frozen=True)
class PluginInfo:
    """What ``toolwire plugins`` shows for one plugin."""

    name: str
    version: str | None = None
    domains: tuple[str, ...] = ()
    error: str | None = None
    origin: SourceLocation | None = None
    """Where the error was raised in the plugin's code, when that is known."""

    def problem(self) -> Problem:
        """The failure as ``toolwire check`` reports it (only for a plugin with an error)."""
        return located(self.origin, f"plugin {self.name!r} failed to load: {self.error}")


@dataclass(frozen=True)
class ToolContribution:
    """A tool class a plugin registered through a hook (YAML may still override it)."""

    plugin: str
    tool_class: type[ChatbotTool[Any]]
    domain: str
    name: str | None = None
    priority: int | None = None
    source: SourceLocation | None = None
    """Where the tool was declared, when that is not its class (an ``mcp_servers:`` entry)."""


@dataclass(frozen=True)
class ConfigFileContribution:
    """A YAML file a plugin ships, read once at discovery (the build merges its valid part and
    reports its problems)."""

    plugin: str
    path: Path
    config: PluginConfigFile = field(default_factory=PluginConfigFile)
    problems: tuple[Problem, ...] = ()


@dataclass
class PluginSet:
    """Everything the loaded plugins contributed, in plugin load order."""

    plugins: list[PluginInfo] = field(default_factory=list)
    domains: list[DomainSpec] = field(default_factory=list)
    domain_sources: dict[tuple[str, str], SourceLocation] = field(default_factory=dict)
    """(plugin, domain name) → the ``register(DomainSpec(...))`` line that declared it."""
    tools: list[ToolContribution] = field(default_factory=list)
    config_files: list[ConfigFileContribution] = field(default_factory=list)
    models: dict[str, ModelProvider] = field(default_factory=dict)
    """Provider name → provider, the built-in ones first."""
    session_stores: dict[str, SessionStoreProvider] = field(default_factory=dict)
    """Store name → store, the built-in ones first."""
    model_profiles: dict[str, ModelProfileRegistration] = field(default_factory=dict)
    """Profile name → model profile, the built-in ones first."""
    selection_steps: dict[str, SelectionStepProvider] = field(default_factory=dict)
    """Step name → step factory, the built-in ones first."""
    commands: dict[str, CommandRegistration] = field(default_factory=dict)
    """Command name → command, the built-in ones first (only when the CLI discovers them)."""

    @property
    def failed(self) -> list[PluginInfo]:
        return [info for info in self.plugins if info.error is not None]


@dataclass
class _Candidate:
    name: str
    version: str | None
    plugin: object
    builtin: bool = False


@dataclass
class _Contribution:
    """One plugin's contributions, kept apart until all its hooks succeeded."""

    domains: list[tuple[DomainSpec, SourceLocation | None]] = field(default_factory=list)
    tools: list[tuple[type[ChatbotTool[Any]], str | None, str | None, int | None]] = field(
        default_factory=list
    )
    coordinators: list[ToolContribution] = field(default_factory=list)
    config_files: list[Path] = field(default_factory=list)
    models: list[ModelProvider] = field(default_factory=list)
    session_stores: list[SessionStoreProvider] = field(default_factory=list)
    model_profiles: list[ModelProfileRegistration] = field(default_factory=list)
    selection_steps: list[SelectionStepProvider] = field(default_factory=list)
    commands: list[CommandRegistration] = field(default_factory=list)


def plugin_name(plugin: object) -> str:
    """The name an explicit plugin object is registered under (module or class name)."""
    if isinstance(plugin, ModuleType | type):
        return plugin.__name__
    return type(plugin).__name__


def discover(
    plugins: Sequence[object] = (),
    *,
    load_entry_points: bool = True,
    environ: Mapping[str, str] | None = None,
    builtins: Sequence[str] = BUILTIN_PLUGINS,
    hooks: Sequence[str] = HOOK_ORDER,
    log_failures: bool = True,
) -> PluginSet:
    """Load toolwire's own plugins (``builtins``, modules), explicit plugin objects, then
    installed entry points, and collect what they contribute through ``hooks`` (the CLI asks
    only for ``register_commands``).

    Each plugin that fails to load is listed in the result and logged as ``plugin_failed``
    (once per process); with ``log_failures=False`` only listed, and not counted as logged, so
    a later discovery (the app's, after the command line found its commands) logs it.

    One plugin object reached twice (passed to ``App.load`` and installed too, or one module
    under two entry-point names) is one plugin: it loads once, under the first of its names in
    that order, and the later name is only logged (``plugin_already_loaded``). pluggy takes an
    object under one name only, and loading it twice would make its registrations clash with
    themselves."""
    environ = os.environ if environ is None else environ
    result = PluginSet()
    candidates = [
        _Candidate(module, None, importlib.import_module(module), builtin=True)
        for module in builtins
    ]
    candidates += [_Candidate(plugin_name(p), getattr(p, "__version__", None), p) for p in plugins]
    if load_entry_points:
        candidates += _load_entry_points(result, _allowed_names(environ), log_failures)

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    registered: list[_Candidate] = []
    for candidate in candidates:
        if pm.is_registered(candidate.plugin):
            first = pm.get_name(candidate.plugin)
            log.info("plugin_already_loaded", plugin=candidate.name, loaded_as=first)
            continue
        if pm.has_plugin(candidate.name):
            problem = "another plugin has the same name"
            _fail(result, candidate.name, candidate.version, problem, log_failure=log_failures)
            continue
        try:
            pm.register(candidate.plugin, name=candidate.name)
        except pluggy.PluginValidationError as error:
            detail = str(error).replace("\n", "; ")
            raise PluginError(
                candidate.name,
                f"{detail}; fix the hook implementation",
                **_function_location(_mismatched_hook(candidate.plugin)),
            ) from error
        registered.append(candidate)
    _check_hook_names(pm)

    for candidate in registered:
        _collect(pm, candidate, result, hooks, log_failures)
    return result


def _mismatched_hook(plugin: object) -> object:
    """The plugin's hook implementation that takes an argument its hook does not pass (what
    pluggy refuses at registration), for the error's location."""
    for name in HOOK_ORDER:
        function = getattr(plugin, name, None)
        if callable(function):
            given = set(inspect.signature(getattr(hookspecs, name)).parameters)
            if set(inspect.signature(function).parameters) - given:
                return function
    return None


def _allowed_names(environ: Mapping[str, str]) -> set[str] | None:
    value = environ.get(PLUGINS_ENV)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


def _load_entry_points(
    result: PluginSet, allowed: set[str] | None, log_failures: bool
) -> list[_Candidate]:
    loaded: list[_Candidate] = []
    by_name: dict[str, list[metadata.EntryPoint]] = {}
    installed = metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry_point in installed:
        if allowed is None or entry_point.name in allowed:
            by_name.setdefault(entry_point.name, []).append(entry_point)
    for name, entry_points in by_name.items():
        entry_point = entry_points[0]
        version = entry_point.dist.version if entry_point.dist is not None else None
        others = [other for other in entry_points[1:] if not _same_plugin(entry_point, other)]
        if others:
            problem = _collision(name, [entry_point, *others])
            _fail(result, name, version, problem, log_failure=log_failures)
            continue
        try:
            plugin = entry_point.load()
        except PLUGIN_FAILURES as error:  # any import-time failure (sys.exit too) is the plugin's
            problem = f"failed to import: {describe(error)}"
            module = entry_point.module
            _fail(result, name, version, problem, error, module, log_failure=log_failures)
            continue
        loaded.append(_Candidate(name, version, plugin))
    names = ", ".join(sorted({point.name for point in installed})) or "none"
    for name in sorted((allowed or set()) - set(by_name)):
        problem = f"named in {PLUGINS_ENV} but no installed plugin has this name"
        _fail(result, name, None, f"{problem}; installed: {names}", log_failure=log_failures)
    return loaded


def _same_plugin(first: metadata.EntryPoint, second: metadata.EntryPoint) -> bool:
    """One distribution seen twice (on two path entries): the same plugin, not a collision."""
    if first.dist is not None and second.dist is not None:
        return bool(first.dist.name == second.dist.name and first.value == second.value)
    return first.value == second.value


def _collision(name: str, entry_points: list[metadata.EntryPoint]) -> str:
    """Two distributions claim one plugin name: neither loads, and both are named."""
    owners = [
        f"{point.dist.name} {point.dist.version} ({point.value})"
        if point.dist is not None
        else f"an unnamed distribution ({point.value})"
        for point in entry_points
    ]
    return (
        f"{len(owners)} installed distributions provide the plugin {name!r}: "
        f"{' and '.join(owners)}; none of them was loaded. Uninstall all but one, or rename "
        f"its entry point (the [project.entry-points.{ENTRY_POINT_GROUP}] table of its "
        "pyproject.toml)"
    )


def _check_hook_names(pm: pluggy.PluginManager) -> None:
    """A hook implementation with no specification is a misspelt hook: fail now, clearly."""
    known = list(HOOK_ORDER)
    for hook_name, caller in vars(pm.hook).items():
        if not isinstance(caller, pluggy.HookCaller) or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook:
                continue
            hint = did_you_mean(hook_name, known)
            raise PluginError(
                impl.plugin_name,
                f"implements unknown hook {hook_name!r}; {hint}"
                f"the toolwire hooks are {', '.join(known)}",
                **_function_location(impl.function),
            )
    pm.check_pending()


def _collect(
    pm: pluggy.PluginManager,
    candidate: _Candidate,
    result: PluginSet,
    hooks: Sequence[str],
    log_failures: bool,
) -> None:
    contribution = _Contribution()
    owner = BUILTIN_PLUGIN_NAME if candidate.builtin else candidate.name
    callbacks: dict[str, Callable[..., None]] = {
        "register_domains": _domain_registrar(contribution, candidate.name),
        "register_tools": _tool_registrar(contribution),
        "register_coordinators": _coordinator_registrar(contribution, candidate.name),
        "register_config_files": _config_file_registrar(contribution, candidate.plugin),
        "register_models": _named_registrar(
            "register_models",
            ("model provider", "provider"),
            owner,
            result.models,
            contribution.models,
        ),
        "register_model_profiles": _named_registrar(
            "register_model_profiles",
            ("model profile", "profile"),
            owner,
            result.model_profiles,
            contribution.model_profiles,
            value=ModelProfile,
        ),
        "register_selection_steps": _named_registrar(
            "register_selection_steps",
            ("selection step", "step"),
            owner,
            result.selection_steps,
            contribution.selection_steps,
            dotted=True,
        ),
        "register_session_stores": _named_registrar(
            "register_session_stores",
            ("session store", "store"),
            owner,
            result.session_stores,
            contribution.session_stores,
        ),
        "register_commands": _command_registrar(owner, result.commands, contribution.commands),
    }
    try:
        for hook_name in (name for name in HOOK_ORDER if name in hooks):
            caller: pluggy.HookCaller = getattr(pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin_name != candidate.name:
                    continue
                if impl.hookwrapper or impl.wrapper:
                    raise PluginError(candidate.name, f"{hook_name} may not be a hook wrapper")
                kwargs = {"register": callbacks[hook_name]}
                impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
        tools = _place_tools(contribution, candidate.name)
    except PLUGIN_FAILURES as error:  # a plugin's bug (sys.exit too) must not stop the others
        _fail(
            result, candidate.name, candidate.version, f"raised {describe(error)}", error,
            _module_name(candidate.plugin), log_failure=log_failures,
        )
        pm.unregister(name=candidate.name)
        return
    for spec, source in contribution.domains:
        result.domains.append(spec)
        if source is not None:
            result.domain_sources[(candidate.name, spec.name)] = source
    result.tools += tools + contribution.coordinators
    result.models.update((provider.name, provider) for provider in contribution.models)
    result.session_stores.update((store.name, store) for store in contribution.session_stores)
    result.model_profiles.update((each.name, each) for each in contribution.model_profiles)
    result.selection_steps.update((step.name, step) for step in contribution.selection_steps)
    result.commands.update((command.name, command) for command in contribution.commands)
    if candidate.builtin:
        return
    files = [_read_shipped_file(candidate.name, path) for path in contribution.config_files]
    result.config_files += files
    declared = [spec.name for spec, _ in contribution.domains]
    declared += [entry.name for file in files for entry in file.config.domains]
    domains = tuple(dict.fromkeys(declared))
    result.plugins.append(PluginInfo(candidate.name, candidate.version, domains))
    log.info(
        "plugin_loaded",
        plugin=candidate.name,
        version=candidate.version,
        domains=list(domains),
        tools=len(tools) + len(contribution.coordinators),
    )


def _read_shipped_file(plugin: str, path: Path) -> ConfigFileContribution:
    """Read a shipped YAML file once; its problems wait for the build, which reports them."""
    try:
        config, problems = parse_file(path, PluginConfigFile)
    except ConfigError as error:  # unreadable: nothing of it is merged
        return ConfigFileContribution(plugin, path, problems=tuple(error.problems))
    return ConfigFileContribution(plugin, path, config, tuple(problems))


def _place_tools(contribution: _Contribution, plugin: str) -> list[ToolContribution]:
    """A tool registered without a domain goes to the plugin's only domain."""
    placed = []
    for tool_class, name, domain, priority in contribution.tools:
        if domain is None:
            if len(contribution.domains) != 1:
                raise ToolDeclarationError(
                    f"tool {tool_class.__qualname__} was registered without a domain and the "
                    f"plugin declares {len(contribution.domains)} domains; pass domain=..."
                )
            domain = contribution.domains[0][0].name
        placed.append(ToolContribution(plugin, tool_class, domain, name, priority))
    return placed


def _domain_registrar(contribution: _Contribution, plugin: str) -> RegisterDomain:
    def register(domain: DomainSpec) -> None:
        if not isinstance(domain, DomainSpec):
            raise TypeError(f"register_domains expects a toolwire DomainSpec, got {domain!r}")
        _check_name("register_domains", "DomainSpec.name", domain.name)
        spec = domain.model_copy(update={"plugin": plugin})
        contribution.domains.append((spec, _caller_location()))

    return register


def _caller_location() -> SourceLocation | None:
    """The line of the plugin's code that called a ``register`` callback."""
    frame = sys._getframe(2)  # 0: this function, 1: the callback, 2: its caller
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno)


def _check_registration(hook: str, *, name: object, domain: object, priority: object) -> None:
    """Keyword arguments of a tool registration, as strictly as the YAML keys they mirror.

    Checked when the hook calls ``register``: a wrong type fails the plugin at load, located at
    the registering line, instead of the first question that sorts or names the tool.
    """
    if name is not None:
        _check_name(hook, "name", name)
    if domain is not None:
        _check_name(hook, "domain", domain)
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ToolDeclarationError(
            f"{hook}: priority={priority!r} is a {type(priority).__name__}; pass a whole "
            "number (lower runs first), e.g. priority=5"
        )


def _check_name(hook: str, key: str, value: object) -> None:
    if not isinstance(value, str) or not TOOL_NAME_PATTERN.match(value):
        raise ToolDeclarationError(
            f"{hook}: {key}={value!r} is not a lower snake case name ([a-z][a-z0-9_]*)"
        )


def _check_dotted_name(hook: str, value: object) -> None:
    if not isinstance(value, str) or not DOTTED_NAME_PATTERN.match(value):
        raise ToolDeclarationError(
            f"{hook}: name={value!r} is not a dotted lower snake case name "
            "(e.g. 'confirm' or 'office.no_weekends')"
        )


def _tool_registrar(contribution: _Contribution) -> RegisterTool:
    def register(
        tool_class: type[ChatbotTool[Any]],
        *,
        name: str | None = None,
        domain: str | None = None,
        priority: int | None = None,
    ) -> None:
        validated = validate_tool_class(tool_class, where="register_tools")
        _check_registration("register_tools", name=name, domain=domain, priority=priority)
        contribution.tools.append((validated, name, domain, priority))

    return register


def _coordinator_registrar(contribution: _Contribution, plugin: str) -> RegisterCoordinator:
    def register(
        tool_class: type[ChatbotTool[Any]],
        *,
        domain: str,
        name: str | None = None,
        priority: int | None = None,
    ) -> None:
        validated = validate_tool_class(tool_class, where="register_coordinators")
        _check_registration("register_coordinators", name=name, domain=domain, priority=priority)
        if not issubclass(validated, AgentCoordinator):
            raise ToolDeclarationError(
                f"{validated.__qualname__} was registered as a coordinator but does not "
                "implement toolwire.AgentCoordinator; register it with register_tools instead"
            )
        contribution.coordinators.append(
            ToolContribution(plugin, validated, domain, name, priority)
        )

    return register


def _named_registrar(
    hook: str,
    kind: tuple[str, str],
    plugin: str,
    registered: Mapping[str, Named[Any]],
    contributed: list[Named[Any]],
    *,
    dotted: bool = False,
    value: type | None = None,
) -> Callable[[str, Any], None]:
    """``register(name, factory)`` of a hook that registers factories by name: a lower snake
    case name (``dotted``: lower snake case words joined by dots) nobody registered before, and a
    callable (``value``: an instance of that class instead). ``kind``: what is registered, in
    full and in short (``("model provider", "provider")``)."""

    def register(name: str, factory: Any) -> None:
        if dotted:
            _check_dotted_name(hook, name)
        else:
            _check_name(hook, "name", name)
        if value is not None and not isinstance(factory, value):
            raise ToolDeclarationError(
                f"{hook}: {kind[1]} {name!r} must be a {value.__qualname__}, got {factory!r}"
            )
        if value is None and not callable(factory):
            raise ToolDeclarationError(
                f"{hook}: the factory of {kind[1]} {name!r} must be callable, got {factory!r}"
            )
        _check_untaken(hook, kind, name, registered, contributed)
        contributed.append(Named(name, factory, plugin, _caller_location()))

    return register


def _command_registrar(
    plugin: str,
    registered: Mapping[str, CommandRegistration],
    contributed: list[CommandRegistration],
) -> RegisterCommand:
    def register(command: Command, *, name: str | None = None) -> None:
        import typer  # the CLI's own dependency: only the CLI asks for commands

        if isinstance(command, typer.Typer):
            name = name or command.info.name
            if not isinstance(name, str):
                raise ToolDeclarationError(
                    "register_commands: a typer.Typer group needs a name: "
                    "register(group, name='...') or typer.Typer(name='...')"
                )
        elif callable(command):
            name = name or getattr(command, "__name__", "").replace("_", "-")
        else:
            raise ToolDeclarationError(
                f"register_commands: {command!r} is neither a function nor a typer.Typer"
            )
        if not isinstance(name, str) or not COMMAND_NAME_PATTERN.match(name):
            raise ToolDeclarationError(
                f"register_commands: name={name!r} is not a command name (lower case words "
                "joined by '-', e.g. 'export-trace')"
            )
        _check_untaken("register_commands", ("command", "command"), name, registered, contributed)
        contributed.append(Named(name, command, plugin, _caller_location()))

    return register


def _check_untaken(
    hook: str,
    kind: tuple[str, str],
    name: str,
    registered: Mapping[str, Named[Any]],
    contributed: Sequence[Named[Any]],
) -> None:
    earlier = registered.get(name) or next(
        (each for each in contributed if each.name == name), None
    )
    if earlier is not None:
        raise ToolDeclarationError(
            f"{hook}: the {kind[0]} {name!r} is already registered by "
            f"{_owner(earlier, kind[1])}; "
            "register yours under another name"
        )


def _owner(earlier: Named[Any], noun: str) -> str:
    where = f" at {earlier.source}" if earlier.source else ""
    if earlier.plugin == BUILTIN_PLUGIN_NAME:
        return f"toolwire itself (a built-in {noun}{where})"
    return f"plugin {earlier.plugin!r}{where}"


def _config_file_registrar(contribution: _Contribution, plugin: object) -> RegisterConfigFile:
    def register(path: str | os.PathLike[str]) -> None:
        resolved = Path(path)
        if not resolved.is_absolute():
            resolved = _package_dir(plugin) / resolved
        if not resolved.is_file():
            raise FileNotFoundError(f"register_config_files: no file at {resolved}")
        contribution.config_files.append(resolved)

    return register


def _package_dir(plugin: object) -> Path:
    """Relative YAML paths are relative to the plugin module's own directory."""
    module_file = getattr(plugin, "__file__", None)
    if module_file is None:
        module = getattr(plugin, "__module__", None)
        module_file = getattr(sys.modules.get(module or ""), "__file__", None)
    return Path(module_file).parent if module_file else Path.cwd()


def _fail(
    result: PluginSet,
    name: str,
    version: str | None,
    error: str,
    cause: BaseException | None = None,
    module: str | None = None,
    *,
    log_failure: bool = True,
) -> None:
    origin = _origin(cause, _own_code(module)) if cause is not None else None
    result.plugins.append(PluginInfo(name, version, (), error, origin))
    if not log_failure or (name, error) in _LOGGED_FAILURES:
        return
    _LOGGED_FAILURES.add((name, error))
    log.error(  # the app runs without the plugin: an operator must see it at any log level
        "plugin_failed", plugin=name, version=version, error=error, origin=origin and str(origin)
    )


_LOGGED_FAILURES: set[tuple[str, str]] = set()
"""(plugin, error) already logged as ``plugin_failed``: each failure is logged once per process
(the app loaded twice, ``toolwire plugins`` then ``App.load``). Every ``PluginSet`` still lists
it, so ``toolwire check`` and ``toolwire plugins`` show it. The command line's discovery of its
commands logs none (``discover(log_failures=False)``): the command says them, the serving ones
in their JSON log, configured only then."""


_HOST_DIRS = tuple(
    str(Path(module.__file__ or "").parent) + os.sep for module in (importlib, pluggy, hookspecs)
)
"""toolwire's, pluggy's and the import system's own code: never where a plugin's error is."""


def _module_name(plugin: object) -> str | None:
    """The name of the module a plugin object is, or is defined in."""
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    return getattr(plugin, "__module__", None)


def _own_code(module: str | None) -> str | None:
    """The plugin's own code, as a path prefix: the directory of the top-level package holding
    ``module``, or the file of a lone module; None when it is not known (not imported, no file)."""
    top = sys.modules.get((module or "").partition(".")[0])
    path = getattr(top, "__file__", None)
    if not path:
        return None
    return str(Path(path).parent) + os.sep if hasattr(top, "__path__") else path


def _origin(error: BaseException, own_code: str | None = None) -> SourceLocation | None:
    """Where a plugin's error was raised: a syntax error's own line, else the innermost frame in
    the plugin's own code (so its line, not the library that refused its argument), else the
    innermost frame outside the host code (the registering line, not toolwire's check)."""
    if isinstance(error, SyntaxError) and error.filename:
        return SourceLocation(error.filename, error.lineno)
    own = outside = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        path = frame.f_code.co_filename
        if not path.startswith("<") and not path.startswith(_HOST_DIRS):
            outside = SourceLocation(path, line)
            if own_code and path.startswith(own_code):
                own = outside
    return own or outside


def _function_location(function: object) -> dict[str, Any]:
    """``path``/``line`` keyword arguments for a PluginError about a hook implementation."""
    code = getattr(function, "__code__", None)
    return {"path": code.co_filename, "line": code.co_firstlineno} if code else {}
