"""The earlier turns of the conversation, in the model calls of a turn that read them (seed 004).

The conversation service opens :func:`conversation_history` around a turn: the turn *has* its
earlier turns. Two calls *read* them, each inside :func:`reading_history`: the follow-up rewrite,
which makes the message stand on its own, and the answer, which must not contradict what was
said. Those calls send the earlier turns in standard chat roles right after their system
message, before their own message; the fixed system message stays first and the history only
grows at its end, so consecutive turns share their prefix. Every other call of the turn
(coordinators, the tool selection, parameters, the gatekeeper) reads the task as the
rewrite left it, as a first turn's would: the earlier turns there only dragged the old topic into
a new request (bench/conversations/LOG.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from toolwire.llm.transport import Message

_history: ContextVar[tuple[Message, ...]] = ContextVar("toolwire_history", default=())
_reading: ContextVar[bool] = ContextVar("toolwire_reading_history", default=False)


@contextmanager
def conversation_history(messages: Sequence[Message]) -> Iterator[None]:
    """Inside the block, the turn's earlier turns are ``messages`` (read by the calls made
    inside :func:`reading_history`)."""
    token = _history.set(tuple(messages))
    try:
        yield
    finally:
        _history.reset(token)


@contextmanager
def reading_history() -> Iterator[None]:
    """Inside the block, every model call carries the turn's earlier turns."""
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


@contextmanager
def apart_from_history() -> Iterator[None]:
    """Inside the block, model calls carry no earlier turns, even within
    :func:`reading_history`: a call that a history-reading call makes for its own ends (the
    compression of the answer's contexts) reads what it is given, not the conversation."""
    token = _reading.set(False)
    try:
        yield
    finally:
        _reading.reset(token)


def current_history() -> tuple[Message, ...]:
    """The earlier turns a model call made here sends: the turn's, inside
    :func:`reading_history`; none in any other call, or outside a turn."""
    return _history.get() if _reading.get() else ()


def with_history(messages: list[Message]) -> list[Message]:
    """``messages`` with the earlier turns inserted after the leading system message (at the
    start when there is none: a call that sends the task alone), for a call that reads them."""
    history = current_history()
    if not history:
        return messages
    if messages and messages[0]["role"] == "system":
        return [messages[0], *history, *messages[1:]]
    return [*history, *messages]
