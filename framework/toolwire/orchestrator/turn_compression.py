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
until enough new turns have gathered instead of following every turn. When the room the latest
turns leave in the budget is less than the smallest summary of the older ones
(:func:`least_summary_tokens`), that summary would be forgotten as soon as it was made: the older
turns are forgotten without a compression call. A failed compression keeps the turns; the next
turn tries again. Turns forgotten, and a compression that failed, are the turn's notes
(``Answer.context.notes``).

The budget must leave the answer its rules, the tools' findings and its reply within the model's
window: :func:`history_budget_problem` is checked when the app loads.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from toolwire.context_buffer import PromptAndContext
from toolwire.conversation import SUMMARY_MARKER, Conversation, Turn, TurnSummary, history_messages
from toolwire.llm.base import LanguageModel
from toolwire.llm.chat_model import PROMPT_ALLOWANCE_TOKENS
from toolwire.llm.compression import compress_parts, identifiers
from toolwire.llm.context_limits import CompressionFailure, estimate_tokens
from toolwire.llm.profiles import ModelProfile
from toolwire.settings import LEAST_HISTORY_TOKENS

log = structlog.get_logger(__name__)

KEEP_RECENT = 2
"""Turns always kept verbatim: the ones a follow-up most likely points back to."""

SUMMARY_WORDS_TOKENS = 64
"""The least room a summary's own words take beside its header and the identifiers it keeps:
the compressed part's marker line and a sentence or two (about 250 characters). With less room
beside the latest turns the summary would be forgotten as soon as it was made."""


@dataclass(frozen=True)
class Compacted:
    """The conversation after the check, and what the turn's notes say about it."""

    conversation: Conversation
    note: str | None = None
    """For the turn's notes: which earlier turns were forgotten, and why a compression it
    needed did not happen or was not kept (None: nothing the turn lost)."""


def largest_history_tokens(profile: ModelProfile) -> int:
    """The most ``sessions.history_tokens`` the model's window can hold beside what the answer
    must read and write: its fixed text (:data:`PROMPT_ALLOWANCE_TOKENS`), its reply (the
    profile's ``completion_limits.answer``) and the tools' findings, which take at least one
    compression's reply (``completion_limits.compression``) once they near the window. The
    rewrite reads the same history beside less (its instruction, a message under 400
    characters, a reply as short)."""
    limits = profile.completion_limits
    return (
        profile.context_window_tokens - PROMPT_ALLOWANCE_TOKENS - limits.answer - limits.compression
    )


def history_budget_problem(budget_tokens: int, profile: ModelProfile) -> str | None:
    """Why ``sessions.history_tokens`` does not fit the profile's window (None: it does): past
    :func:`largest_history_tokens` the rewrite and the answer would overflow the window at run
    time, on a long conversation's later turns."""
    largest = largest_history_tokens(profile)
    if budget_tokens <= largest:
        return None
    window = f"the model profile's context_window_tokens ({profile.context_window_tokens})"
    why = "the answer reads the earlier turns beside its rules, the tools' findings and its reply"
    if largest < LEAST_HISTORY_TOKENS:
        return (
            f"sessions.history_tokens ({budget_tokens}): {window} leaves no room for a "
            f"conversation's history (at least {LEAST_HISTORY_TOKENS} tokens): {why}; use a model "
            "with a larger window (llm.profile), or lower the profile's completion_limits"
        )
    return (
        f"sessions.history_tokens ({budget_tokens}) must be at most {largest} with {window}: "
        f"{why}; lower it, or use a model with a larger window (llm.profile)"
    )


def history_tokens(conversation: Conversation) -> int:
    """The estimated tokens of the history the next turn's rewrite and answer read."""
    return sum(estimate_tokens(message["content"]) for message in history_messages(conversation))


async def compact(
    llm: LanguageModel, conversation: Conversation, message: str, budget_tokens: int
) -> Compacted:
    """``conversation`` brought back within ``budget_tokens`` when its history passes it: its
    old turns compressed into one summary when the turns alone pass it (forgotten instead when
    no summary would fit beside the latest turns), then its oldest summaries forgotten while it
    still does (unchanged when it fits; the turns kept when the compression fails)."""
    if history_tokens(conversation) <= budget_tokens:
        return Compacted(conversation)
    folded = conversation
    first_note: str | None = None
    if len(conversation.turns) > KEEP_RECENT and _turns_tokens(conversation.turns) > budget_tokens:
        folded, first_note = await _fold_old_turns(llm, conversation, message, budget_tokens)
    kept, second_note = _forget_summaries(folded, budget_tokens)
    notes = [note for note in (first_note, second_note) if note is not None]
    return Compacted(kept, "; ".join(notes) or None)


