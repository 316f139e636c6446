"""Tool classes and plugin objects for the build-time tests (importable as ``_build_samples``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import toolwire
from toolwire import AgentCoordinator, ChatbotTool, OrchestratorActivatedTool, TaskInfo
from toolwire import ToolExecutionResult as Result

WriteFile = Callable[[str, str], Path]
"""The ``write_file`` fixture: writes ``text`` to ``tmp_path / name`` and returns the path."""


class Query(BaseModel):
    text: str = ""


class LookupSettings(BaseModel):
    limit: int = Field(default=3, ge=1)


class LookupTool(ChatbotTool[Query]):
    """A plain service tool with settings; reachable only by injection."""

    settings_model = LookupSettings

    def __init__(self, settings: LookupSettings) -> None:
        self.limit = settings.limit

    def executable_instruction(self) -> str:
        return "lookup: always false"

    def find(self, text: str) -> list[str]:
        return [text.upper()] * self.limit


class AnswerTool(OrchestratorActivatedTool[Query]):
    """Receives LookupTool by type."""

    def __init__(self, lookup: LookupTool) -> None:
        self.lookup = lookup

    def executable_instruction(self) -> str:
        return "Is this a question?"

    def execute_with_result(self, params: Query, text: str) -> Result:
        return Result.context(", ".join(self.lookup.find(params.text)))


class PlanTool(OrchestratorActivatedTool[Query], AgentCoordinator):
    """A coordinator that is also a selection candidate (not ``coordinator_only``): it runs
    when chosen."""

    def executable_instruction(self) -> str:
        return "Does this need a plan?"

    def execute_with_result(self, params: Query, text: str) -> Result:
        return Result.context(params.text)

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        return task


class NotATool:
    pass


def make_plugin(
    name: str,
    *,
    domains: tuple[str, ...] = (),
    tools: tuple[type[ChatbotTool[object]], ...] = (),
    config_files: tuple[str, ...] = (),
    coordinators: tuple[tuple[type[ChatbotTool[object]], str], ...] = (),
    models: tuple[tuple[str, Callable[..., Any]], ...] = (),
    model_profiles: tuple[tuple[str, Any], ...] = (),
    selection_steps: tuple[tuple[str, Callable[..., Any]], ...] = (),
    session_stores: tuple[tuple[str, Callable[..., Any]], ...] = (),
    commands: tuple[Any, ...] = (),
    version: str | None = None,
) -> object:
    """A plugin module object implementing only the hooks it needs."""
    import types

    module = types.ModuleType(name)
    if version is not None:
        module.__version__ = version  # type: ignore[attr-defined]
    # hook name -> the (args, kwargs) of each register(...) call it makes
    hooks: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
        "register_domains": [
            ((toolwire.DomainSpec(name=domain, description=f"{domain} things"),), {})
            for domain in domains
        ],
        "register_tools": [((tool_class,), {}) for tool_class in tools],
        "register_config_files": [((path,), {}) for path in config_files],
        "register_coordinators": [
            ((tool_class,), {"domain": domain}) for tool_class, domain in coordinators
        ],
        "register_models": [((name, factory), {}) for name, factory in models],
        "register_model_profiles": [((name, profile), {}) for name, profile in model_profiles],
        "register_selection_steps": [((name, step), {}) for name, step in selection_steps],
        "register_session_stores": [((name, factory), {}) for name, factory in session_stores],
        "register_commands": [((command,), {}) for command in commands],
    }
    for hook_name, calls in hooks.items():
        if calls:
            setattr(module, hook_name, _hook(calls))
    return module


def _hook(calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Callable[[Any], None]:
    """A hook implementation making ``calls`` on its ``register`` callback (pluggy matches it
    to its hook by the module attribute it is stored under, not by the function's name)."""

    @toolwire.hookimpl
    def hook(register: Callable[..., None]) -> None:
        for args, kwargs in calls:
            register(*args, **kwargs)

    return hook


def _register_line() -> int:
    lines, first = inspect.getsourcelines(_hook)
    return first + next(n for n, line in enumerate(lines) if "register(*args" in line)


REGISTER_LINE = _register_line()
"""The line of ``make_plugin``'s hooks that calls ``register``: where its declarations are."""


def install_entry_point(site: Path, name: str, version: str, plugin: str, module: str) -> None:
    """A distribution's metadata installed into ``site`` as pip would: a dist-info directory
    with the ``toolwire`` entry point ``plugin`` naming the importable ``module``. Put ``site``
    on ``sys.path`` to install it."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[toolwire]\n{plugin} = {module}\n")


def installed_only_in(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    """Make the distributions in ``site`` the only installed ones toolwire finds (and their
    modules importable), so that a test counting or naming installed plugins does not depend on
    what else the environment has installed (a ``shop`` plugin from the plugin guide, say)."""
    monkeypatch.syspath_prepend(str(site))

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        found = metadata.distributions(path=[str(site)])
        return [point for dist in found for point in dist.entry_points if point.group == group]

    monkeypatch.setattr(metadata, "entry_points", entry_points)


def the_only_plugin(
    monkeypatch: pytest.MonkeyPatch,
    site: Path,
    plugin: str,
    module: str,
    source: str | None = None,
    *,
    version: str = "1.0",
) -> None:
    """The distribution ``toolwire-<plugin>`` installed into ``site`` (its entry point naming
    ``module``, whose ``source`` is written beside it when given) as the only installed plugin
    toolwire finds and loads (``TOOLWIRE_PLUGINS``)."""
    install_entry_point(site, f"toolwire-{plugin}", version, plugin, module)
    if source is not None:
        (site / f"{module}.py").write_text(source)
    installed_only_in(monkeypatch, site)
    monkeypatch.setenv("TOOLWIRE_PLUGINS", plugin)


def install_distribution(site: Path, name: str, version: str, plugin: str, module: str) -> None:
    """:func:`install_entry_point`, and the plugin ``module`` beside it (declaring a domain of
    the module's name)."""
    install_entry_point(site, name, version, plugin, module)
    (site / f"{module}.py").write_text(
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        f"    register(toolwire.DomainSpec(name={module!r}))\n"
    )
