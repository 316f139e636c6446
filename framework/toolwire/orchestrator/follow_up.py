"""Follow-ups resolved before anything else reads them (issue 32 item 2).

A later turn's message often points back ("and what is its usual dose?", "the same for
aspirin", "no, I meant Excedrin PM"). Coordinators, the tool selection and the tools read the
task's text alone (SPEC §3), so toolwire first rewrites such a message to stand on its own, in one
model call that reads the earlier turns in standard roles after the fixed prefix; the task then
runs as if the user had sent the rewrite (the other calls of the turn read the rewrite, not the
earlier turns: :mod:`toolwire.llm.history`). A message that needs nothing from before is copied
unchanged. A rewrite that fails, is empty, drops an identifier the message brings to the
conversation, or grows far longer than the message is not used: the message is read as it was
sent, and the turn's record says why. An identifier the earlier turns already hold may go: "X
instead of Y" and "I meant X, not Y" replace Y. A message as long as the rewrite's limit is not
sent for a rewrite at all: even a faithful copy of it would reach the limit, and be refused as a
loop.

Where the model's profile has ``prefix_warming``, the conversation service calls
:func:`warm_follow_up` once a turn is stored: the server then reads the next rewrite's prompt up
to the message while the user reads the answer, and the rewrite evaluates only the message.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from pydantic import BaseModel, Field

from toolwire.errors import ModelError
from toolwire.llm.attempts import call_model
from toolwire.llm.base import LanguageModel, PrefixWarming, Purpose
from toolwire.llm.compression import holds_identifier, identifiers
from toolwire.llm.history import current_history, reading_history

log = structlog.get_logger(__name__)

FOLLOW_UP_INSTRUCTION = (
    "The messages before the task are the earlier turns of this conversation. Rewrite the "
    "user's task so that it can be understood without them: replace each word that points back "
    "(it, its, they, them, that one, the same, there) with what it means in the conversation, "
    "and complete a short follow-up into a full request like the earlier one, with the change "
    "the follow-up asks for. When the task already stands on its own or asks about something "
    "new, copy it exactly. Keep the task's language, copy names and numbers exactly, write one "
    "request, and never answer the task."
)
"""The rewrite's instruction. It quotes no follow-up and no domain's words: the small embedded
model appended quoted examples to its rewrites (so toolwire answered a request the user never
made) and began its loops with them (bench/conversations/LOG.md)."""

MAX_GROWTH_CHARS = 200
"""How much longer than the message a rewrite may be (more means it answered or wandered)."""

MAX_REWRITE_CHARS = 400
"""The longest rewrite the model may write (the schema's ``maxLength``, which a server with
structured output makes a grammar): a small model that falls into a loop ("What about aspirin?
What about ibuprofen? …") is stopped there in one call, instead of writing to its completion
limit twice (the call and its corrective retry). A rewrite that reaches it is not used. The
limit is the schema's only, not a validation rule: from a server without a grammar a longer
reply still parses, and is refused in that one call rather than retried as invalid output. A
message of this length or more runs as sent without a rewrite call: its copy would reach the
limit too."""


class StandaloneTask(BaseModel):
    """The user's latest task, rewritten to stand on its own."""

    task: str = Field(
        description="The task, understandable without the conversation",
        json_schema_extra={"maxLength": MAX_REWRITE_CHARS},
    )


@dataclass(frozen=True)
class Resolved:
    """What a later turn's message became: the text the task runs, and why."""

    text: str
    rewritten: bool
    failure: str | None = None


async def resolve_follow_up(llm: LanguageModel, message: str, attempts: int) -> Resolved:
    """``message`` made to stand on its own (the earlier turns are the open history)."""
    if len(message) >= MAX_REWRITE_CHARS:
        return _as_sent(
            message,
            f"the follow-up rewrite was skipped: the message is {len(message)} characters long, "
            f"too long for a rewrite (at most {MAX_REWRITE_CHARS - 1})",
        )
    try:
        with reading_history():
            output = await call_model(
                Purpose.DECOMPOSITION.value,
                attempts,
                lambda: llm.extract(
                    StandaloneTask,
                    message,
                    instruction=FOLLOW_UP_INSTRUCTION,
                    purpose=Purpose.DECOMPOSITION,
                ),
            )
    except ModelError as error:
        return _as_sent(message, f"the follow-up rewrite failed: {error}")
    text = " ".join(output.task.split())
    problem = _refused(
        message, text, looped=len(output.task) >= MAX_REWRITE_CHARS, earlier=_earlier_text()
    )
    if problem is not None:
        return _as_sent(message, f"the follow-up rewrite was not used: {problem}")
    rewritten = text != " ".join(message.split())
    log.info("follow_up_resolved", rewritten=rewritten, chars=len(text))
    return Resolved(text if rewritten else message, rewritten)


def warms_follow_ups(llm: LanguageModel) -> bool:
    """Whether :func:`warm_follow_up` would send anything to ``llm``: a model that can warm a
    prefix (:class:`~toolwire.llm.base.PrefixWarming`) and whose profile does."""
    return isinstance(llm, PrefixWarming) and llm.warms_prefixes


async def warm_follow_up(llm: LanguageModel) -> bool:
    """Have the model's server read the next turn's rewrite prompt up to its message (the open
    history is the conversation as stored): True when it did."""
    if not isinstance(llm, PrefixWarming):
        return False
    with reading_history():
        return await llm.prefill(
            StandaloneTask, instruction=FOLLOW_UP_INSTRUCTION, purpose=Purpose.DECOMPOSITION
        )


def _earlier_text() -> str:
    """What the earlier turns said (the open history, which the rewrite has just read)."""
    with reading_history():
        return "\n".join(turn["content"] for turn in current_history())


def _refused(message: str, text: str, *, looped: bool, earlier: str) -> str | None:
    if looped:
        return f"it ran to its limit of {MAX_REWRITE_CHARS} characters"
    if not text:
        return "it was empty"
    if len(text) > len(message) + MAX_GROWTH_CHARS:
        return f"it was {len(text)} characters long for a message of {len(message)}"
    words = set(text.lower().split())
    lost = [
        item
        for item in identifiers(message)
        if not holds_identifier(text, item)
        and not all(word.lower() in words for word in item.split())
        and not holds_identifier(earlier, item)
    ]
    if lost:
        return f"it dropped {', '.join(lost)}"
    return None


def _as_sent(message: str, why: str) -> Resolved:
    log.warning("follow_up_not_rewritten", problem=why)
    return Resolved(message, False, why)
