"""The relevance check of each page on its own, through ``LanguageModel.extract``.

The check the search tools made before pages were judged in place (``LanguageModel.judge_pages``
of :class:`~toolwire.llm.ChatModel` in the ``shared_prefix`` layout): the scripted test model
answers ``judge_pages`` this way, and ``bench/probe_relevance.py`` compares the two.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.llm.base import LanguageModel, PageRelevance, PageToJudge, Purpose
from toolwire.llm.prompts import PAGE_ALONE_RELEVANCE, page_alone_text


async def judge_pages_alone(
    llm: LanguageModel, question: str, pages: Sequence[PageToJudge]
) -> list[bool | None]:
    """One ``extract`` call per page, in order: the page, then the question (None: no valid
    verdict)."""
    verdicts: list[bool | None] = []
    for page in pages:
        verdict = await llm.extract(
            PageRelevance,
            page_alone_text(question, page),
            instruction=PAGE_ALONE_RELEVANCE,
            purpose=Purpose.RELEVANCE,
        )
        verdicts.append(None if verdict is None else verdict.relevant)
    return verdicts
