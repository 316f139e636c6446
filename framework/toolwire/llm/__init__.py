"""Language-model access: one purpose-level interface over small chat transports.

``LanguageModel`` is what the orchestrator asks (one method per purpose); ``ChatModel`` implements
it over any ``ChatTransport`` (send messages and an optional output schema, get text and usage);
``OpenAITransport`` is the transport to OpenAI-compatible servers and the embedded model, and
``OpenAIGateway`` the two in one object. The modules that import ``openai`` (most of a second)
load on first use, so ``import toolwire`` and commands that never call a model stay quick.
``ModelProfile`` holds what differs between model families (:mod:`toolwire.llm.profiles`).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from toolwire.llm.base import (
    CallRecord,
    FunctionChoice,
    GatekeeperVerdict,
    LanguageModel,
    Option,
    Purpose,
    SuitabilityQuestion,
    Usage,
    collect_calls,
    current_calls,
    current_domain_prompt,
    domain_prompt,
    record_call,
)
from toolwire.llm.guard import ModelRequestsBlockedError, ensure_model_requests_allowed
from toolwire.llm.profiles import CompletionLimits, ModelProfile
from toolwire.llm.transport import (
    ChatReply,
    ChatRequest,
    ChatTransport,
    FunctionCall,
    FunctionOffer,
    Message,
)

ALLOW_MODEL_REQUESTS: bool = True
"""False forbids every real model request (the gateway checks it before each call); tests switch
it off with ``toolwire.testing.block_model_requests()``."""

if TYPE_CHECKING:
    from toolwire.llm.chat_model import ChatModel
    from toolwire.llm.factory import create_language_model, resolve_settings
    from toolwire.llm.gateway import OpenAIGateway
    from toolwire.llm.openai_transport import OpenAITransport

_LAZY = {
    "ChatModel": "toolwire.llm.chat_model",
    "OpenAIGateway": "toolwire.llm.gateway",
    "OpenAITransport": "toolwire.llm.openai_transport",
    "create_language_model": "toolwire.llm.factory",
    "resolve_settings": "toolwire.llm.factory",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "CallRecord",
    "ChatModel",
    "ChatReply",
    "ChatRequest",
    "ChatTransport",
    "CompletionLimits",
    "FunctionCall",
    "FunctionChoice",
    "FunctionOffer",
    "GatekeeperVerdict",
    "LanguageModel",
    "Message",
    "ModelProfile",
    "ModelRequestsBlockedError",
    "OpenAIGateway",
    "OpenAITransport",
    "Option",
    "Purpose",
    "SuitabilityQuestion",
    "Usage",
    "collect_calls",
    "create_language_model",
    "current_calls",
    "current_domain_prompt",
    "domain_prompt",
    "ensure_model_requests_allowed",
    "record_call",
    "resolve_settings",
]
