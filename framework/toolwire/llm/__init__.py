"""Language-model access: one purpose-level interface, several implementations."""

from toolwire.llm.base import (
    CallRecord,
    GatekeeperVerdict,
    LanguageModel,
    Purpose,
    SuitabilityQuestion,
    Usage,
    collect_calls,
    record_call,
)

__all__ = [
    "CallRecord",
    "GatekeeperVerdict",
    "LanguageModel",
    "Purpose",
    "SuitabilityQuestion",
    "Usage",
    "collect_calls",
    "record_call",
]
