"""A page's relevance judged on its own and in place, on the same pages.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/probe_relevance.py [--limit N]
        [--model qwen2.5-coder-1.5b]

For the README's pydocs question and the first N questions of ``bench/eval_pydocs.py``, the
context search's candidates (the 4 best BM25 pages of the question) are judged twice on the
embedded model, with the pydocs domain's text in the prefix:

* **alone**, the check before issue 10's relevance layout: one page, then the question, then the
  instruction (:func:`judge_pages_alone`, kept here: the framework no longer checks pages so);
* **in place**, the framework's check: the task, then the pages kept so far and the page
  under judgement where the search tool's context will stand (``LanguageModel.judge_pages``).

Printed per question: each page's two verdicts, and whether it is the answering page (a page of
the labelled document containing the labelled phrase); then how often the two agree, how many
answering pages each kept, pages kept per question, and the share of the checks' prompt tokens
the server took from its cache.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from toolwire_pydocs.corpus import PydocsSource

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_pydocs import QUESTIONS, Question

from toolwire.llm import CallRecord, LanguageModel, collect_calls, domain_prompt
from toolwire.llm.base import PageRelevance, PageToJudge, Purpose, RetrievalPlace, retrieval_place
from toolwire.llm.factory import create_language_model
from toolwire.llm.prompts import PAGE_ALONE_RELEVANCE, page_alone_text
from toolwire.search import Page, PageIndex
from toolwire.settings import LLMSettings

README_QUESTION = "How do I sort the keys when I serialize an object to JSON?"
CANDIDATES = 4
"""The context search's ``candidate_page_count``."""


@dataclass
class Tally:
    """One way of checking, over every page."""

    verdicts: list[bool | None] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)

    def cached_share(self) -> float:
        prompt = sum(call.prompt_tokens for call in self.calls)
        return sum(call.cached_prompt_tokens for call in self.calls) / max(prompt, 1)


async def judge_pages_alone(
    llm: LanguageModel, question: str, pages: list[PageToJudge]
) -> list[bool | None]:
    """One ``extract`` call per page, side by side: the page, then the question (None: no valid
    verdict)."""

    async def check(page: PageToJudge) -> bool | None:
        verdict = await llm.extract(
            PageRelevance,
            page_alone_text(question, page),
            instruction=PAGE_ALONE_RELEVANCE,
            purpose=Purpose.RELEVANCE,
        )
        return None if verdict is None else verdict.relevant

    return list(await asyncio.gather(*(check(page) for page in pages)))


async def in_place(
    llm: LanguageModel, question: str, pages: list[PageToJudge]
) -> list[bool | None]:
    """The pages in place, as the search tool (the domain's RAG tool on task 1) checks them."""
    with retrieval_place(RetrievalPlace(question, (), "docs_search", "1")):
        return await llm.judge_pages(question, pages)


def mark(verdict: bool | None) -> str:
    return {True: "yes", False: "no", None: "invalid"}[verdict]


async def probe(questions: list[Question], model: str, domain_text: str) -> None:
    index = PageIndex.open(PydocsSource())
    llm = create_language_model(LLMSettings(local_model=model), environ={})
    ways = {"alone": Tally(), "in place": Tally()}
    answering: list[bool] = []
    try:
        for question in questions:
            pages: list[Page] = [hit.page for hit in index.search(question.text, limit=CANDIDATES)]
            judged = [PageToJudge(ref=page.ref, text=page.render()) for page in pages]
            found = {}
            with domain_prompt(domain_text):
                for name, check in (("alone", judge_pages_alone), ("in place", in_place)):
                    with collect_calls() as calls:
                        found[name] = await check(llm, question.text, judged)
                    ways[name].verdicts += found[name]
                    ways[name].calls += calls
            print(question.text)
            for page, one, two in zip(pages, found["alone"], found["in place"], strict=True):
                answers = question.answered_by(page)
                answering.append(answers)
                note = "  (answering page)" if answers else ""
                print(f"  {page.id:32} alone={mark(one):7} in place={mark(two):7}{note}")
    finally:
        await llm.aclose()
    report(ways, answering, len(questions))


def report(ways: dict[str, Tally], answering: list[bool], questions: int) -> None:
    one, two = ways["alone"].verdicts, ways["in place"].verdicts
    same = sum(a == b for a, b in zip(one, two, strict=True))
    print(f"\n{len(one)} pages of {questions} questions; the two ways agree on {same}")
    for name, tally in ways.items():
        kept = sum(bool(verdict) for verdict in tally.verdicts)
        kept_answering = sum(
            bool(verdict) for verdict, answers in zip(tally.verdicts, answering, strict=True)
            if answers
        )  # fmt: skip
        invalid = sum(verdict is None for verdict in tally.verdicts)
        print(
            f"  {name:9} kept {kept} pages ({kept / questions:.1f} per question), "
            f"{kept_answering} of {sum(answering)} answering pages; {invalid} invalid; "
            f"{len(tally.calls)} calls, {tally.cached_share():.0%} of their prompt tokens cached"
        )


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=2, help="eval_pydocs questions after the "
                        "README's")  # fmt: skip
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="the embedded model")
    arguments = parser.parse_args()
    readme = next(question for question in QUESTIONS if question.text == README_QUESTION)
    others = [question for question in QUESTIONS if question is not readme]
    from toolwire_pydocs.plugin import register_domains

    specs: list[object] = []
    register_domains(specs.append)
    description = str(getattr(specs[0], "description", ""))
    asyncio.run(probe([readme, *others[: arguments.limit]], arguments.model, description))


if __name__ == "__main__":
    main()
