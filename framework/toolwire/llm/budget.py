"""One time budget per question, which every model call of the question draws from.

``ConversationService.ask`` opens :func:`question_budget` around a question (its round, for a
reply to a clarification). Each model call then gets the call timeout (``llm.timeout_s``) cut to
what the question has left, and retries happen only within that time, so a question ends near
its budget however many calls and retries it makes (no timeouts stacked one inside another).
The answer keeps a reserve: other calls stop when less than :data:`ANSWER_RESERVE` of the budget
is left, so a question that ran long still gets its answer composed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from toolwire.errors import TimeBudgetSpentError

ANSWER_RESERVE = 0.25
"""Share of a question's budget only the answer call may use."""

MIN_CALL_S = 1.0
"""A call with less time than this left is not started."""


@dataclass(frozen=True)
class TimeBudget:
    """A question's budget: ``seconds`` in all, ending at ``deadline`` (``time.monotonic``)."""

    seconds: float
    deadline: float
    source: str
    """The setting it comes from, for the error message."""

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_current: ContextVar[TimeBudget | None] = ContextVar("toolwire_question_budget", default=None)


@contextmanager
def question_budget(
    seconds: float | None, source: str = "orchestrator.question_budget_s"
) -> Iterator[TimeBudget | None]:
    """Inside the block, model calls share one deadline ``seconds`` from now (None: no budget).

    A block inside another keeps the earlier deadline of the two. ``source`` names the setting.
    """
    outer = _current.get()
    budget = None if seconds is None else TimeBudget(seconds, time.monotonic() + seconds, source)
    if outer is not None and (budget is None or outer.deadline <= budget.deadline):
        budget = outer
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> TimeBudget | None:
    """The budget of the question being answered (None outside one)."""
    return _current.get()


def call_time(purpose: str, timeout_s: float, *, is_answer: bool) -> float:
    """Seconds one call may take: ``timeout_s``, cut to what the question's budget has left
    (less the answer's reserve, unless this is the answer).

    Raises :class:`TimeBudgetSpentError` when less than :data:`MIN_CALL_S` is left.
    """
    budget = _current.get()
    if budget is None:
        return timeout_s
    left = budget.remaining()
    if not is_answer:
        left -= budget.seconds * ANSWER_RESERVE
    if left < MIN_CALL_S:
        spent = "spent" if is_answer else "spent up to the answer's reserve"
        message = f"the question's time budget of {budget.seconds:g} s is {spent}"
        raise TimeBudgetSpentError(purpose, f"{message} ({budget.source})")
    return min(timeout_s, left)
