"""Request and response bodies of the HTTP API (they make up the OpenAPI document)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from toolwire.catalogue import ToolRecord
from toolwire.message_text import MessageText
from toolwire.sessions.base import SESSION_ID_MAX_CHARS, SessionIdText

DOMAIN_MAX_CHARS = 128


class AskRequest(BaseModel):
    """A user's message: a new question, a follow-up, or the reply to a clarifying question."""

    model_config = ConfigDict(extra="forbid")

    message: MessageText = Field(
        min_length=1, description="The user's message (at most server.max_message_chars)."
    )
    domain: str | None = Field(
        default=None,
        min_length=1,
        max_length=DOMAIN_MAX_CHARS,
        description="The domain to ask; the configured default_domain when omitted.",
    )
    session_id: SessionIdText | None = Field(
        default=None,
        description="The session id of an earlier answer, to continue its conversation: a "
        "follow-up, or the reply to its clarifying question (printable ASCII, at most "
        f"{SESSION_ID_MAX_CHARS} characters).",
    )
    stream: StrictBool = Field(
        default=False,
        description="Answer with Server-Sent Events: each step as it happens, the answer's text "
        "as the model writes it, then the answer. Left out, 'Accept: text/event-stream' asks "
        "for them too.",
    )


class ErrorBody(BaseModel):
    """Every error response: a stable code, a sentence saying what to do, the request id."""

    error: str = Field(description="A stable, machine-readable code such as 'session_conflict'.")
    message: str = Field(description="What went wrong and how to fix it.")
    request_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class StreamError(ErrorBody):
    """The ``error`` event that ends a streamed answer: the error body the request would have
    answered with, and its status code."""

    type: Literal["error"] = "error"
    status: int


class DomainInfo(BaseModel):
    name: str
    description: str
    plugin: str
    prompt_types: list[str]
    tools: list[str] = Field(description="Domain-prefixed names of the domain's tools.")
    default: bool = Field(description="Whether questions without a domain go here.")


class ToolInfo(ToolRecord):
    """A tool as ``toolwire tools --json`` describes it, plus its suitability question."""

    instruction: str | None = Field(description="The suitability question, for activated tools.")


class Health(BaseModel):
    status: str
    detail: str = ""
