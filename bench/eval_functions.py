"""Tool selection on schema-described functions: every pipeline side by side on the embedded
model.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_functions.py --split dev
    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_functions.py --native --verbose
    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_functions.py --pipelines core \\
        --question ask_for

The set (``bench/selection/functions.yaml``) gives each question its own 2-4 similar candidate
functions (name, description, JSON-schema parameters), exactly one right (``multiple``), or 1-3
topically near functions none of which is right (``irrelevance``). Each item becomes a tiny domain
whose tools are what a user declaring those functions as allow-listed ``mcp_servers:`` tools gets
(``bench/selection/functions.py``): toolwire's own MCP discovery makes each tool, its parameter
model and its yes/no question, derived from the description unless ``--question`` supplies one.
Every pipeline puts every item through the orchestrator's own selection step, as
``bench/eval_selection.py`` does (the code is shared: ``bench/selection/scoring.py``). Printed per
pipeline: exact-set accuracy, precision, recall, refusal rate on irrelevance items, model calls,
prompt tokens and seconds per item, then accuracy on multiple and on irrelevance items.

``--native``: the same items put to the model's native tool calling alone as a baseline (every
function as declared in ``tools``, ``tool_choice: auto``, one call at temperature 0, no
retrieval and no confirmation: toolwire's choice by function call on its own): the functions
it calls, or none.

``--question`` (how the yes/no question is worded when the declaration gives none):
``derived`` (toolwire's default, ``toolwire.mcp.tool.derived_question``), or one of the
alternatives below, given to each tool as its declared ``question:``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from functions import (
    KINDS,
    FunctionItem,
    FunctionSpec,
    QuestionFor,
    function_set_app,
    load_functions,
)
from scoring import Case, Tally, evaluate_modes, print_kinds, print_row, warm_up

from toolwire.errors import ModelError
from toolwire.llm import LanguageModel, Option, collect_calls, create_language_model
from toolwire.mcp.tool import first_sentence
from toolwire.settings import LLMSettings

DEFAULT_PIPELINES = ["core", "call", "call_confirm", "choose_only", "confirm_all"]
"""The pipelines of ``scoring.PIPELINES`` compared by default (any comma-joined step list too)."""


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _as_verb_phrase(summary: str) -> str | None:
    """``Calculates the area …`` → ``calculate the area …``; None when the summary does not
    start with a verb in the third person or the base form (``Arithmetic mean of …``)."""
    first, _, rest = summary.partition(" ")
    word = first.lower()
    if word.endswith("es") and word[:-2].endswith(("sh", "ch", "ss", "x")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return f"{word} {rest}".strip() if word in _COMMON_VERBS else None


_COMMON_VERBS = frozenset(
    (
        "add",
        "apply",
        "balance",
        "book",
        "calculate",
        "change",
        "check",
        "close",
        "compress",
        "compute",
        "convert",
        "copy",
        "count",
        "create",
        "delete",
        "detect",
        "differentiate",
        "estimate",
        "evaluate",
        "extract",
        "fetch",
        "find",
        "get",
        "integrate",
        "list",
        "look",
        "move",
        "open",
        "post",
        "produce",
        "read",
        "report",
        "reserve",
        "retrieve",
        "return",
        "search",
        "send",
        "set",
        "solve",
        "split",
        "start",
        "suggest",
        "summarize",
        "translate",
        "write",
    )
)


def ask_for(function: FunctionSpec) -> str:
    """``Does the message ask to <the description as a verb phrase>?``, or ``… ask for
    <the description>?`` when it does not start with a verb; without the tool's name."""
    summary = first_sentence(function.description)
    phrase = _as_verb_phrase(summary)
    if phrase is not None:
        return f"Does the message ask to {phrase}?"
    return f"Does the message ask for {_lower_first(summary)}?"


