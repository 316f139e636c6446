"""Whole questions on the embedded model, today's pipeline against a commit before it (issue 33).

The README's two questions, the three-turn pharma story and pydocs evaluation questions run end
to end (``App.ask_stream``, default configuration, embedded 1.5B model) once per pipeline, in
one run: each pipeline is a ``git archive`` of its commit, run in a worker process with that
tree first on ``sys.path`` (the worker is this file; it uses only APIs both trees have). Before
the questions, one fresh ``toolwire ask`` per pipeline measures the first question of a new
process, server start and warm-up included. Per question: model calls, prompt / cached /
completion tokens, wall seconds, seconds to the first event and to the first answer token; then
medians, ratios, the issue's targets, and the pydocs evaluation figures with the retrieval hit
rate of the pages the search really handed on.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/bench_embedded.py --pipelines
        [--before 3f444d2] [--after HEAD] [--only before|after] [--pydocs 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
BEFORE = "3f444d2"
"""main when issue 33 was taken up: today's pipeline."""

README = [
    ("readme pharma", "pharma", "Can I take ibuprofen together with warfarin?", False),
    (
        "readme pydocs",
        "pydocs",
        "How do I sort the keys when I serialize an object to JSON?",
        False,
    ),
]
STORY = [
    ("story: ambiguous", "pharma", "Can I take Coumadin with Excedrin?", False),
    ("story: the reply", "pharma", "the PM one", True),
    ("story: dosage", "pharma", "How much Advil can I take?", False),
]
PYDOCS_PICK = [
    "What does the nonlocal statement do?",
    "What does the with statement do with __enter__ and __exit__?",
    "Which values are considered false in truth value testing?",
    "How do I get the n smallest elements of a dataset with heapq?",
    "How do I run several asyncio coroutines concurrently and collect results?",
    "How do I count how many times each element occurs?",
    "How do I read rows from a CSV file?",
    "What is the difference between the is operator and == in comparisons?",
]
"""Eight evaluation questions besides the README's: three definitions, four how-tos and a
comparison (heapq, with and asyncio are the issue's own examples)."""


# -- the worker: one pipeline, in its own process -----------------------------------------------


async def _start_server(app: Any) -> None:
    """Start and warm the embedded server before the questions (its load is no question's)."""
    import inspect

    from toolwire.llm.local import local_server

    parameters = inspect.signature(local_server).parameters
    extra = [app.model_profile.context_window_tokens] if len(parameters) > 1 else []
    await local_server(app.config.llm, *extra).ensure_started()


def _pages_of(app: Any, seen: list[tuple[str, tuple[str, ...]]]) -> None:
    """Record what the pydocs search hands on (its text, its pages' ids) on every run."""
    search = app.tool("docs_search", "pydocs")
    run = search.execute_with_result

    async def recorded(params: Any, text: str) -> Any:
        result = await run(params, text)
        seen.append((result.text, tuple(f"{p.doc_id}#{p.page_no}" for p in result.pages)))
        return result

    search.execute_with_result = recorded


async def _ask(app: Any, label: str, domain: str, message: str, session: str | None) -> dict:
    from toolwire.events import AnswerDelta
    from toolwire.orchestrator.streaming import Answered

    started = time.perf_counter()
    first_event = first_token = None
    answer = None
    stream = app.ask_stream(message, None if session else domain, session)
    async for event in stream:
        now = time.perf_counter() - started
        first_event = now if first_event is None else first_event
        if isinstance(event, AnswerDelta) and first_token is None:
            first_token = now
        if isinstance(event, Answered):
            answer = event.answer
    wall = time.perf_counter() - started
    await app.settle()  # the next turn's warm-up, outside the question's time
    assert answer is not None
    usage = answer.usage
    return {
        "label": label,
        "domain": domain,
        "message": message,
        "kind": answer.kind,
        "text": answer.text,
        "session_id": answer.session_id,
        "calls": usage.llm_calls,
        "purposes": [call.purpose for call in answer.model_calls],
        "seconds_by_call": [round(call.latency_ms / 1000, 1) for call in answer.model_calls],
        "prompt": usage.prompt_tokens,
        "cached": usage.cached_prompt_tokens,
        "completion": usage.completion_tokens,
        "wall": wall,
        "first_event": first_event,
        "first_token": first_token,
        "failures": len(answer.failures),
        "prompt_type": answer.trace.prompt_type,
        "deep_rounds": sum(run.reason == "deep_fallback" for run in answer.trace.tools),
    }


