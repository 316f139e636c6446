"""toolwire: build domain chatbots out of tools.

Importing toolwire loads no plugin and reads no file; ``App.load()`` builds everything once.
"""

from toolwire.errors import (
    AmbiguousToolError,
    ConfigError,
    ModelError,
    PluginError,
    SessionConflictError,
    SessionError,
    ToolDeclarationError,
    ToolNameError,
    ToolwireError,
    UnknownSessionError,
    UnknownToolError,
    WiringError,
)
from toolwire.task import (
    AGENT_COORDINATOR_MARKER,
    Clarification,
    ContextBuffer,
    PromptAndContext,
    SubtaskDecision,
    TaskInfo,
    TaskStatus,
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
    "ChatbotTool",
    "Clarification",
    "ClarifiableContextConsumerTool",
    "ConfigError",
    "ContextBuffer",
    "ContextConsumerTool",
    "ModelError",
    "OrchestratorActivatedTool",
    "PluginError",
    "PromptAndContext",
    "SessionConflictError",
    "SessionError",
    "SubtaskDecision",
    "TaskInfo",
    "TaskStatus",
    "ToolDeclarationError",
    "ToolExecutionResult",
    "ToolNameError",
    "ToolwireError",
    "UnknownSessionError",
    "UnknownToolError",
    "WiringError",
    "extract_coordinator_original",
    "extract_coordinator_task",
]
