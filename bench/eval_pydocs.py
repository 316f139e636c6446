"""Evaluate the pydocs domain: retrieval hit rate at 5 pages, and (optionally) the whole path on
a model.

    .venv/bin/python bench/eval_pydocs.py            # retrieval only: pure BM25, no model, ~1 s
    .venv/bin/python bench/eval_pydocs.py --model    # + every question through App.ask on the
                                                     #   configured model (the embedded one by
                                                     #   default): answers naming the expected
                                                     #   phrase, deep fallback share, calls,
                                                     #   tokens and cached share per question
    .venv/bin/python bench/eval_pydocs.py --model --limit 10
    .venv/bin/python bench/eval_pydocs.py --model --deep-round --sample 8 \
        --subtask-results full,short                 # each question in both modes, in turn

Each question names the document that answers it and a phrase the answering page contains, so
an expectation survives a change of page size; the script checks every expectation is
satisfiable before measuring.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire_pydocs.corpus import PydocsSource

from toolwire.llm import GatekeeperVerdict
from toolwire.orchestrator import Answer
from toolwire.search import Page, PageIndex


@dataclass(frozen=True)
class Question:
    text: str
    prompt_type: str
    doc_id: str
    phrase: str
    """The answering page is a page of ``doc_id`` containing this phrase."""

    def answered_by(self, page: Page) -> bool:
        return page.doc_id == self.doc_id and self.phrase in page.text


QUESTIONS = [
    Question("What does the nonlocal statement do?", "definition", "ref-nonlocal", "nonlocal"),
    Question("What does the global statement mean?", "definition", "ref-global", "global"),
    Question("What is a lambda expression?", "definition", "ref-lambda", "lambda"),
    Question("What does a yield expression do in a generator function?", "definition",
             "ref-yield", "generator"),
    Question("When is the else clause of a for loop executed?", "definition", "ref-for",
             "else"),
    Question("Which values are considered false in truth value testing?", "definition",
             "ref-truth", "false"),
    Question("What does the with statement do with __enter__ and __exit__?", "definition",
             "ref-with", "__enter__"),
    Question("What is the assert statement?", "definition", "ref-assert", "assert"),
    Question("How do I sort the keys when I serialize an object to JSON?", "how_to",
             "lib-json", "sort_keys"),
    Question("How do I pretty-print JSON with an indent?", "how_to", "lib-json", "indent"),
    Question("How do I get the n smallest elements of a dataset with heapq?", "how_to",
             "lib-heapq", "nsmallest"),
    Question("How do I count how many times each element occurs?", "how_to",
             "lib-collections", "Counter"),
    Question("How do I create a temporary directory that is removed afterwards?", "how_to",
             "lib-tempfile", "TemporaryDirectory"),
    Question("How do I compute the median of a list of numbers?", "how_to", "lib-statistics",
             "median"),
    Question("How do I read rows from a CSV file?", "how_to", "lib-csv", "reader"),
    Question("How do I run a command and capture its output with subprocess?", "how_to",
             "lib-subprocess", "capture_output"),
    Question("How do I memoize a function with a least-recently-used cache?", "how_to",
             "lib-functools", "lru_cache"),
    Question("How do I parse command-line arguments?", "how_to", "lib-argparse",
             "ArgumentParser"),
    Question("How do I generate a random UUID?", "how_to", "lib-uuid", "uuid4"),
    Question("How do I recursively copy a directory tree?", "how_to", "lib-shutil", "copytree"),
    Question("How do I split a URL into scheme, netloc and path?", "how_to",
             "lib-urllib.parse", "netloc"),
    Question("How do I make a deep copy of a compound object?", "how_to", "lib-copy",
             "deepcopy"),
    Question("How do I compute a SHA-256 digest?", "how_to", "lib-hashlib", "sha256"),
    Question("How do I insert an item into a sorted list and keep it sorted?", "how_to",
             "lib-bisect", "insort"),
    Question("How do I chain several iterables into one iterator?", "how_to", "lib-itertools",
             "chain"),
    Question("How do I run several asyncio coroutines concurrently and collect results?",
             "how_to", "lib-asyncio", "gather"),
    Question("What is the difference between the is operator and == in comparisons?",
             "comparison", "ref-comparisons", "identity"),
    Question("Compare lists and tuples as sequence types: which are mutable?", "comparison",
             "ref-typesseq-mutable", "mutable"),
    Question("What is the difference between break and continue in loops?", "comparison",
             "ref-continue", "continue"),
    Question("Difference between copy.copy and copy.deepcopy?", "comparison", "lib-copy",
             "shallow"),
]  # fmt: skip


def check_expectations(pages: list[Page]) -> None:
    for question in QUESTIONS:
        if not any(question.answered_by(page) for page in pages):
            sys.exit(f"unsatisfiable expectation: {question}")


def retrieval(index: PageIndex, k: int) -> tuple[int, list[tuple[Question, int | None]]]:
    """Hits at k (BM25 on the question text itself) and the rank of the first answering page."""
    ranks: list[tuple[Question, int | None]] = []
    for question in QUESTIONS:
        hits = index.search(question.text, limit=k)
        rank = next(
            (n for n, hit in enumerate(hits, start=1) if question.answered_by(hit.page)), None
        )
        ranks.append((question, rank))
    return sum(rank is not None for _, rank in ranks), ranks


@dataclass(frozen=True)
class ModelRow:
    """One question answered through ``App.ask`` on a model."""

    question: Question
    answer: Answer
    seconds: float
    handed_on: bool = False
    """The search handed on the answering page's text (its document, the phrase)."""

    @property
    def deep_rounds(self) -> int:
        return sum(run.reason == "deep_fallback" for run in self.answer.trace.tools)

    @property
    def names_the_phrase(self) -> bool:
        """The answer names what the answering page contains (``sort_keys``, ``nsmallest``): a
        rough check that it was composed from the right page."""
        return self.question.phrase.lower() in self.answer.text.lower()

    def line(self) -> str:
        usage = self.answer.usage
        typed = self.answer.trace.prompt_type or "-"
        return (
            f"{self.question.prompt_type:10} → {typed:10} deep_rounds={self.deep_rounds} "
            f"calls={usage.llm_calls:3} tokens={usage.prompt_tokens:6}+"
            f"{usage.completion_tokens:4} (cached {usage.cached_prompt_tokens:5}) "
            f"{self.seconds:5.1f}s {'phrase' if self.names_the_phrase else '      '}  "
            f"{self.question.text}"
        )


