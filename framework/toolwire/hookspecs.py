"""The hooks a toolwire plugin implements, all in one module.

Every hook receives a ``register`` callback instead of returning values, so the host records
which plugin contributed what (provenance for ``toolwire tools`` and for collision errors).
A plugin implements the hooks it needs with ``@toolwire.hookimpl``; a misspelt hook name is an
error when the app is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from toolwire.plugins import (
        RegisterConfigFile,
        RegisterCoordinator,
        RegisterDomain,
        RegisterModel,
        RegisterTool,
    )

PROJECT_NAME = "toolwire"
"""The pluggy project name and the entry-point group plugins are found through."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_domains(register: RegisterDomain) -> None:
    """Register the plugin's domains: ``register(DomainSpec(name=..., ...))``."""


@hookspec
def register_tools(register: RegisterTool) -> None:
    """Register tool classes: ``register(ToolClass, name=None, domain=None, priority=None)``."""


@hookspec
def register_config_files(register: RegisterConfigFile) -> None:
    """Register YAML files shipped inside the plugin package: ``register(path)``."""


@hookspec
def register_coordinators(register: RegisterCoordinator) -> None:
    """Register coordinators for another plugin's domain: ``register(ToolClass, domain=...)``."""


@hookspec
def register_models(register: RegisterModel) -> None:
    """Register model providers for ``llm.provider``: ``register(name, factory)``."""
