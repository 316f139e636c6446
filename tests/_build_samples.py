"""Tool classes and plugin objects for the build-time tests (importable as ``_build_samples``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

import toolwire
from toolwire import AgentCoordinator, ChatbotTool, OrchestratorActivatedTool, TaskInfo
from toolwire import ToolExecutionResult as Result


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
    def executable_instruction(self) -> str:
        return "Does this need a plan?"

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
    version: str | None = None,
) -> object:
    """A plugin module object implementing only the hooks it needs."""
    import types

    module = types.ModuleType(name)
    if version is not None:
        module.__version__ = version  # type: ignore[attr-defined]
    if domains:

        @toolwire.hookimpl
        def register_domains(register):  # type: ignore[no-untyped-def]
            for domain in domains:
                register(toolwire.DomainSpec(name=domain, description=f"{domain} things"))

        module.register_domains = register_domains  # type: ignore[attr-defined]
    if tools:

        @toolwire.hookimpl
        def register_tools(register):  # type: ignore[no-untyped-def]
            for tool_class in tools:
                register(tool_class)

        module.register_tools = register_tools  # type: ignore[attr-defined]
    if config_files:

        @toolwire.hookimpl
        def register_config_files(register):  # type: ignore[no-untyped-def]
            for path in config_files:
                register(path)

        module.register_config_files = register_config_files  # type: ignore[attr-defined]
    if coordinators:

        @toolwire.hookimpl
        def register_coordinators(register):  # type: ignore[no-untyped-def]
            for tool_class, domain in coordinators:
                register(tool_class, domain=domain)

        module.register_coordinators = register_coordinators  # type: ignore[attr-defined]
    return module
