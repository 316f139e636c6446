"""Build a registry and an orchestrator from tool instances, without plugins, YAML or a container.

For unit tests of tools and coordinators that need the real orchestration around them::

    service = conversation_for(DomainSpec(name="demo"), LookupTool(), model=scripted_model)
    answer = await service.ask("…")
"""

from __future__ import annotations

from typing import Any

from toolwire.llm.base import LanguageModel
from toolwire.orchestrator import ConversationService, DomainOrchestrator
from toolwire.registry import DomainSpec, ToolRegistration, ToolRegistry
from toolwire.sessions import MemorySessionStore, SessionStore
from toolwire.settings import OrchestratorSettings, SessionSettings
from toolwire.tools import ChatbotTool, validate_tool_class


def registry_of(
    domain: str, *tools: ChatbotTool[Any]
) -> tuple[ToolRegistry, dict[str, ChatbotTool[Any]]]:
    """Register tool instances in registration order; a tool whose ``domain`` is already set
    keeps it, the others join ``domain``. Returns the registry and prefixed name → instance."""
    registry = ToolRegistry()
    instances: dict[str, ChatbotTool[Any]] = {}
    for tool in tools:
        tool.domain = tool.domain or domain
        registration = ToolRegistration(
            short_name=tool.name,
            domain=tool.domain,
            tool_class=validate_tool_class(type(tool)),
            plugin="test",
            priority=tool.priority,
        )
        registry.add(registration)
        instances[registration.qualified_name] = tool
    return registry, instances


def orchestrator_for(
    domain: DomainSpec,
    *tools: ChatbotTool[Any],
    model: LanguageModel,
    settings: OrchestratorSettings | None = None,
) -> DomainOrchestrator:
    """A :class:`DomainOrchestrator` over the given tool instances."""
    registry, instances = registry_of(domain.name, *tools)
    return DomainOrchestrator(domain, registry, instances, model, settings)


def conversation_for(
    domain: DomainSpec,
    *tools: ChatbotTool[Any],
    model: LanguageModel,
    store: SessionStore | None = None,
    settings: OrchestratorSettings | None = None,
    sessions: SessionSettings | None = None,
) -> ConversationService:
    """A :class:`ConversationService` for one domain over the given tools (in-memory sessions
    unless ``store`` is given; ``sessions``: the conversations' bounds)."""
    registry, instances = registry_of(domain.name, *tools)
    return ConversationService(
        registry=registry,
        domains={domain.name: domain},
        tools=instances,
        llm=model,
        store=store or MemorySessionStore(),
        default_domain=domain.name,
        settings=settings,
        sessions=sessions,
    )
