"""The per-domain orchestrator of SPEC §3 and the conversation service in front of it."""

from toolwire.orchestrator.answer import Answer, TaskTrace
from toolwire.orchestrator.domain_orchestrator import DomainOrchestrator, RoundResult, Stop
from toolwire.orchestrator.service import ConversationService

__all__ = [
    "Answer",
    "ConversationService",
    "DomainOrchestrator",
    "RoundResult",
    "Stop",
    "TaskTrace",
]