def with_name(function: FunctionSpec) -> str:
    """The default's wording with the tool's name, as it was derived before (the default since
    drops the name, which repeats the description's words)."""
    summary = first_sentence(function.description)
    return f"Does the question ask for what the tool {function.name!r} does: {summary}?"


def exactly(function: FunctionSpec) -> str:
    """Asks whether the task is this tool's job, not whether it is related to it."""
    summary = first_sentence(function.description)
    return f"Is this exactly what the message asks for: {summary}?"


QUESTIONS: dict[str, QuestionFor | None] = {
    "derived": None,
    "ask_for": ask_for,
    "with_name": with_name,
    "exactly": exactly,
}


def cases_of(items: Sequence[FunctionItem]) -> list[Case]:
    return [
        Case(
            id=item.id,
            text=item.question,
            domain=item.domain,
            expected=item.expected_tools,
            kind=item.kind,
        )
        for item in items
    ]


async def evaluate_native(
    items: Sequence[FunctionItem], llm: LanguageModel, verbose: bool
) -> Tally:
    """Each item in one call of toolwire's choice by function call, alone: every function
    offered as the declaration gives it (``tools``, ``tool_choice: auto``); the functions it
    calls are the chosen set, with no retrieval and no confirmation."""
    tally = Tally("native tool calling", KINDS)
    for item, case in zip(items, cases_of(items), strict=True):
        options = [
            Option(
                name=function.name,
                question=function.description,
                description=function.description,
                parameters=function.parameters,
            )
            for function in item.functions
        ]
        started = time.perf_counter()
        failure = None
        with collect_calls() as calls:
            try:
                called = [call.name for call in await llm.choose_functions(item.question, options)]
            except ModelError as error:  # wrong, whatever it would have chosen; the run goes on
                called, failure = [], str(error)
        seconds = time.perf_counter() - started
        chosen = {item.tool_name(name) for name in called}
        right = tally.add(case, chosen, list(calls), seconds, failure)
        if verbose and not right:
            print(
                f"  [native] {item.id}: called {sorted(called)}, expected {item.expected}; "
                f"{item.question[:80]!r}",
                flush=True,
            )
    return tally


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--split", choices=["dev", "test", "all"], default="test")
    parser.add_argument(
        "--pipelines",
        "--modes",
        dest="pipelines",
        nargs="*",
        default=DEFAULT_PIPELINES,
        help="scoring.PIPELINES names or comma-joined step lists; none: native only",
    )
    parser.add_argument("--native", action="store_true", help="also the native tool calling")
    parser.add_argument(
        "--question",
        nargs="+",
        choices=sorted(QUESTIONS),
        default=["derived"],
        help="one or more wordings, each run with every mode",
    )
    parser.add_argument("--local-model", default=None, help="e.g. qwen2.5-coder-0.5b")
    parser.add_argument("--verbose", action="store_true", help="print every wrong selection")
    args = parser.parse_args()

    items = load_functions(split=None if args.split == "all" else args.split)
    settings = LLMSettings(**({"local_model": args.local_model} if args.local_model else {}))
    llm = create_language_model(settings, environ={})
    counts = {kind: sum(item.kind == kind for item in items) for kind in KINDS}
    print(f"== Tool selection on function specs, embedded model ({settings.local_model}) ==")
    print(
        f"{len(items)} items ({args.split} split): {counts['multiple']} multiple, "
        f"{counts['irrelevance']} irrelevance"
    )
    try:
        await warm_up(llm)
        for question in args.question:
            print(f"\n-- questions: {question}")
            app = function_set_app(items, QUESTIONS[question], llm=llm)
            try:
                tallies = await evaluate_modes(
                    args.pipelines, cases_of(items), llm, app, KINDS, args.verbose
                )
            finally:
                await app.aclose()
            print_kinds(tallies)
        if args.native:
            native = await evaluate_native(items, llm, args.verbose)
            print_row([native])
            print_kinds([native])
    finally:
        await llm.aclose()


if __name__ == "__main__":
    asyncio.run(main())
