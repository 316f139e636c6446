"""A plugin whose domain names its own orchestrator class (``orchestrator:`` in YAML), which
overrides ``get_deep_fallback_tool``; and a scripted model provider, so that ``toolwire ask``
runs it offline. Used by ``test_extension_hooks.py`` from ``App``, the server and the CLI."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import toolwire
from toolwire import ChatbotTool, DomainOrchestrator, DomainSpec, OrchestratorActivatedTool
from toolwire import ToolExecutionResult as Result
from toolwire.hookspecs import RegisterDomain, RegisterModel, RegisterTool
from toolwire.testing import ScriptedModel

FOUND = "Found by the deep fallback the orchestrator chose."


class NoParams(BaseModel):
    pass


class Shelf(OrchestratorActivatedTool[NoParams]):
    """The domain's retrieval tool: it finds nothing."""

    coordinator_only = True

    def executable_instruction(self) -> str:
        return "shelf: always false"

    def execute_with_result(self, params: NoParams, text: str) -> Result:
        return Result.context("")


class Archive(OrchestratorActivatedTool[NoParams]):
    """The deep search only ``ArchiveOrchestrator`` knows: the domain's YAML names none."""

    coordinator_only = True

    def executable_instruction(self) -> str:
        return "archive: always false"

    def execute_with_result(self, params: NoParams, text: str) -> Result:
        return Result.as_guaranteed_context(FOUND)


class ArchiveOrchestrator(DomainOrchestrator):
    """Deep-searches with ``library.archive`` for every prompt type, in code."""

    def get_deep_fallback_tool(self, prompt_type: str) -> ChatbotTool[Any] | None:
        return self.tool("archive")


class NotAnOrchestrator:
    pass


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    register(DomainSpec(name="library", rag_tool="shelf"))


@toolwire.hookimpl
def register_tools(register: RegisterTool) -> None:
    register(Shelf)
    register(Archive)


@toolwire.hookimpl
def register_models(register: RegisterModel) -> None:
    register(
        "scripted",
        lambda settings, environ, profile: (
            ScriptedModel().on_gatekeeper(True).on_answer("Composed.")
        ),
    )