def summarize(rows: Sequence[ModelRow], failed: int = 0) -> list[str]:
    """The model path's figures over ``rows`` (``failed``: questions that raised)."""
    n = len(rows)
    if not n:
        return [f"no question answered ({failed} failed)"]
    usages = [row.answer.usage for row in rows]
    prompt = sum(usage.prompt_tokens for usage in usages)
    cached = sum(usage.cached_prompt_tokens for usage in usages)
    seconds = [row.seconds for row in rows]
    no_deep = sum(row.deep_rounds == 0 for row in rows)
    typed = sum(row.question.prompt_type == row.answer.trace.prompt_type for row in rows)
    phrase = sum(row.names_the_phrase for row in rows)
    handed_on = sum(row.handed_on for row in rows)
    return [
        f"model path over {n} question(s), {failed} raised:",
        f"  answer names the documented phrase: {phrase}/{n} = {phrase / n:.0%}",
        f"  answering page handed on by the search: {handed_on}/{n} = {handed_on / n:.0%}",
        f"  answered without deep fallback: {no_deep}/{n} = {no_deep / n:.0%}",
        f"  prompt type classified as labelled: {typed}/{n} = {typed / n:.0%}",
        f"  model calls per question: mean {statistics.mean(u.llm_calls for u in usages):.1f}, "
        f"max {max(u.llm_calls for u in usages)}",
        f"  tokens per question: prompt {prompt / n:.0f} (cached {cached / n:.0f}, "
        f"{cached / max(prompt, 1):.0%}), completion "
        f"{statistics.mean(u.completion_tokens for u in usages):.0f}",
        f"  seconds per question: median {statistics.median(seconds):.1f}, mean "
        f"{statistics.mean(seconds):.1f}, max {max(seconds):.1f}",
        f"  answers with a recorded failure: {sum(bool(r.answer.failures) for r in rows)}/{n}",
    ]


class FirstVerdictInsufficient:
    """The app's model, except that each question's first gatekeeper verdict is "insufficient,
    the question is missing", made without a call (``--deep-round``): every question then runs
    one deep search round, whose subtasks the ``subtask_results`` modes differ on. Later
    verdicts are the model's."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    async def judge_context(self, question: str, contexts: Any) -> GatekeeperVerdict:
        if self.armed:
            self.armed = False
            return GatekeeperVerdict(sufficient=False, missing=[question])
        verdict: GatekeeperVerdict = await self._llm.judge_context(question, contexts)
        return verdict


def _record_hand_ons(search: Any, handed: list[tuple[str, tuple[str, ...]]]) -> None:
    """Every run of the search tool appends what it handed on: its text, its pages' documents."""
    run = search.execute_with_result

    async def recorded(params: Any, text: str) -> Any:
        result = await run(params, text)
        handed.append((result.text, tuple(page.doc_id for page in result.pages)))
        return result

    search.execute_with_result = recorded


