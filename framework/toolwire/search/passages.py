"""The passage of a page that a search hands on: the paragraphs that match the query, not the
whole page.

A page is about 1,500 characters (``DEFAULT_PAGE_CHARS``) so that its neighbours are well defined;
what answers a question is usually one or two of its paragraphs. Every call that reads a search's
context (the relevance check, the gatekeeper, the answer) reads every character handed on, and on
a small local model the tokens read are the seconds waited. So the search tools hand on, for each
hit page, the run of consecutive paragraphs that holds the most query terms within
``max_chars``, under the page's own reference (its neighbours, its id and its number stay those of
the page). A cut is marked with "…" where text was left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolwire.search.index import query_terms
from toolwire.search.pages import Page

ELLIPSIS = "…"
"""Where a passage leaves text of its page out."""

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_STEM_CHARS = 5
"""A query term matches a word that starts with its first characters (the index stems words,
Porter-style: "serialize" finds "serializing"); shorter terms must match whole."""


def passage(page: Page, query: str, max_chars: int) -> Page:
    """``page`` with its text cut to the best run of paragraphs for ``query`` (the page itself
    when it is short enough, or when no term of the query occurs in it)."""
    if len(page.text) <= max_chars:
        return page
    terms = query_terms(query)
    paragraphs = [part for part in _PARAGRAPH_BREAK.split(page.text) if part.strip()]
    scores = [_score(paragraph, terms) for paragraph in paragraphs]
    if not any(scores):
        return page
    start, end = _best_run(paragraphs, scores, max_chars)
    text = "\n\n".join(paragraphs[start:end])
    before, after = start > 0, end < len(paragraphs)
    if len(text) > max_chars:  # one paragraph longer than a passage: around its first match
        cut = _window(text, terms, max_chars)
        before, after = before or cut > 0, after or cut + max_chars < len(text)
        text = text[cut : cut + max_chars]
    text = f"{ELLIPSIS}\n{text}" if before else text
    text = f"{text}\n{ELLIPSIS}" if after else text
    return page.model_copy(update={"text": text})


def _score(paragraph: str, terms: Sequence[str]) -> int:
    """How many distinct query terms the paragraph holds."""
    words = {word.lower() for word in re.findall(r"\w+", paragraph)}
    return sum(any(_matches(term, word) for word in words) for term in terms)


def _matches(term: str, word: str) -> bool:
    if len(term) < _STEM_CHARS:
        return word == term
    return word.startswith(term[: max(_STEM_CHARS, len(term) - 2)])


def _best_run(paragraphs: Sequence[str], scores: Sequence[int], max_chars: int) -> tuple[int, int]:
    """``(start, end)`` of the consecutive paragraphs with the highest total score that fit in
    ``max_chars`` (at least the best paragraph); the earliest such run wins a tie."""
    best = max(range(len(scores)), key=lambda index: (scores[index], -index))
    start, end = best, best + 1
    length = len(paragraphs[best])
    while True:
        options = []
        if start > 0 and length + 2 + len(paragraphs[start - 1]) <= max_chars:
            options.append((scores[start - 1], 1, start - 1))
        if end < len(paragraphs) and length + 2 + len(paragraphs[end]) <= max_chars:
            options.append((scores[end], 0, end))
        if not options:
            return start, end
        _, _, index = max(options)
        length += 2 + len(paragraphs[index])
        start, end = min(start, index), max(end, index + 1)


def _window(text: str, terms: Sequence[str], max_chars: int) -> int:
    """Where ``max_chars`` of ``text`` start: a little before its first matching word."""
    lowered = text.lower()
    positions = [lowered.find(term[:_STEM_CHARS]) for term in terms]
    first = min((position for position in positions if position >= 0), default=0)
    return max(0, min(first - max_chars // 4, len(text) - max_chars))