async def _fold_old_turns(
    llm: LanguageModel, conversation: Conversation, message: str, budget_tokens: int
) -> tuple[Conversation, str | None]:
    """``conversation`` with every turn but the latest :data:`KEEP_RECENT` compressed into a
    summary, and what the turn's notes say: why the compression failed (the turns kept), or
    that the turns were forgotten without one because the room beside the latest turns is
    below :func:`least_summary_tokens` (a summary made there would be forgotten at once, its
    call spent for nothing)."""
    old, recent = conversation.turns[:-KEEP_RECENT], conversation.turns[-KEEP_RECENT:]
    span = f"{old[0].number}-{old[-1].number}"
    room = budget_tokens - _turns_tokens(recent)
    if room < (needed := least_summary_tokens(old)):
        log.info("turns_forgotten", first=old[0].number, last=old[-1].number)
        forgotten = conversation.forgotten + len(old)
        kept = conversation.model_copy(update={"turns": recent, "forgotten": forgotten})
        return kept, (
            f"earlier turns {span} forgotten, not compressed: the latest {KEEP_RECENT} turns "
            f"leave {max(room, 0)} of the {budget_tokens} tokens of sessions.history_tokens, and "
            f"a summary of them needs {needed}"
        )
    result = await compress_parts(llm, message, [_part(turn) for turn in old])
    if isinstance(result, CompressionFailure):
        log.warning("turns_not_compressed", first=old[0].number, last=old[-1].number)
        return conversation, f"earlier turns {span} not compressed: {result.reason}"
    return _summarised(conversation, old, result.context), None


def least_summary_tokens(old: list[Turn]) -> int:
    """The fewest tokens a summary of the ``old`` turns takes in the history: its header, every
    identifier of the turns (:func:`~toolwire.llm.compression.compress_parts` puts back the ones
    the model dropped, so no summary holds fewer) and :data:`SUMMARY_WORDS_TOKENS` of its own
    words."""
    found = ", ".join(identifiers("\n".join(_part(turn).context for turn in old)))
    return estimate_tokens(_summary_header(old) + found) + SUMMARY_WORDS_TOKENS


def _summary_header(old: list[Turn]) -> str:
    """What a summary of the ``old`` turns starts with: the marker and the turns it holds."""
    span = f"{old[0].number}-{old[-1].number}"
    return f"{SUMMARY_MARKER} turns {span} of this conversation, summarised:\n"


def _summarised(conversation: Conversation, old: list[Turn], summary_text: str) -> Conversation:
    """``conversation`` with the summary of its ``old`` turns in their place."""
    summary = TurnSummary(
        first=old[0].number, last=old[-1].number, text=_summary_header(old) + summary_text
    )
    log.info("turns_compressed", first=summary.first, last=summary.last, chars=len(summary.text))
    return conversation.model_copy(
        update={
            "summaries": [*conversation.summaries, summary],
            "turns": conversation.turns[len(old) :],
        }
    )


def _forget_summaries(
    conversation: Conversation, budget_tokens: int
) -> tuple[Conversation, str | None]:
    """``conversation`` without its oldest summaries while its history passes ``budget_tokens``:
    a summary is never compressed again, so it can only leave whole, its turns forgotten (as
    ``sessions.max_bytes`` forgets them); and the note naming the turns forgotten (None: none)."""
    dropped: list[TurnSummary] = []
    while conversation.summaries and history_tokens(conversation) > budget_tokens:
        oldest, *kept = conversation.summaries
        log.info("summary_forgotten", first=oldest.first, last=oldest.last)
        dropped.append(oldest)
        forgotten = conversation.forgotten + oldest.last - oldest.first + 1
        conversation = conversation.model_copy(update={"summaries": kept, "forgotten": forgotten})
    if not dropped:
        return conversation, None
    return conversation, (
        f"earlier turns {dropped[0].first}-{dropped[-1].last} forgotten with their summary: the "
        f"history passed the {budget_tokens} tokens of sessions.history_tokens"
    )


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