async def worker(out: Path, pydocs: int) -> None:
    from toolwire.app import App

    config = out.with_suffix(".yaml")
    config.write_text('{"sessions": {"store": "memory"}, "default_domain": "pharma"}')
    app = App.load(config)
    await _start_server(app)
    seen: list[tuple[str, tuple[str, ...]]] = []
    _pages_of(app, seen)
    plan = [*README, *((f"pydocs {n}", "pydocs", q, False) for n, q in enumerate(
        PYDOCS_PICK[:pydocs], start=1)), *STORY]  # fmt: skip
    rows = []
    session = None
    try:
        for label, domain, message, reply in plan:
            before = len(seen)
            try:
                row = await asyncio.wait_for(
                    _ask(app, label, domain, message, session if reply else None), 900
                )
            except Exception as error:  # a bench reports a failure and goes on
                row = {"label": label, "domain": domain, "message": message, "error": repr(error)}
            row["retrieved"] = seen[before:]
            session = row.get("session_id")
            rows.append(row)
            print(_line(row), flush=True)
    finally:
        await app.aclose()
    out.write_text(json.dumps(rows))


# -- the parent: exports, workers, report --------------------------------------------------------


def export(commit: str, directory: Path) -> Path:
    """The commit's tree, without touching the shared working tree or its index."""
    target = directory / commit.replace("/", "_")
    target.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def environment(tree: Path) -> dict[str, str]:
    paths = [tree / "framework", tree / "plugins" / "pharma", tree / "plugins" / "pydocs"]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(path) for path in paths)}


def fresh_ask(tree: Path) -> float:
    """Seconds of one ``toolwire ask`` in a new process: server start, warm-up, the question."""
    command = [sys.executable, "-c", "from toolwire.cli import main; main()", "ask", "--domain",
               "pydocs", README[1][2]]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=tree, env=environment(tree), capture_output=True, check=False)
    return time.perf_counter() - started


def run_pipeline(name: str, commit: str, directory: Path, pydocs: int) -> dict[str, Any]:
    tree = export(commit, directory)
    print(f"\n== {name}: {commit} ==", flush=True)
    first = fresh_ask(tree)
    print(f"  fresh `toolwire ask` (server start and warm-up included): {first:.1f} s", flush=True)
    out = directory / f"{name}.json"
    # this file drives both trees' workers (it uses only what both have)
    command = [sys.executable, __file__, "--worker", str(out), "--pydocs", str(pydocs)]
    subprocess.run(command, cwd=tree, env=environment(tree), check=True)
    return {"commit": commit, "fresh_ask_s": first, "rows": json.loads(out.read_text())}


def _line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"  {row['label']:18} FAILED: {row['error'][:100]}"
    token = f"{row['first_token']:6.1f}" if row["first_token"] is not None else "     –"
    return (
        f"  {row['label']:18} {row['kind']:13} calls={row['calls']:2} prompt={row['prompt']:5} "
        f"cached={row['cached']:5} completion={row['completion']:4} wall={row['wall']:6.1f}s "
        f"first event={row['first_event']:5.1f}s first token={token}s  "
        + " ".join(f"{p}:{s}" for p, s in zip(row["purposes"], row["seconds_by_call"], strict=True))
    )


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pydocs_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """eval_pydocs' answer figures over the pydocs rows, and the retrieval hit rate of what
    the search handed on (the answering page, holding its phrase, among the rag result)."""
    sys.path.insert(0, str(BENCH))
    from eval_pydocs import QUESTIONS

    by_text = {question.text: question for question in QUESTIONS}
    asked = [row for row in rows if row.get("message") in by_text and "error" not in row]
    phrase = retrieved = no_deep = typed = 0
    for row in asked:
        question = by_text[row["message"]]
        phrase += question.phrase.lower() in row["text"].lower()
        no_deep += row["deep_rounds"] == 0
        typed += row["prompt_type"] == question.prompt_type
        first = row["retrieved"][:1]  # the rag run; later ones are the deep search's
        retrieved += any(
            any(page.startswith(f"{question.doc_id}#") for page in pages)
            and question.phrase in text
            for text, pages in first
        )
    n = max(len(asked), 1)
    return {
        "questions": len(asked),
        "answer names the documented phrase": f"{phrase}/{len(asked)} = {phrase / n:.0%}",
        "answering page handed on by the search": f"{retrieved}/{len(asked)} = {retrieved / n:.0%}",
        "answered without deep fallback": f"{no_deep}/{len(asked)} = {no_deep / n:.0%}",
        "classified as labelled (where classified)": typed,
        "calls per question (mean)": round(statistics.mean(r["calls"] for r in asked), 1)
        if asked
        else 0,
    }


