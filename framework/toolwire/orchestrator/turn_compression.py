"""Old turns compressed once, when the history nears its budget (issue 32 item 3, seed 004).

The follow-up rewrite and the answer read the earlier turns (:mod:`toolwire.llm.history`), so a
long conversation would fill the model's window. When their estimate passes
``sessions.history_tokens`` and the turns read verbatim alone pass it, every turn but the latest
:data:`KEEP_RECENT` is compressed in one model call aware of the new message (the compressor's
one-batch call, :func:`toolwire.llm.compression.compress_parts`: identifiers kept verbatim, a
summary not shorter refused). The summary is marked, stored with the conversation in place of
those turns and read by every later turn as it is: it is never compressed again, so the history
stays append-only until old turns or summaries leave it. A summary leaves only whole: while
the history still passes the budget, the oldest summary is forgotten. So the history stays within
the budget (or holds only the latest turns, when they alone pass it), and a compression waits
until enough new turns have gathered instead of following every turn. When the latest turns alone
pass the budget a summary would have no room beside them: the older turns are forgotten without a
compression call. A failed compression keeps the turns; the next turn tries again.
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
    """The estimated tokens of the history the next turn's rewrite and answer read."""
    return sum(estimate_tokens(message["content"]) for message in history_messages(conversation))


async def compact(
    llm: LanguageModel, conversation: Conversation, message: str, budget_tokens: int
) -> Compacted:
    """``conversation`` brought back within ``budget_tokens`` when its history passes it: its
    old turns compressed into one summary when the turns alone pass it, then its oldest summaries
    forgotten while it still does (unchanged when it fits; the turns kept when the compression
    fails)."""
    if history_tokens(conversation) <= budget_tokens:
        return Compacted(conversation)
    old, recent = conversation.turns[:-KEEP_RECENT], conversation.turns[-KEEP_RECENT:]
    failure: str | None = None
    if old and _turns_tokens(conversation.turns) > budget_tokens:
        if _turns_tokens(recent) >= budget_tokens:  # no room for a summary beside them
            log.info("turns_forgotten", first=old[0].number, last=old[-1].number)
            forgotten = conversation.forgotten + len(old)
            conversation = conversation.model_copy(update={"turns": recent, "forgotten": forgotten})
        else:
            result = await compress_parts(llm, message, [_part(turn) for turn in old])
            if isinstance(result, CompressionFailure):
                span = f"{old[0].number}-{old[-1].number}"
                failure = f"earlier turns {span} not compressed: {result.reason}"
                log.warning("turns_not_compressed", first=old[0].number, last=old[-1].number)
            else:
                conversation = _summarised(conversation, old, result.context)
    return Compacted(_forget_summaries(conversation, budget_tokens), failure)


def _summarised(conversation: Conversation, old: list[Turn], summary_text: str) -> Conversation:
    """``conversation`` with the summary of its ``old`` turns in their place."""
    summary = TurnSummary(
        first=old[0].number,
        last=old[-1].number,
        text=f"{SUMMARY_MARKER} turns {old[0].number}-{old[-1].number} of this conversation, "
        f"summarised:\n{summary_text}",
    )
    log.info("turns_compressed", first=summary.first, last=summary.last, chars=len(summary.text))
    return conversation.model_copy(
        update={
            "summaries": [*conversation.summaries, summary],
            "turns": conversation.turns[len(old) :],
        }
    )


def _forget_summaries(conversation: Conversation, budget_tokens: int) -> Conversation:
    """``conversation`` without its oldest summaries while its history passes ``budget_tokens``:
    a summary is never compressed again, so it can only leave whole, its turns forgotten (as
    ``sessions.max_bytes`` forgets them)."""
    while conversation.summaries and history_tokens(conversation) > budget_tokens:
        dropped, *kept = conversation.summaries
        log.info("summary_forgotten", first=dropped.first, last=dropped.last)
        forgotten = conversation.forgotten + dropped.last - dropped.first + 1
        conversation = conversation.model_copy(update={"summaries": kept, "forgotten": forgotten})
    return conversation


def _turns_tokens(turns: list[Turn]) -> int:
    return history_tokens(Conversation(turns=turns))


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
