"""The relevance check of each page on its own, through ``LanguageModel.extract``.

The check the search tools made before all pages were judged in one call where they will stand
(``LanguageModel.judge_pages`` of :class:`~toolwire.llm.ChatModel` in the ``shared_prefix``
layout): the ``per_purpose`` layout answers ``judge_pages`` this way, and
``bench/probe_relevance.py`` compares the two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from toolwire.llm.base import LanguageModel, PageRelevance, PageToJudge, Purpose
from toolwire.llm.prompts import PAGE_ALONE_RELEVANCE, page_alone_text


async def judge_pages_alone(
    llm: LanguageModel, question: str, pages: Sequence[PageToJudge]
) -> list[bool | None]:
    """One ``extract`` call per page, side by side: the page, then the question (None: no valid
    verdict). The ``per_purpose`` layout's check."""

    async def check(page: PageToJudge) -> bool | None:
        verdict = await llm.extract(
            PageRelevance,
            page_alone_text(question, page),
            instruction=PAGE_ALONE_RELEVANCE,
            purpose=Purpose.RELEVANCE,
        )
        return None if verdict is None else verdict.relevant

    return list(await asyncio.gather(*(check(page) for page in pages)))
