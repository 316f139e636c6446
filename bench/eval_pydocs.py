"""Evaluate the pydocs domain: retrieval hit rate at 5 pages, and (optionally) the whole path on
a model.

    .venv/bin/python bench/eval_pydocs.py            # retrieval only: pure BM25, no model, ~1 s
    .venv/bin/python bench/eval_pydocs.py --model    # + every question through App.ask on the
                                                     #   configured model (the embedded one by
                                                     #   default): deep fallback share, calls,
                                                     #   tokens per question
    .venv/bin/python bench/eval_pydocs.py --model --limit 10

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
from dataclasses import dataclass
from pathlib import Path

from toolwire_pydocs.corpus import PydocsSource

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


async def with_model(limit: int | None, timeout_s: float) -> None:
    from toolwire.app import App

    app = App.load(None)
    questions = QUESTIONS[:limit] if limit else QUESTIONS
    rows = []
    try:
        for question in questions:
            started = time.perf_counter()
            try:
                answer = await asyncio.wait_for(app.ask(question.text, domain="pydocs"), timeout_s)
            except Exception as error:  # a bench reports failures and goes on
                print(f"  FAILED {question.text!r}: {type(error).__name__}: {error}")
                continue
            seconds = time.perf_counter() - started
            deep = sum(run.reason == "deep_fallback" for run in answer.trace.tools)
            typed = answer.trace.prompt_type
            rows.append((question, typed, deep, answer.usage, seconds, answer.failures))
            print(
                f"  {question.prompt_type:10} → {typed or '-':10} deep_rounds={deep} "
                f"calls={answer.usage.llm_calls:3} tokens={answer.usage.prompt_tokens:6}+"
                f"{answer.usage.completion_tokens:4} {seconds:5.1f}s  {question.text}"
            )
    finally:
        await app.aclose()
    if not rows:
        print("no question answered")
        return
    n = len(rows)
    no_deep = sum(deep == 0 for _, _, deep, *_ in rows)
    typed_right = sum(q.prompt_type == typed for q, typed, *_ in rows)
    calls = [usage.llm_calls for *_, usage, _, _ in rows]
    prompt = [usage.prompt_tokens for *_, usage, _, _ in rows]
    completion = [usage.completion_tokens for *_, usage, _, _ in rows]
    cached = [usage.cached_prompt_tokens for *_, usage, _, _ in rows]
    seconds = [s for *_, s, _ in rows]
    failed = sum(bool(f) for *_, f in rows)
    print(f"\nmodel path over {n} question(s):")
    print(f"  answered without deep fallback: {no_deep}/{n} = {no_deep / n:.0%}")
    print(f"  prompt type classified as labelled: {typed_right}/{n} = {typed_right / n:.0%}")
    print(f"  model calls per question: mean {statistics.mean(calls):.1f}, max {max(calls)}")
    print(
        f"  tokens per question: prompt {statistics.mean(prompt):.0f} "
        f"(cached {statistics.mean(cached):.0f}), completion {statistics.mean(completion):.0f}"
    )
    print(f"  seconds per question: mean {statistics.mean(seconds):.1f}, max {max(seconds):.1f}")
    print(f"  answers with a recorded failure: {failed}/{n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="store_true", help="also run App.ask on the model")
    parser.add_argument("--limit", type=int, default=None, help="questions for --model")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per question")
    parser.add_argument("--cache-dir", type=Path, default=None, help="index cache directory")
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
        asyncio.run(with_model(arguments.limit, arguments.timeout))


if __name__ == "__main__":
    main()
