"""The context buffer (seed 6.4, 6.7): what tool runs produced, keyed ``"<task_no>:<tool name>"``.

A :class:`PromptAndContext` is one tool run's product: the text the tool was given, the context it
returned and, as data, the pages that context came from (search tools fill ``pages``; the deep
search and the neighbour search read them, never the page headers in the text).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PageRef(BaseModel):
    """A page of a document, by reference: the document's id and the page's number in it."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    page_no: int = Field(ge=1)

    @property
    def label(self) -> str:
        """``[page <doc_id>#<n>]``: how the model sees a page named (a page's header starts
        with it)."""
        return f"[page {self.doc_id}#{self.page_no}]"


class PromptAndContext(BaseModel):
    """What one tool run produced: the text it was given and the context it returned."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    context: str
    tool_name: str
    task_no: str
    guaranteed: bool = False
    pages: tuple[PageRef, ...] = ()
    """The pages the context was read from, in its order (a search tool's result)."""

    @property
    def completion_key(self) -> str:
        return completion_key(self.task_no, self.tool_name)


ContextBuffer = dict[str, list[PromptAndContext]]
"""Completion key ``"<task_no>:<tool name>"`` → what that tool produced on that task."""


def completion_key(task_no: str, tool_name: str) -> str:
    """The context buffer key of one tool's results on one task (seed 6.4)."""
    return f"{task_no}:{tool_name}"
