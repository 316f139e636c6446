"""Question-aware batch compression of accumulated context (SPEC §5, seed 004).

When the contexts sent with a question fill more than :data:`COMPRESSION_THRESHOLD` of the model's
window, every part not yet compressed is compressed in one model call that knows the question, or,
when they do not fit one call's window, in as few calls as fit (a part too long for a call on its
own is cut first, :class:`~toolwire.llm.context_limits.PartLimit`). Identifiers (URLs, numbers,
ids, capitalised names) must survive verbatim: any the model dropped are re-inserted in a marked
line, and a compression that is not shorter after that is refused. A compressed part is marked and
never compressed again. A failed compression leaves its parts uncompressed and is reported
(:class:`~toolwire.llm.context_limits.CompressionFailure`: the answer lists it). After
``max_failures`` failures in a row a breaker opens and the contexts pass uncompressed until
``cooldown_s`` has passed. A question whose time budget is spent leaves the parts it has not
compressed yet uncompressed (reported too) without counting a failure: the model did not fail.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Sequence

import structlog
from pydantic import BaseModel

from toolwire.context_buffer import PromptAndContext
from toolwire.errors import TimeBudgetSpentError
from toolwire.llm.base import LanguageModel, Purpose
from toolwire.llm.context_limits import (
    CompressionFailure,
    PartLimit,
    estimate_tokens,
    report_context_issue,
)
from toolwire.llm.prompts import render_contexts

log = structlog.get_logger(__name__)

COMPRESSION_THRESHOLD = 0.75
"""The share of the model's window (its profile's ``context_window_tokens``) the contexts may fill
before they are compressed: the rest leaves room for the rules, the task and the reply."""

KEPT_COMPRESSIONS = 64
"""Compressions a compressor keeps for reuse, the oldest forgotten first."""

COMPRESSED_TOOL_NAME = "toolwire.compressed"
"""``tool_name`` of a part produced by compression; such a part is never compressed again."""
COMPRESSED_MARKER = "[compressed context]"
KEPT_IDENTIFIERS_LABEL = "Identifiers kept verbatim:"
BUDGET_SPENT = "the question's time budget is spent"
"""Why parts are left uncompressed when the question has no time left for the call."""

_IDENTIFIER = re.compile(
    r"https?://[^\s<>\"']+"  # URLs
    r"|\b[\w.+-]+@[\w-]+\.[\w.-]+\b"  # e-mail addresses
    r"|\b(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_.:/-]*[A-Za-z0-9]\b"  # ids and numbers
    r"|\b\d\b"  # single digits
    r"|(?:~|\.{1,2})/[\w.-]+(?:/[\w.-]+)*|/?\b[\w.-]+(?:/[\w.-]+)+"  # paths
    r"|\b[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,4}\b(?!\.\w)"  # file names
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"  # snake_case names
    r"|\b[A-Z][a-z]+(?:[ -][A-Z][A-Za-z]+)+\b"  # multi-word capitalised names
    r"|(?<=[^\s.!?:] )[A-Z][a-z]{2,}\b"  # single-word proper names, mid-sentence
    r"|\b[A-Z]{2,}\b"  # acronyms and codes
)

_COMPRESSION_INSTRUCTION = (
    "Write the compressed context into the summary field. Keep every identifier, number, name "
    "and URL exactly as written."
)


class CompressedContext(BaseModel):
    """The compressed context, in the summary field."""

    summary: str


def identifiers(text: str) -> list[str]:
    """Identifiers, numbers, names and URLs that compression must keep verbatim, in order."""
    found: dict[str, None] = {}
    for match in _IDENTIFIER.finditer(text):
        found.setdefault(match.group(0).rstrip(".,;:)"), None)
    return list(found)


def holds_identifier(text: str, item: str) -> bool:
    """Whether ``text`` holds ``item`` as a whole identifier. Part of a longer one ("80" in
    "8080", "v1.2" in "v1.23") does not count: :func:`identifiers` reads that as a different
    identifier, so the one named would be lost (a summary's, a follow-up's rewrite's check)."""
    pattern = rf"(?<!\w)(?<!\w[.:/-]){re.escape(item)}(?!\w)(?![.:/-]\w)"
    return re.search(pattern, text) is not None


def is_compressed(context: PromptAndContext) -> bool:
    return context.tool_name == COMPRESSED_TOOL_NAME


class ContextCompressor:
    """Compresses a question's contexts in one batch when they near the model's window.

    ``reserved_tokens``: what a compression call needs besides the contexts and the question
    (the rules, the instruction, the output format and the reply); the rest of the window is
    what one call may send. ``least_context_tokens``: what the contexts keep of a call however
    much else it sends (the earlier turns of a conversation whose compression failed): the
    answer must not lose the tools' findings whole.
    """

    def __init__(
        self,
        llm: LanguageModel,
        *,
        window_tokens: int,
        threshold: float = COMPRESSION_THRESHOLD,
        reserved_tokens: int = 0,
        least_context_tokens: int = 0,
        max_failures: int = 3,
        cooldown_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._llm = llm
        self._budget_tokens = int(window_tokens * threshold)
        self._call_tokens = max(window_tokens - reserved_tokens, 1)
        self._least_context_tokens = least_context_tokens
        self._max_failures = max_failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._made: dict[tuple[str, tuple[tuple[str, str], ...]], PromptAndContext] = {}
        """Compressions made, by question and parts: the gatekeeper and the answer of a question
        (and every later call reading the same parts) reuse one instead of compressing again."""

    def _keep(
        self, key: tuple[str, tuple[tuple[str, str], ...]], compressed: PromptAndContext
    ) -> None:
        self._made.pop(key, None)
        self._made[key] = compressed
        while len(self._made) > KEPT_COMPRESSIONS:
            self._made.pop(next(iter(self._made)))

    @property
    def breaker_open(self) -> bool:
        if self._opened_at is None:
            return False
        if self._clock() - self._opened_at >= self._cooldown_s:
            self._opened_at = None  # half-open: the next compression is tried again
            self._failures = self._max_failures - 1
            return False
        return True

    def needs_compression(
        self, question: str, contexts: Sequence[PromptAndContext], besides_tokens: int = 0
    ) -> bool:
        """Whether the contexts near the window. ``besides_tokens``: what the call sends beside
        its contexts and the question that the window must also hold (the earlier turns an
        answer reads)."""
        tokens = estimate_tokens(question) + estimate_tokens(render_contexts(contexts))
        return tokens + besides_tokens > self._budget_tokens

    async def fit(
        self, question: str, contexts: Sequence[PromptAndContext], besides_tokens: int = 0
    ) -> list[PromptAndContext]:
        """The contexts to send: unchanged when they fit, else with the fresh parts compressed.

        A compressed part takes the place of the first part it replaces, so the order of
        everything else stays as it was. Parts whose compression failed pass unchanged.
        ``besides_tokens``: as for :meth:`needs_compression`.
        """
        contexts = list(contexts)
        if not self.needs_compression(question, contexts, besides_tokens):
            return contexts
        fresh = [index for index, ctx in enumerate(contexts) if not is_compressed(ctx)]
        if not fresh:
            log.warning("compression_nothing_left", parts=len(contexts))
            return contexts
        # a part's index → the compressed part in its place (None: compressed into another)
        replaced: dict[int, PromptAndContext | None] = {}
        batches = self._batches(question, contexts, fresh)
        for number, batch in enumerate(batches):
            parts = [contexts[index] for index in batch]
            if self.breaker_open:
                log.warning("compression_breaker_open", failures=self._failures)
                reason = f"skipped for {self._cooldown_s:g} s after repeated failures"
                report_context_issue(_failure(parts, reason))
                continue
            key = (question, tuple((part.completion_key, part.context) for part in parts))
            compressed = self._made.get(key) or await self._compress(question, parts)
            if isinstance(compressed, CompressionFailure):
                if compressed.out_of_time:  # no failure of the model: not counted
                    left = [contexts[index] for later in batches[number:] for index in later]
                    report_context_issue(_failure(left, BUDGET_SPENT, out_of_time=True))
                    break
                self._fail()
                report_context_issue(compressed)
                continue
            self._keep(key, compressed)
            self._failures = 0
            replaced.update(dict.fromkeys(batch[1:]))
            replaced[batch[0]] = compressed
        result: list[PromptAndContext] = []
        for index, ctx in enumerate(contexts):
            if index not in replaced:
                result.append(ctx)
            elif (compressed_part := replaced[index]) is not None:
                result.append(compressed_part)
        return result

    def within_call(
        self, question: str, contexts: Sequence[PromptAndContext], besides_tokens: int = 0
    ) -> list[PromptAndContext]:
        """The contexts, each part cut to an equal share of one call when together they still
        do not fit one (compression failed or was not enough): the call is then made with less
        context rather than refused by the server."""
        contexts = list(contexts)
        room = self._room(question) - estimate_tokens(question)  # the task is read twice
        room = max(room - besides_tokens, min(room, self._least_context_tokens), 1)
        if not contexts or estimate_tokens(render_contexts(contexts)) <= room:
            return contexts
        share = PartLimit(
            max((room - _tags_tokens(contexts)) // len(contexts), 1),
            "an equal share of one call: together the contexts exceed it",
        )
        return share.bound(contexts)

    def _room(self, question: str) -> int:
        """Tokens one compression call may spend on the contexts."""
        return max(self._call_tokens - estimate_tokens(_keep_line(question)), 1)

    def _batches(
        self, question: str, contexts: list[PromptAndContext], fresh: list[int]
    ) -> list[list[int]]:
        """The fresh parts (indexes) in order, grouped into as few calls as fit one call each."""
        room = self._room(question)
        batches: list[list[int]] = []
        used = 0
        for index in fresh:
            size = estimate_tokens(render_contexts([contexts[index]]))
            if not batches or used + size > room:
                batches.append([])
                used = 0
            batches[-1].append(index)
            used += size
        return batches

    async def _compress(
        self, question: str, fresh: list[PromptAndContext]
    ) -> PromptAndContext | CompressionFailure:
        """The compressed part, or why there is none."""
        room = PartLimit(
            max(self._room(question) - _tags_tokens(fresh), 1), "what fits one compression call"
        )
        return await compress_parts(self._llm, question, room.bound(fresh))

    def _fail(self) -> None:
        self._failures += 1
        if self._failures >= self._max_failures and self._opened_at is None:
            self._opened_at = self._clock()
            log.warning("compression_breaker_opened", failures=self._failures)


async def compress_parts(
    llm: LanguageModel, question: str, fresh: Sequence[PromptAndContext]
) -> PromptAndContext | CompressionFailure:
    """``fresh`` compressed into one marked part aware of ``question``, in one model call, or why
    there is none (the call failed, no valid summary, not shorter). Identifiers the model
    dropped are re-inserted in a marked line. The caller bounds the parts to fit one call."""
    fresh = list(fresh)
    original = render_contexts(fresh)
    text = f"{original}\n\n{_keep_line(question)}"
    try:
        output = await llm.extract(
            CompressedContext,
            text,
            instruction=_COMPRESSION_INSTRUCTION,
            purpose=Purpose.COMPRESSION,
        )
    except TimeBudgetSpentError as exc:  # the question's time, not the model, ran out
        log.warning("compression_skipped", error=exc.detail)
        return _failure(fresh, BUDGET_SPENT, out_of_time=True)
    except Exception as exc:  # any failure leaves the parts as they are (the breaker counts it)
        log.warning("compression_failed", error=str(exc))
        return _failure(fresh, "the model call failed", str(exc) or type(exc).__name__)
    if output is None or not output.summary.strip():
        log.warning("compression_failed", error="no valid output")
        return _failure(fresh, "the model gave no valid summary")
    # The model read the contexts HTML-escaped (external content); undo that once so that a
    # copied "&amp;" neither hides an identifier nor is escaped twice when rendered again.
    summary = html.unescape(output.summary.strip())
    raw = "\n".join(ctx.context for ctx in fresh)
    missing = [item for item in identifiers(raw) if not holds_identifier(summary, item)]
    if missing:
        summary = f"{summary}\n{KEPT_IDENTIFIERS_LABEL} {', '.join(missing)}"
    sources = ", ".join(ctx.completion_key for ctx in fresh)
    body = f"{COMPRESSED_MARKER} sources: {sources}\n{summary}"
    if len(body) >= len(original):
        log.warning("compression_refused", original_chars=len(original), compressed_chars=len(body))
        reason = f"the summary ({len(body):,} characters) was not shorter than the context"
        return _failure(fresh, reason)
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


def _keep_line(question: str) -> str:
    return f"Keep what this question needs: {question}"


def _failure(
    parts: list[PromptAndContext],
    reason: str,
    error: str | None = None,
    *,
    out_of_time: bool = False,
) -> CompressionFailure:
    sources = tuple(ctx.completion_key for ctx in parts)
    return CompressionFailure(
        task_no=parts[0].task_no,
        sources=sources,
        reason=reason,
        error=error,
        out_of_time=out_of_time,
    )


def _tags_tokens(contexts: Sequence[PromptAndContext]) -> int:
    """What the contexts' tags take, rendered without their text."""
    return estimate_tokens(
        render_contexts([ctx.model_copy(update={"context": ""}) for ctx in contexts])
    )
