"""The seam between toolwire's purposes and a model provider: a chat transport.

A transport sends chat messages, optionally with the schema the reply must follow, and returns
the reply's text with the usage figures the server reported. Everything above it (which messages
each purpose sends, parsing and correcting structured output, the question's time budget, the
call records) is :class:`toolwire.llm.chat_model.ChatModel`'s and the same for every provider,
so a new provider is one small class with :meth:`ChatTransport.send` and
:meth:`ChatTransport.aclose` (streaming the answer's text through ``ChatRequest.on_text`` is
optional). A transport that can offer functions to the model (native tool calling) says so with
a ``supports_functions = True`` attribute; a tool choice by function call then offers the
candidates as functions (``ChatRequest.functions``), otherwise it asks for a constrained choice. A
transport that knows which model it asks for says so with a ``model`` attribute (a string; traces
name the requested model with it, else with ``llm.model``). The
OpenAI-compatible transport (:class:`toolwire.llm.openai_transport.OpenAITransport`) serves
OpenAI, vLLM, Ollama, llama.cpp and the embedded model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel


class Message(TypedDict):
    """One chat message in the OpenAI wire format."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class FunctionOffer:
    """A function the model may call in its reply (the provider's native tool calling)."""

    name: str
    description: str
    parameters: dict[str, Any]
    """Its arguments' JSON schema."""


@dataclass(frozen=True)
class FunctionCall:
    """A function the model called in its reply."""

    name: str
    arguments: str
    """The arguments as the model wrote them (JSON text, unchecked)."""


@dataclass(frozen=True)
class ChatRequest:
    """One model call as a transport sees it."""

    purpose: str
    """Why the call is made (``Purpose`` value): for errors and logs only."""
    messages: Sequence[Message]
    schema: type[BaseModel] | None
    """The reply must be JSON valid against this model (None: free text)."""
    max_tokens: int
    """Most tokens the reply may take."""
    timeout_s: float
    """Most seconds the call may take in all, retries included (the question's budget decides)."""
    temperature: float = 0.0
    functions: Sequence[FunctionOffer] = ()
    """Functions the model may call (``tool_choice: auto``), never with a ``schema`` and never
    streamed. Sent only to a transport whose ``supports_functions`` is True; the calls come back
    in ``ChatReply.calls``, or in the text when the server does not parse them."""
    on_text: Callable[[str], None] | None = None
    """Set for a free-text reply someone watches (the answer, streamed): a transport that can
    stream calls it with each piece of the text as it arrives, in order, and still returns the
    whole reply. One that cannot stream ignores it (the watcher then sees the text at the end)."""

    def __post_init__(self) -> None:
        if self.functions and (self.schema is not None or self.on_text is not None):
            raise ValueError("a request that offers functions has no schema and is not streamed")


@dataclass(frozen=True)
class ChatReply:
    """The model's reply and the figures the server reported for it."""

    text: str
    """The message content, or a forced function call's arguments."""
    model: str
    calls: tuple[FunctionCall, ...] = ()
    """The functions the model called, in order (only when the request offered ``functions``)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens the server reused from its cache instead of evaluating them."""
    truncated: bool = False
    """The reply stopped at ``max_tokens``."""
    finish_reason: str | None = None
    """Why the model stopped, as the server said (``stop``, ``length``, ``tool_calls``, …)."""


@runtime_checkable
class ChatTransport(Protocol):
    """Sends chat messages to one model; what a model provider implements."""

    async def send(self, request: ChatRequest) -> ChatReply:
        """The model's reply; ``ModelError`` (with ``request.purpose``) when there is none.

        Keep error messages free of secrets: never quote an API key or a server's body verbatim.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and any process the transport owns (idempotent)."""
        ...
