"""The hooks a toolwire plugin implements, all in one module.

Every hook receives a ``register`` callback instead of returning values, so the host records
which plugin contributed what (provenance for ``toolwire tools`` and for collision errors).
A plugin implements the hooks it needs with ``@toolwire.hookimpl``; a misspelt hook name is an
error when the app is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import pluggy

if TYPE_CHECKING:
    from collections.abc import Mapping

    import typer

    from toolwire.llm.base import LanguageModel
    from toolwire.llm.profiles import ModelProfile
    from toolwire.registry import DomainSpec
    from toolwire.selection.state import StepFactory
    from toolwire.sessions.base import SessionStore
    from toolwire.settings import LLMSettings, SessionSettings
    from toolwire.tools import ChatbotTool

PROJECT_NAME = "toolwire"
"""The pluggy project name and the entry-point group plugins are found through."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

# -- the register callbacks the hooks receive ------------------------------------------------


class RegisterDomain(Protocol):
    def __call__(self, domain: DomainSpec) -> None: ...


class RegisterTool(Protocol):
    def __call__(
        self,
        tool_class: type[ChatbotTool[Any]],
        *,
        name: str | None = None,
        domain: str | None = None,
        priority: int | None = None,
    ) -> None: ...


class RegisterCoordinator(Protocol):
    def __call__(
        self,
        tool_class: type[ChatbotTool[Any]],
        *,
        domain: str,
        name: str | None = None,
        priority: int | None = None,
    ) -> None: ...


class RegisterConfigFile(Protocol):
    def __call__(self, path: str | os.PathLike[str]) -> None: ...


class ModelFactory(Protocol):
    """Builds a provider's model from the ``llm`` settings (environment overrides applied), the
    environment (where API keys are read) and the model's resolved profile (its traits: limits,
    structured output, window); nothing should be contacted before the first call."""

    def __call__(
        self, settings: LLMSettings, environ: Mapping[str, str], profile: ModelProfile
    ) -> LanguageModel: ...


class RegisterModel(Protocol):
    def __call__(self, name: str, factory: ModelFactory) -> None: ...


class RegisterModelProfile(Protocol):
    def __call__(self, name: str, profile: ModelProfile) -> None: ...


class RegisterSelectionStep(Protocol):
    def __call__(self, name: str, factory: StepFactory) -> None: ...


class SessionStoreFactory(Protocol):
    """Builds a store from the ``sessions`` settings; it should connect at its first operation."""

    def __call__(self, settings: SessionSettings) -> SessionStore: ...


class RegisterSessionStore(Protocol):
    def __call__(self, name: str, factory: SessionStoreFactory) -> None: ...


Command: TypeAlias = "Callable[..., Any] | typer.Typer"
"""A ``toolwire`` subcommand: a function typer turns into a command (its parameters are the
command's arguments and options), or a ``typer.Typer`` of several under one name."""


class RegisterCommand(Protocol):
    def __call__(self, command: Command, *, name: str | None = None) -> None: ...


# -- the hooks ---------------------------------------------------------------------------------


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


@hookspec
def register_model_profiles(register: RegisterModelProfile) -> None:
    """Register model profiles for ``llm.profile``: ``register(name, ModelProfile(...))``."""


@hookspec
def register_selection_steps(register: RegisterSelectionStep) -> None:
    """Register tool-selection steps by name, for ``orchestrator.selection.steps``."""


@hookspec
def register_session_stores(register: RegisterSessionStore) -> None:
    """Register session stores for ``sessions.store``: ``register(name, factory)``."""


@hookspec
def register_commands(register: RegisterCommand) -> None:
    """Register ``toolwire`` subcommands: ``register(function_or_typer, name=None)``."""
