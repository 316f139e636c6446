"""Language-model access: one purpose-level interface, several implementations."""

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

# Imported after the flag so that modules reading it at call time find it.
from toolwire.llm.factory import create_language_model, resolve_settings  # noqa: E402
from toolwire.llm.gateway import OpenAIGateway  # noqa: E402

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
