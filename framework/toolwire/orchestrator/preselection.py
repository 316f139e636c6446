"""A selection made for a message before its first task exists, kept for that task.

Routing asks whether a tool of the domain the message's words point at takes it (when the model
named no domain, ``toolwire.selection.routing``). That is the selection the message's first task
would make; the task takes it instead of asking the model the same questions again. Kept in the
question's context, so concurrent questions never see each other's, and taken at most once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from toolwire.selection.pipeline import Selection, ToolSelector


@dataclass
class _Kept:
    selector: ToolSelector
    task_prompt: str
    selection: Selection | None


_kept: ContextVar[_Kept | None] = ContextVar("toolwire_preselection", default=None)


@contextmanager
def preselections() -> Iterator[None]:
    """The scope of one question: selections kept inside it are gone after it."""
    token = _kept.set(None)
    try:
        yield
    finally:
        _kept.reset(token)


def keep(selector: ToolSelector, task_prompt: str, selection: Selection) -> None:
    """Keep ``selection`` (made by ``selector`` for ``task_prompt``) for the task that asks the
    same; it replaces one kept before."""
    _kept.set(_Kept(selector, task_prompt, selection))


def take(selector: ToolSelector, task_prompt: str) -> Selection | None:
    """The selection kept for this selector and prompt, once (None: none kept)."""
    kept = _kept.get()
    if kept is None or kept.selector is not selector or kept.task_prompt != task_prompt:
        return None
    selection, kept.selection = kept.selection, None
    return selection