_COLUMNS = [("calls", 0), ("prompt", 0), ("cached", 0), ("wall", 1), ("first_event", 1),
            ("first_token", 1)]  # fmt: skip


def _pair(a: dict[str, Any], b: dict[str, Any], key: str, digits: int) -> str:
    def shown(value: Any) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    return f"{shown(a[key])} → {shown(b[key])}"


def report(before: dict[str, Any], after: dict[str, Any]) -> None:
    old = {row["label"]: row for row in before["rows"] if "error" not in row}
    new = {row["label"]: row for row in after["rows"] if "error" not in row}
    labels = [row["label"] for row in after["rows"]]
    print("\n== Per question: today's pipeline → after (calls, wall s, first answer token s) ==")
    print(f"{'question':18} {'calls':>9} {'prompt':>13} {'cached':>13} {'wall s':>15} "
          f"{'first event':>13} {'first token':>15}")  # fmt: skip
    for label in labels:
        a, b = old.get(label), new.get(label)
        if a is None or b is None:
            print(f"{label:18} (failed in one pipeline)")
            continue

        cells = [_pair(a, b, key, digits) for key, digits in _COLUMNS]
        print(f"{label:18} {cells[0]:>9} {cells[1]:>13} {cells[2]:>13} {cells[3]:>15} "
              f"{cells[4]:>13} {cells[5]:>15}")  # fmt: skip
    both = [label for label in labels if label in old and label in new]
    wall_old = _median([old[label]["wall"] for label in both])
    wall_new = _median([new[label]["wall"] for label in both])
    pydocs = [label for label in both if new[label]["domain"] == "pydocs"]
    token_old = _median([old[x]["first_token"] for x in pydocs if old[x]["first_token"]])
    token_new = _median([new[x]["first_token"] for x in pydocs if new[x]["first_token"]])
    calls_old = _median([old[label]["calls"] for label in both])
    calls_new = _median([new[label]["calls"] for label in both])
    print("\n== Medians and ratios (after / today) ==")
    print(f"median wall s:                 {wall_old:6.1f} → {wall_new:6.1f}  ratio "
          f"{wall_new / wall_old:.2f} (target <= 0.33)")  # fmt: skip
    print(f"median first answer token s, pydocs: {token_old:6.1f} → {token_new:6.1f}  ratio "
          f"{token_new / token_old:.2f} (target <= 0.33)")  # fmt: skip
    print(f"median calls per question:     {calls_old:6.1f} → {calls_new:6.1f}")
    for name, run in (("today", old), ("after", new)):
        prompt = sum(row["prompt"] for row in run.values())
        cached = sum(row["cached"] for row in run.values())
        print(f"{name}: prompt tokens {prompt}, cached {cached / max(prompt, 1):.0%}, most calls "
              f"{max(row['calls'] for row in run.values())}")  # fmt: skip
    readme = new.get("readme pharma")
    if readme is not None:
        print(
            f"guaranteed-answer question (readme pharma): {readme['calls']} call(s) (target <= 2)"
        )
    print(f"fresh `toolwire ask`: {before['fresh_ask_s']:.1f} s → {after['fresh_ask_s']:.1f} s")
    print("\n== pydocs evaluation figures ==")
    for name, run in (("today", before), ("after", after)):
        print(f"-- {name} ({run['commit']})")
        for key, value in pydocs_figures(run["rows"]).items():
            print(f"  {key}: {value}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--before", default=BEFORE, help="today's pipeline: a commit")
    parser.add_argument("--after", default="HEAD", help="the pipeline measured against it")
    parser.add_argument("--only", choices=["before", "after"], help="run one pipeline")
    parser.add_argument("--pydocs", type=int, default=len(PYDOCS_PICK), help="pydocs questions")
    parser.add_argument("--save", type=Path, default=Path(tempfile.gettempdir()) / "pipelines.json",
                        help="where the rows of both runs are written")  # fmt: skip
    arguments = parser.parse_args(argv)
    if arguments.worker is not None:
        import logging

        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
        asyncio.run(worker(arguments.worker, arguments.pydocs))
        return
    with tempfile.TemporaryDirectory() as directory:
        runs = {}
        for name in ("before", "after"):
            if arguments.only in (None, name):
                commit = getattr(arguments, name)
                runs[name] = run_pipeline(name, commit, Path(directory), arguments.pydocs)
        arguments.save.write_text(json.dumps(runs, indent=1))
    if len(runs) == 2:
        report(runs["before"], runs["after"])


if __name__ == "__main__":
    main()
