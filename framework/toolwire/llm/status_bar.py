"""The agent status bar of seed 004: where a long loop stands, at the very end of its calls.

A model reads state it would otherwise recount from the transcript (calls made, rounds, what is
missing) as a few key-value lines, maintained by code, never by a model. Seed 004 puts them in a
message of their own in the user role, tagged ``<agent_status>``, after everything else: next to
the tokens the model generates, and appended rather than inserted, so every cached prefix before
it stays valid. Here the loop is the deep search (SPEC §3 step 8).

The orchestrator opens :func:`status_bar` around the calls that decide whether the loop goes on
or how: the context gatekeeper's verdict once a deep search round ran, and the parameter
extraction of the tools that run in a round (the searches' queries). A
:class:`~toolwire.llm.ChatModel` then ends each call of those purposes made inside the block with
the status message (:func:`with_status_bar`); other calls in the block (a compression the
gatekeeper's context needed) and every other purpose stay as they were.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from toolwire.llm.base import Purpose
from toolwire.llm.transport import Message
from toolwire.prompt_tags import DYNAMIC_TAGS, STATUS_TAG, tag_start
from toolwire.run_state import AgentStatus

READ_BY = frozenset({Purpose.GATEKEEPER, Purpose.PARAMETERS})
"""The purposes whose calls end with the status bar while one is open."""

_OWN_TAG = tag_start(DYNAMIC_TAGS)

_current: ContextVar[AgentStatus | None] = ContextVar("toolwire_status_bar", default=None)


@contextmanager
def status_bar(status: AgentStatus | None) -> Iterator[None]:
    """Inside the block, calls of the :data:`READ_BY` purposes end with ``status`` (None: the
    block changes nothing)."""
    token = _current.set(status)
    try:
        yield
    finally:
        _current.reset(token)


def current_status_bar() -> AgentStatus | None:
    """The status the calls being made end with (None outside :func:`status_bar`)."""
    return _current.get()


def with_status_bar(messages: list[Message], purpose: Purpose) -> list[Message]:
    """``messages`` followed by the open status bar as a user message of its own, when
    ``purpose`` reads it; else ``messages`` unchanged."""
    status = _current.get()
    if status is None or purpose not in READ_BY:
        return messages
    return [*messages, {"role": "user", "content": agent_status_block(status)}]


def agent_status_block(status: AgentStatus) -> str:
    """A deep search round's status: the budget, the round, what it searches for and the pages
    already consulted, one key per line."""
    notes = [f"Deep search round: {status.round} of {status.max_rounds}."]
    if status.consulted:
        notes.append("Pages consulted: " + ", ".join(page.label for page in status.consulted))
    return status_block(
        calls_made=status.calls_made,
        call_budget=status.call_budget,
        missing=status.missing,
        notes=notes,
    )


def status_block(
    *,
    calls_made: int,
    call_budget: int,
    missing: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """The ``<agent_status>`` block. The missing items and notes (the gatekeeper's words, which
    read retrieved pages; page names) are each one line, with toolwire's own tags escaped: they
    cannot end the block or add a line of budget to it."""
    lines = [f"<{STATUS_TAG}>", f"Model calls made: {calls_made} of {call_budget}."]
    lines.append(f"Calls remaining: {max(call_budget - calls_made, 0)}.")
    if missing:
        lines.append("Still missing:")
        lines.extend(f"- {_line(item)}" for item in missing)
    else:
        lines.append("Still missing: nothing.")
    lines.extend(_line(note) for note in notes)
    lines.append(f"</{STATUS_TAG}>")
    return "\n".join(lines)


def _line(text: str) -> str:
    return _OWN_TAG.sub("&lt;", " ".join(text.split()))
