"""Question-aware batch compression of accumulated context (SPEC §5, seed 004).

When the contexts sent with a question fill more than ``compression_threshold`` of the model's
window, every part not yet compressed is compressed in one model call that knows the question.
Identifiers (URLs, numbers, ids, capitalised names) must survive verbatim: any the model dropped
are re-inserted in a marked line, and a compression that is not shorter after that is refused.
A compressed part is marked and never compressed again. After ``max_failures`` failures in a row
a breaker opens and the contexts pass uncompressed until ``cooldown_s`` has passed.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Sequence

import structlog
from pydantic import BaseModel

from toolwire.context_buffer import PromptAndContext
from toolwire.llm.base import LanguageModel, Purpose
from toolwire.llm.prompts import render_contexts

log = structlog.get_logger(__name__)

COMPRESSED_TOOL_NAME = "toolwire.compressed"
"""``tool_name`` of a part produced by compression; such a part is never compressed again."""
COMPRESSED_MARKER = "[compressed context]"
KEPT_IDENTIFIERS_LABEL = "Identifiers kept verbatim:"

_IDENTIFIER = re.compile(
    r"https?://[^\s<>\"']+"  # URLs
    r"|\b[\w.+-]+@[\w-]+\.[\w.-]+\b"  # e-mail addresses
    r"|\b(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_.:/-]*[A-Za-z0-9]\b"  # ids and numbers
    r"|\b\d\b"  # single digits
    r"|\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b"  # multi-word capitalised names
)

_COMPRESSION_INSTRUCTION = (
    "Write the compressed context into the summary field. Keep every identifier, number, name "
    "and URL exactly as written."
)


class CompressedContext(BaseModel):
    """The compressed context, in the summary field."""

    summary: str


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters a token for English and code)."""
    return len(text) // 4 + 1


def identifiers(text: str) -> list[str]:
    """Identifiers, numbers, names and URLs that compression must keep verbatim, in order."""
    found: dict[str, None] = {}
    for match in _IDENTIFIER.finditer(text):
        found.setdefault(match.group(0).rstrip(".,;:)"), None)
    return list(found)


def is_compressed(context: PromptAndContext) -> bool:
    return context.tool_name == COMPRESSED_TOOL_NAME


class ContextCompressor:
    """Compresses a question's contexts in one batch when they near the model's window."""

    def __init__(
        self,
        llm: LanguageModel,
        *,
        window_tokens: int,
        threshold: float,
        max_failures: int = 3,
        cooldown_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._llm = llm
        self._budget_tokens = int(window_tokens * threshold)
        self._max_failures = max_failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def breaker_open(self) -> bool:
        if self._opened_at is None:
            return False
        if self._clock() - self._opened_at >= self._cooldown_s:
            self._opened_at = None  # half-open: the next compression is tried again
            self._failures = self._max_failures - 1
            return False
        return True

    def needs_compression(self, question: str, contexts: Sequence[PromptAndContext]) -> bool:
        tokens = estimate_tokens(question) + estimate_tokens(render_contexts(contexts))
        return tokens > self._budget_tokens

    async def fit(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> list[PromptAndContext]:
        """The contexts to send: unchanged when they fit, else with the fresh parts compressed.

        The compressed part takes the place of the first part it replaces, so the order of
        everything else stays as it was. On failure the contexts pass unchanged.
        """
        contexts = list(contexts)
        if not self.needs_compression(question, contexts):
            return contexts
        fresh = [ctx for ctx in contexts if not is_compressed(ctx)]
        if not fresh:
            log.warning("compression_nothing_left", parts=len(contexts))
            return contexts
        if self.breaker_open:
            log.warning("compression_breaker_open", failures=self._failures)
            return contexts
        compressed = await self._compress(question, fresh)
        if compressed is None:
            self._fail()
            return contexts
        self._failures = 0
        result: list[PromptAndContext] = []
        for ctx in contexts:
            if is_compressed(ctx):
                result.append(ctx)
            elif ctx is fresh[0]:
                result.append(compressed)
        return result

    async def _compress(
        self, question: str, fresh: list[PromptAndContext]
    ) -> PromptAndContext | None:
        original = render_contexts(fresh)
        text = f"{original}\n\nKeep what this question needs: {question}"
        try:
            output = await self._llm.extract(
                CompressedContext,
                text,
                instruction=_COMPRESSION_INSTRUCTION,
                purpose=Purpose.COMPRESSION,
            )
        except Exception as exc:  # the breaker counts any failure; the answer goes on uncompressed
            log.warning("compression_failed", error=str(exc))
            return None
        if output is None or not output.summary.strip():
            log.warning("compression_failed", error="no valid output")
            return None
        # The model read the contexts HTML-escaped (external content); undo that once so that a
        # copied "&amp;" neither hides an identifier nor is escaped twice when rendered again.
        summary = html.unescape(output.summary.strip())
        raw = "\n".join(ctx.context for ctx in fresh)
        missing = [item for item in identifiers(raw) if item not in summary]
        if missing:
            summary = f"{summary}\n{KEPT_IDENTIFIERS_LABEL} {', '.join(missing)}"
        sources = ", ".join(ctx.completion_key for ctx in fresh)
        body = f"{COMPRESSED_MARKER} sources: {sources}\n{summary}"
        if len(body) >= len(original):
            log.warning(
                "compression_refused", original_chars=len(original), compressed_chars=len(body)
            )
            return None
        log.info(
            "context_compressed",
            parts=len(fresh),
            original_chars=len(original),
            compressed_chars=len(body),
            reinserted_identifiers=len(missing),
        )
        return PromptAndContext(
            prompt=question,
            context=body,
            tool_name=COMPRESSED_TOOL_NAME,
            task_no=fresh[0].task_no,
            guaranteed=any(ctx.guaranteed for ctx in fresh),
        )

    def _fail(self) -> None:
        self._failures += 1
        if self._failures >= self._max_failures and self._opened_at is None:
            self._opened_at = self._clock()
            log.warning("compression_breaker_opened", failures=self._failures)
