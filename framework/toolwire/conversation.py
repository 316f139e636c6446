"""A conversation: the turns a chatbot remembers between messages (issue 32).

Every answer belongs to a conversation, stored with its session (``sessions.base``) so that any
replica can take the next turn. A turn keeps the user's message, what toolwire made of it (the
message rewritten to stand on its own, when it depended on earlier turns), the answer or the
clarifying question, and what each of its tools found. A clarifying question still waiting keeps
its task tree in ``pending``.

The model reads the turns before in standard chat roles, right after the fixed system message
(:func:`history_messages`): the history only grows at its end, so each turn's prompts begin with
the previous turn's, and a server's prompt cache evaluates that part once. Old turns compressed
once become a :class:`TurnSummary`, marked and kept, never compressed again: when the history
passes its budget the oldest summary is forgotten whole
(:mod:`toolwire.orchestrator.turn_compression`).

Bounds (``sessions.max_turns``, ``sessions.max_bytes``) drop the oldest turns' findings, then the
oldest turns themselves; the task waiting for a reply is never dropped. The idle time-to-live is
the store's (``sessions.ttl_s``, renewed by every turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import structlog
from pydantic import BaseModel, Field

from toolwire.message_text import Utf8Text
from toolwire.prompt_tags import DYNAMIC_TAGS, tag_start
from toolwire.task import TaskInfo

if TYPE_CHECKING:
    from toolwire.llm.transport import Message

log = structlog.get_logger(__name__)

FINDING_CHARS = 2000
"""How much of one tool's result a turn keeps (the answer already says what mattered)."""

SUMMARY_MARKER = "[compressed]"
"""Starts the text of a summary of earlier turns: compressed once, never again."""

_OWN_TAG = tag_start(DYNAMIC_TAGS)


class TurnFinding(BaseModel):
    """What one tool found in a turn (cut to :data:`FINDING_CHARS`)."""

    tool_name: str
    text: Utf8Text
    guaranteed: bool = False


class Turn(BaseModel):
    """One message of the user and what the chatbot answered."""

    number: int = Field(ge=1)
    """1 for the conversation's first turn; numbers keep counting past turns dropped or
    compressed."""
    message: Utf8Text
    """The user's message as sent (text that was not UTF-8 kept as U+FFFD, as the model read
    it: a stored conversation is JSON)."""
    standalone: Utf8Text | None = None
    """The message rewritten to stand on its own, when it depended on earlier turns (None: it
    was read as it is)."""
    kind: Literal["answer", "clarification"]
    answer: Utf8Text
    """The answer, or the clarifying question asked."""
    findings: list[TurnFinding] = Field(default_factory=list)


class TurnSummary(BaseModel):
    """Earlier turns compressed once into a summary that takes their place in the history."""

    first: int
    last: int
    text: str
    """Starts with :data:`SUMMARY_MARKER`; identifiers of the turns are kept verbatim."""


class TurnContext(BaseModel):
    """What a turn took from the turns before it (``Answer.context``, shown in the trace)."""

    turns_read: list[int] = Field(default_factory=list)
    """The earlier turns read verbatim, oldest first, by the calls of this turn that read the
    history: the follow-up rewrite and the answer (every other call reads the task alone)."""
    summaries_read: list[str] = Field(default_factory=list)
    """The compressed summaries read in place of older turns (``"1-6"``: turns 1 to 6)."""
    standalone: str | None = None
    """The message rewritten to stand on its own, which the task ran (None: run as sent)."""
    notes: list[str] = Field(default_factory=list)
    """Why a rewrite or a compression was not used."""

    @classmethod
    def of(cls, conversation: Conversation) -> TurnContext:
        return cls(
            turns_read=[turn.number for turn in conversation.turns],
            summaries_read=[f"{s.first}-{s.last}" for s in conversation.summaries],
        )


class Conversation(BaseModel):
    """What a session keeps of one conversation between its turns."""

    turns: list[Turn] = Field(default_factory=list)
    summaries: list[TurnSummary] = Field(default_factory=list)
    forgotten: int = 0
    """Turns dropped, oldest first, by the bounds or by the history's budget
    (``sessions.history_tokens``); their numbers are not reused."""
    pending: TaskInfo | None = None
    """The task tree waiting for the reply to its clarifying question."""

    @property
    def next_number(self) -> int:
        """The number of the next turn."""
        if self.turns:
            return self.turns[-1].number + 1
        if self.summaries:
            return self.summaries[-1].last + 1
        return self.forgotten + 1

    @property
    def has_history(self) -> bool:
        """Whether earlier turns reach the model."""
        return bool(self.turns or self.summaries)


def waiting(task: TaskInfo) -> Conversation:
    """A conversation whose only state is ``task`` waiting for the reply to its question (what a
    session of toolwire before conversations held)."""
    return Conversation(pending=task)


def turn_findings(texts: Sequence[tuple[str, str, bool]]) -> list[TurnFinding]:
    """The findings of a turn from ``(tool name, text, guaranteed)``, each cut to size."""
    return [
        TurnFinding(tool_name=name, text=_cut(text, FINDING_CHARS), guaranteed=guaranteed)
        for name, text, guaranteed in texts
        if text.strip()
    ]


def history_messages(conversation: Conversation) -> list[Message]:
    """The earlier turns in standard roles, oldest first: each summary as one user message
    (marked), then each turn as the user's message and the assistant's answer. Only grows at
    its end from one turn to the next, until a compression replaces old turns once."""
    messages: list[Message] = [
        {"role": "user", "content": _escaped(summary.text)} for summary in conversation.summaries
    ]
    for turn in conversation.turns:
        messages.append({"role": "user", "content": _escaped(turn.message)})
        messages.append({"role": "assistant", "content": _escaped(turn.answer)})
    return messages


def bounded(conversation: Conversation, *, max_turns: int, max_bytes: int) -> Conversation:
    """``conversation`` within its bounds: at most ``max_turns`` turns kept, and its stored form
    at most ``max_bytes`` (the oldest turns' findings go first, then the oldest summaries and
    turns). The waiting task and the latest turn are always kept."""
    kept = conversation.model_copy(deep=True)
    while len(kept.turns) > max_turns:
        kept.turns.pop(0)
        kept.forgotten += 1
    index = 0
    while _size(kept) > max_bytes and index < len(kept.turns) - 1:
        kept.turns[index].findings = []
        index += 1
    while _size(kept) > max_bytes and (kept.summaries or len(kept.turns) > 1):
        if kept.summaries:
            dropped = kept.summaries.pop(0)
            kept.forgotten += dropped.last - dropped.first + 1
        else:
            kept.turns.pop(0)
            kept.forgotten += 1
    if kept.forgotten != conversation.forgotten:
        log.info(
            "conversation_bounded",
            forgotten=kept.forgotten - conversation.forgotten,
            turns=len(kept.turns),
            max_turns=max_turns,
            max_bytes=max_bytes,
        )
    return kept


def _size(conversation: Conversation) -> int:
    return len(conversation.model_dump_json().encode())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _escaped(text: str) -> str:
    """An earlier message as the model reads it: it can open or close none of toolwire's own
    tags (as the task cannot, :func:`toolwire.llm.prompts.task_block`)."""
    return _OWN_TAG.sub("&lt;", text)
