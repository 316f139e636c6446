"""Old turns compressed once, when the history nears its budget (issue 32 item 3, seed 004).

Every call of a turn reads the earlier turns, so a long conversation would fill the model's
window. When their estimate passes ``sessions.history_tokens``, every turn but the latest
:data:`KEEP_RECENT` is compressed in one model call aware of the new message (the compressor's
one-batch call, :func:`toolwire.llm.compression.compress_parts`: identifiers kept verbatim, a
summary not shorter refused). The summary is marked, stored with the conversation in place of
those turns and read by every later turn as it is: it is never compressed again, so the history
stays append-only from one compression to the next. A failed compression keeps the turns; the
next turn tries again.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from toolwire.context_buffer import PromptAndContext
from toolwire.conversation import SUMMARY_MARKER, Conversation, Turn, TurnSummary, history_messages
from toolwire.llm.base import LanguageModel
from toolwire.llm.compression import compress_parts
from toolwire.llm.context_limits import CompressionFailure, estimate_tokens

log = structlog.get_logger(__name__)

KEEP_RECENT = 2
"""Turns always kept verbatim: the ones a follow-up most likely points back to."""


@dataclass(frozen=True)
class Compacted:
    """The conversation after the check, and why a compression it needed did not happen."""

    conversation: Conversation
    failure: str | None = None


def history_tokens(conversation: Conversation) -> int:
    """The estimated tokens of the history every call of the next turn reads."""
    return sum(estimate_tokens(message["content"]) for message in history_messages(conversation))


async def compact(
    llm: LanguageModel, conversation: Conversation, message: str, budget_tokens: int
) -> Compacted:
    """``conversation`` with its old turns compressed into one summary when its history passes
    ``budget_tokens`` (unchanged otherwise, or when the compression fails)."""
    old = conversation.turns[:-KEEP_RECENT]
    if history_tokens(conversation) <= budget_tokens or not old:
        return Compacted(conversation)
    result = await compress_parts(llm, message, [_part(turn) for turn in old])
    if isinstance(result, CompressionFailure):
        why = f"earlier turns {old[0].number}-{old[-1].number} not compressed: {result.reason}"
        log.warning("turns_not_compressed", first=old[0].number, last=old[-1].number)
        return Compacted(conversation, why)
    summary = TurnSummary(
        first=old[0].number,
        last=old[-1].number,
        text=f"{SUMMARY_MARKER} turns {old[0].number}-{old[-1].number} of this conversation, "
        f"summarised:\n{result.context}",
    )
    log.info("turns_compressed", first=summary.first, last=summary.last, chars=len(summary.text))
    return Compacted(
        conversation.model_copy(
            update={
                "summaries": [*conversation.summaries, summary],
                "turns": conversation.turns[len(old) :],
            }
        )
    )


def _part(turn: Turn) -> PromptAndContext:
    """One turn as data for the compression call (never as chat roles: it is summarised, not
    continued), with what its tools found, so the summary keeps their identifiers."""
    found = "".join(f"\nFound by {f.tool_name}: {f.text}" for f in turn.findings)
    return PromptAndContext(
        prompt=turn.message,
        context=f"The user asked: {turn.message}\nThe answer: {turn.answer}{found}",
        tool_name=f"turn_{turn.number}",
        task_no=str(turn.number),
    )
