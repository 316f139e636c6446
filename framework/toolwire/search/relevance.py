"""The relevance check of retrieved pages: a yes/no verdict per page from the model.

How the pages are put to the model is the language model's business
(:meth:`toolwire.llm.LanguageModel.judge_pages`): with the default layout all of a search's pages
are judged in one call, where the gatekeeper and the answer will read them.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from toolwire.llm.base import LanguageModel, PageRelevance, PageToJudge
from toolwire.search.pages import Page

__all__ = ["PageRelevance", "relevant_pages"]

log = structlog.get_logger(__name__)


async def relevant_pages(llm: LanguageModel, question: str, pages: Sequence[Page]) -> list[Page]:
    """The pages the model judges relevant to ``question``, in their given order.

    A page whose verdict fails validation counts as not relevant; a model that cannot be reached
    raises (``ModelError``), so an outage is reported rather than read as "nothing relevant".
    """
    if not pages:
        return []
    judged = [PageToJudge(ref=page.ref, text=page.render()) for page in pages]
    verdicts = await llm.judge_pages(question, judged)
    invalid = [page.id for page, verdict in zip(pages, verdicts, strict=True) if verdict is None]
    if invalid:
        log.warning("relevance_verdict_invalid", pages=invalid)
    return [page for page, keep in zip(pages, verdicts, strict=True) if keep]
