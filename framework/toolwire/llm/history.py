"""The earlier turns of the conversation, in every model call of a turn (seed 004).

The conversation service opens :func:`conversation_history` around a turn; every call the turn
makes (the orchestrator's, coordinators' and tools' alike) then sends the earlier turns in
standard chat roles right after its system message, before its own message. The fixed system
message stays first and the history only grows at its end, so consecutive calls and consecutive
turns share their prefix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from toolwire.llm.transport import Message

_history: ContextVar[tuple[Message, ...]] = ContextVar("toolwire_history", default=())


@contextmanager
def conversation_history(messages: Sequence[Message]) -> Iterator[None]:
    """Inside the block, every model call carries ``messages`` after its system message."""
    token = _history.set(tuple(messages))
    try:
        yield
    finally:
        _history.reset(token)


def current_history() -> tuple[Message, ...]:
    """The earlier turns' messages of the turn being answered (empty outside one)."""
    return _history.get()


def with_history(messages: list[Message]) -> list[Message]:
    """``messages`` with the earlier turns inserted after the leading system message (at the
    start when there is none: a call that sends the task alone)."""
    history = _history.get()
    if not history:
        return messages
    if messages and messages[0]["role"] == "system":
        return [messages[0], *history, *messages[1:]]
    return [*history, *messages]