def sampled(count: int | None, limit: int | None) -> list[Question]:
    """``count`` questions spread evenly over the list (every type), else the first ``limit``."""
    if count:
        step = len(QUESTIONS) / count
        return [QUESTIONS[int(n * step)] for n in range(count)]
    return QUESTIONS[:limit] if limit else QUESTIONS


async def with_model(
    questions: list[Question], timeout_s: float, modes: list[str], deep_round: bool
) -> None:
    from toolwire.app import App

    app = App.load(None)
    orchestrator = app.orchestrators["pydocs"]
    forced = FirstVerdictInsufficient(orchestrator.llm)
    if deep_round:
        orchestrator.llm = forced
    settings = orchestrator.settings
    search = app.tool("docs_search", "pydocs")
    handed: list[tuple[str, tuple[str, ...]]] = []
    _record_hand_ons(search, handed)
    rows: dict[str, list[ModelRow]] = {mode: [] for mode in modes}
    failed = dict.fromkeys(modes, 0)
    try:
        for question in questions:
            for mode in modes:  # side by side: the machine's load falls on every mode alike
                orchestrator.settings = settings.model_copy(update={"subtask_results": mode})
                forced.armed = deep_round
                started = time.perf_counter()
                handed.clear()
                try:
                    answer = await asyncio.wait_for(
                        app.ask(question.text, domain="pydocs"), timeout_s
                    )
                except Exception as error:  # a bench reports failures and goes on
                    failed[mode] += 1
                    print(f"  {mode:5} FAILED {question.text!r}: {type(error).__name__}: {error}")
                    continue
                found = any(
                    question.phrase in text and question.doc_id in docs for text, docs in handed
                )
                seconds = time.perf_counter() - started
                rows[mode].append(ModelRow(question, answer, seconds, found))
                print(f"  {mode:5} {rows[mode][-1].line()}")
                await app.settle()  # the next turn's warm-up, outside any question's time
    finally:
        orchestrator.settings = settings
        await app.aclose()
    for mode in modes:
        print(f"\nsubtask_results: {mode}" + (" (one forced deep round)" if deep_round else ""))
        print("\n".join(summarize(rows[mode], failed[mode])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="store_true", help="also run App.ask on the model")
    parser.add_argument("--limit", type=int, default=None, help="questions for --model")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per question")
    parser.add_argument("--cache-dir", type=Path, default=None, help="index cache directory")
    parser.add_argument(
        "--sample", type=int, default=None, help="questions for --model, spread over the types"
    )
    parser.add_argument(
        "--subtask-results",
        default="",
        help="orchestrator.subtask_results modes to run each question in, comma-separated "
        "(default: the configured one)",
    )
    parser.add_argument(
        "--deep-round",
        action="store_true",
        help="every question's first gatekeeper verdict is insufficient: one deep search round",
    )
    arguments = parser.parse_args()

    source = PydocsSource()
    started = time.perf_counter()
    index = PageIndex.open(source, cache_dir=arguments.cache_dir)
    opened = time.perf_counter() - started
    check_expectations(list(source.load_pages()))
    print(
        f"index: {index.page_count} pages, {'reused' if index.reused else 'built'} "
        f"in {opened * 1000:.0f} ms ({index.path})"
    )
    started = time.perf_counter()
    hits, ranks = retrieval(index, 5)
    query_ms = (time.perf_counter() - started) * 1000 / len(QUESTIONS)
    for question, rank in ranks:
        print(f"  {'@' + str(rank) if rank else 'miss':5} {question.doc_id:22} {question.text}")
    total = len(QUESTIONS)
    print(f"retrieval hit rate at 5 pages (BM25): {hits}/{total} = {hits / total:.0%}")
    for prompt_type in ("definition", "how_to", "comparison"):
        of_type = [rank for question, rank in ranks if question.prompt_type == prompt_type]
        found = sum(rank is not None for rank in of_type)
        print(f"  {prompt_type:10}: {found}/{len(of_type)}")
    hits1 = sum(rank == 1 for _, rank in ranks)
    print(f"hit rate at 1 page: {hits1}/{total} = {hits1 / total:.0%}; {query_ms:.2f} ms/query")
    if arguments.model:
        questions = sampled(arguments.sample, arguments.limit)
        modes = [mode for mode in arguments.subtask_results.split(",") if mode]
        from toolwire.settings import OrchestratorSettings

        modes = modes or [OrchestratorSettings().subtask_results]
        asyncio.run(with_model(questions, arguments.timeout, modes, arguments.deep_round))


if __name__ == "__main__":
    main()
