"""Language-model access: one purpose-level interface, several implementations.

The OpenAI gateway and its factory import ``openai`` (most of a second): they load on first use,
so ``import toolwire`` and commands that never call a model stay quick.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from toolwire.llm.base import (
    CallRecord,
    GatekeeperVerdict,
    LanguageModel,
    Purpose,
    SuitabilityQuestion,
    Usage,
    collect_calls,
    current_calls,
    record_call,
)
from toolwire.llm.guard import ModelRequestsBlockedError, ensure_model_requests_allowed

ALLOW_MODEL_REQUESTS: bool = True
"""False forbids every real model request (the gateway checks it before each call); tests switch
it off with ``toolwire.testing.block_model_requests()``."""

if TYPE_CHECKING:
    from toolwire.llm.factory import create_language_model, resolve_settings
    from toolwire.llm.gateway import OpenAIGateway

_LAZY = {
    "OpenAIGateway": "toolwire.llm.gateway",
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
    "GatekeeperVerdict",
    "LanguageModel",
    "ModelRequestsBlockedError",
    "OpenAIGateway",
    "Purpose",
    "SuitabilityQuestion",
    "Usage",
    "collect_calls",
    "create_language_model",
    "current_calls",
    "ensure_model_requests_allowed",
    "record_call",
    "resolve_settings",
]
