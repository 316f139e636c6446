"""How much of one retrieved part may enter a prompt, and what the prompts left out (SPEC §5).

A *part* is one piece of retrieved context: a tool's result (an MCP tool's included) or a page a
search tool judges. :class:`PartLimit` is the one place that decides how much of a part the model's
prompts may carry: ``llm.max_part_tokens``, or half of the model profile's
``context_window_tokens``, so that a part alone leaves room for the rules, the task and the reply of
any call, compression's included. A longer part is cut in the prompts only, with a marker saying
what was left out and how much; the tool's whole result stays in the context buffer (tools that
consume the context, guaranteed contexts, the stored conversation get it whole).

What a prompt left out is reported as data to the question's collector
(:func:`collect_context_issues`): a :class:`PartCut`, or a :class:`CompressionFailure` (the parts
then went uncompressed). The orchestrator files each on its task as a
:class:`~toolwire.run_state.Notice`, so every caller (CLI, HTTP, MCP) finds it in the answer's
``notices`` and ``failures`` and in the trace, not only in the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import structlog
from pydantic import BaseModel, ConfigDict

from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.run_state import Notice

log = structlog.get_logger(__name__)

CHARS_PER_TOKEN = 4
"""The estimate behind every token count here: about four characters a token (English, code)."""

_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0003134f]"
)
"""Characters of the scripts written without spaces (Chinese, Japanese, Korean, their
punctuation and full-width forms), which a tokenizer splits about one token a character: counted
as :data:`CHARS_PER_TOKEN` characters each, so that such a text is not taken for a quarter of
its size and a prompt of it does not overflow the window."""


def weighted_chars(text: str) -> int:
    """``text``'s length in the estimate's characters (a wide character counts as a token's)."""
    return len(text) + (CHARS_PER_TOKEN - 1) * len(_WIDE.findall(text))


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (:data:`CHARS_PER_TOKEN` characters a token, a character of
    Chinese, Japanese or Korean a token)."""
    return weighted_chars(text) // CHARS_PER_TOKEN + 1


def _fits(text: str, chars: int) -> bool:
    """Whether ``text`` takes at most ``chars`` of the estimate, without reading a text that is
    longer than that in characters alone (a tool's result of megabytes)."""
    return len(text) <= chars and weighted_chars(text) <= chars


def _prefix_within(text: str, chars: int) -> int:
    """How many characters of ``text``, from its start, fit in ``chars`` of the estimate."""
    if not _WIDE.search(text, 0, chars):
        return min(chars, len(text))
    used = 0
    for index, character in enumerate(text):
        used += CHARS_PER_TOKEN if _WIDE.match(character) else 1
        if used > chars:
            return index
    return len(text)


class PartCut(BaseModel):
    """A part cut to fit the prompts: where it came from and how much of it was sent."""

    model_config = ConfigDict(frozen=True)

    task_no: str
    source: str
    """The tool that returned the part (``pharma.drug_info``) or the page (``page doc#3``)."""
    original_chars: int
    kept_chars: int
    limit: str
    """The setting the limit comes from."""
    page: PageRef | None = None
    """The page, when the part is a page a search tool judges."""

    def notice(self) -> Notice:
        """What the answer tells: the tool's name is the caller's to see, a document's is not
        (it may be a path on the server)."""
        sent = f"{self.kept_chars:,} of {self.original_chars:,} characters sent ({self.limit})"
        if self.page is not None:
            message = f"a retrieved page was cut for the model: {sent}"
            return Notice(
                kind="context_cut", task_no=self.task_no, message=message, detail=self.source
            )
        message = (
            f"the context of {self.source} was cut for the model: {sent}; the whole result is kept"
        )
        return Notice(kind="context_cut", task_no=self.task_no, message=message)


class CompressionFailure(BaseModel):
    """Parts that were to be compressed and went to the model uncompressed, and why."""

    model_config = ConfigDict(frozen=True)

    task_no: str
    sources: tuple[str, ...]
    """The parts' completion keys (``"1:pharma.drug_info"``)."""
    reason: str
    """Why, in toolwire's words (the compression call failed, the summary was not shorter ...)."""
    error: str | None = None
    """What the failed model call raised (a server's words, kept from callers)."""
    out_of_time: bool = False
    """The question's time budget was spent before the call: no failure of the model (a
    compressor's breaker does not count it, and the parts after it are not tried)."""

    def notice(self) -> Notice:
        message = (
            f"context compression failed, sent uncompressed ({', '.join(self.sources)}): "
            + self.reason
        )
        return Notice(
            kind="compression_failed", task_no=self.task_no, message=message, detail=self.error
        )


ContextIssue = PartCut | CompressionFailure

_issues: ContextVar[list[ContextIssue] | None] = ContextVar("toolwire_context_issues", default=None)


@contextmanager
def collect_context_issues() -> Iterator[list[ContextIssue]]:
    """Collect what the prompts of model calls made inside the block left out."""
    issues: list[ContextIssue] = []
    token = _issues.set(issues)
    try:
        yield issues
    finally:
        _issues.reset(token)


def report_context_issue(issue: ContextIssue) -> None:
    """Add an issue to the open collector, if any."""
    issues = _issues.get()
    if issues is not None:
        issues.append(issue)


def cut_marker(left_out: int, original: int, limit: str) -> str:
    """What the model reads where a part was cut."""
    return (
        f"\n[cut by toolwire: the last {left_out:,} of {original:,} characters of this context "
        f"are left out ({limit})]"
    )


@dataclass(frozen=True)
class PartLimit:
    """The most tokens one part may take in a prompt, and the setting that says so."""

    tokens: int
    setting: str

    @classmethod
    def of(cls, context_window_tokens: int, max_part_tokens: int | None) -> PartLimit:
        if max_part_tokens is not None:
            return cls(max_part_tokens, "llm.max_part_tokens")
        return cls(context_window_tokens // 2, "llm.max_part_tokens: half the context window")

    @property
    def chars(self) -> int:
        return self.tokens * CHARS_PER_TOKEN

    def cut(self, text: str, *, source: str, task_no: str, page: PageRef | None = None) -> str:
        """``text``, or its beginning and a marker when it is longer than the limit (the cut is
        reported; ``page``: the text is that page's)."""
        if _fits(text, self.chars):
            return text
        marker = cut_marker(len(text), len(text), self.setting)  # the longest it can be
        kept = _prefix_within(text, max(self.chars - len(marker), 0))
        cut = PartCut(
            task_no=task_no,
            source=source,
            original_chars=len(text),
            kept_chars=kept,
            limit=self.setting,
            page=page,
        )
        log.info("context_part_cut", **cut.model_dump(exclude={"page"}))
        report_context_issue(cut)
        return text[:kept] + cut_marker(len(text) - kept, len(text), self.setting)

    def bound(self, contexts: Sequence[PromptAndContext]) -> list[PromptAndContext]:
        """The contexts with every part longer than the limit cut."""
        return [
            ctx
            if _fits(ctx.context, self.chars)
            else ctx.model_copy(
                update={"context": self.cut(ctx.context, source=ctx.tool_name, task_no=ctx.task_no)}
            )
            for ctx in contexts
        ]
