"""toolwire: build domain chatbots out of tools.

Importing toolwire loads no plugin and reads no file; ``App.load()`` builds everything once.
"""

from toolwire.app import App
from toolwire.container import ToolContainer
from toolwire.context_buffer import ContextBuffer, PageRef, PromptAndContext
from toolwire.errors import (
    AmbiguousToolError,
    ConfigError,
    ModelError,
    PluginError,
    SessionConflictError,
    SessionError,
    SessionStoreUnavailableError,
    TimeBudgetSpentError,
    ToolDeclarationError,
    ToolNameError,
    ToolwireError,
    UnknownDomainError,
    UnknownSessionError,
    UnknownToolError,
    UnreadableSessionError,
    WiringError,
)
from toolwire.hookspecs import hookimpl
from toolwire.orchestrator import Answer, ConversationService, DomainOrchestrator
from toolwire.registry import DomainSpec
from toolwire.run_state import Clarification, SubtaskDecision, TaskStatus
from toolwire.task import (
    AGENT_COORDINATOR_MARKER,
    ExecutionText,
    TaskInfo,
    extract_coordinator_original,
    extract_coordinator_task,
)
from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    ClarifiableContextConsumerTool,
    ContextConsumerTool,
    OrchestratorActivatedTool,
    ToolExecutionResult,
)

__all__ = [
    "AGENT_COORDINATOR_MARKER",
    "AgentCoordinator",
    "AmbiguousToolError",
    "Answer",
    "App",
    "ChatbotTool",
    "ClarifiableContextConsumerTool",
    "Clarification",
    "ConfigError",
    "ContextBuffer",
    "ContextConsumerTool",
    "ConversationService",
    "DomainOrchestrator",
    "DomainSpec",
    "ExecutionText",
    "ModelError",
    "OrchestratorActivatedTool",
    "PageRef",
    "PluginError",
    "PromptAndContext",
    "SessionConflictError",
    "SessionError",
    "SessionStoreUnavailableError",
    "SubtaskDecision",
    "TaskInfo",
    "TaskStatus",
    "TimeBudgetSpentError",
    "ToolContainer",
    "ToolDeclarationError",
    "ToolExecutionResult",
    "ToolNameError",
    "ToolwireError",
    "UnknownDomainError",
    "UnknownSessionError",
    "UnknownToolError",
    "UnreadableSessionError",
    "WiringError",
    "extract_coordinator_original",
    "extract_coordinator_task",
    "hookimpl",
]
