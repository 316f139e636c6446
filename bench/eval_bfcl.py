"""Tool selection on public questions nobody here wrote: BFCL v4's non-live ``multiple`` and
``irrelevance`` categories, every pipeline side by side with native function calling.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_bfcl.py --split dev
    .venv/bin/python bench/eval_bfcl.py --split dev --replay     # from the recording, no model

Each question (``bench/selection/bfcl.py``: the split is fixed in ``bfcl_split.yaml``, the first
50 of each category held out) becomes a tiny domain whose tools are its functions, declared the
way a user brings schema-described tools (``functions.function_set_app``). A pipeline puts the
question through the orchestrator's own selection step, then fills each activated tool's
parameters as the orchestrator does (unless the selection carried them): the calls a question
costs before its tools run. ``native`` is the plain client's way: every function offered to the
model's native tool calling in one call (``tool_choice: auto``, the question alone as the user's
message), the functions it calls and their arguments taken as they are.

Printed per pipeline: right on ``multiple`` questions (exactly the one right function),
right on ``irrelevance`` questions (no function), arguments right on ``multiple`` questions (the
right function alone, its arguments among BFCL's possible answers: a simplified AST check), model
calls, prompt tokens and seconds per question. With ``--record`` (the default) every reply is
kept in ``bench/selection/replay/bfcl-<split>.jsonl``; ``--replay`` answers from it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from bfcl import BfclItem, arguments_right, load_bfcl
from functions import function_set_app
from scoring import selection_settings, warm_up

from toolwire.errors import ModelError
from toolwire.llm import CallRecord, LanguageModel, Option, collect_calls
from toolwire.mcp.declarations import short_name_for
from toolwire.mcp.tool import wire_arguments
from toolwire.orchestrator import DomainOrchestrator
from toolwire.orchestrator.execution import extract_params
from toolwire.settings import OrchestratorSettings

REPLAY_FOLDER = Path(__file__).resolve().parent / "selection" / "replay"


@dataclass
class Outcome:
    """One question's result under one pipeline."""

    called: dict[str, dict[str, Any] | None]
    """Function (BFCL name) → the arguments it runs with (None: none could be read); a function
    the model made up (not offered) is kept under its own name, as a call."""
    calls: list[CallRecord]
    seconds: float
    failure: str | None = None
    """A model call the choice depended on failed: the question counts as wrong, whatever was
    (not) chosen (a failure is no refusal)."""


@dataclass
class Row:
    """One pipeline over the split."""

    name: str
    multiple: int = 0
    multiple_right: int = 0
    irrelevance: int = 0
    irrelevance_right: int = 0
    arguments_right: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    failures: int = 0
    seconds: float = 0.0
    wrong: list[str] = field(default_factory=list)

    def add(self, entry: BfclItem, outcome: Outcome) -> None:
        item = entry.item
        chosen = set(outcome.called)
        right = outcome.failure is None and chosen == ({item.expected} if item.expected else set())
        if item.kind == "multiple":
            self.multiple += 1
            self.multiple_right += right
            arguments = outcome.called.get(item.expected or "")
            if right and arguments is not None and entry.possible is not None:
                self.arguments_right += arguments_right(arguments, entry.possible)
        else:
            self.irrelevance += 1
            self.irrelevance_right += right
        if not right:
            failed = f" (failed: {outcome.failure})" if outcome.failure else ""
            self.wrong.append(
                f"{item.id}: called {sorted(chosen)}, expected {item.expected}{failed}"
            )
        self.calls += len(outcome.calls)
        self.prompt_tokens += sum(call.prompt_tokens for call in outcome.calls)
        self.failures += sum(not call.ok for call in outcome.calls)
        self.seconds += outcome.seconds

    def line(self) -> str:
        n = max(self.multiple + self.irrelevance, 1)
        exact = (self.multiple_right + self.irrelevance_right) / n
        return (
            f"{self.name:<34} {self.multiple_right:>3}/{self.multiple:<3} "
            f"{self.multiple_right / max(self.multiple, 1):>5.3f} "
            f"{self.irrelevance_right:>3}/{self.irrelevance:<3} "
            f"{self.irrelevance_right / max(self.irrelevance, 1):>5.3f} {exact:>6.3f} "
            f"{self.arguments_right:>3}/{self.multiple:<3} "
            f"{self.calls / n:>5.2f} {self.prompt_tokens / n:>7.0f} {self.seconds / n:>6.2f} "
            f"{self.failures:>5}"
        )


HEADER = (
    f"{'pipeline':<34} {'multiple':>13} {'irrelevance':>13} {'exact':>6} {'arguments':>7} "
    f"{'calls':>5} {'prompt':>7} {'s/q':>6} {'fails':>5}"
)


def native_options(entry: BfclItem) -> list[Option]:
    return [
        Option(
            name=short_name_for(function.name),
            question=function.description,
            description=function.description,
            parameters=function.parameters,
        )
        for function in entry.item.functions
    ]


async def run_native(entry: BfclItem, llm: LanguageModel) -> Outcome:
    names = {short_name_for(function.name): function.name for function in entry.item.functions}
    started = time.perf_counter()
    failure = None
    with collect_calls() as calls:
        try:
            choices = await llm.choose_functions(entry.item.question, native_options(entry))
        except ModelError as error:
            choices, failure = [], str(error)
    called: dict[str, dict[str, Any] | None] = {}
    for choice in choices:  # a made-up function is a call too (BFCL counts it as one)
        name = names.get(choice.name, f"{choice.name} (not offered)")
        called.setdefault(name, choice.arguments)
    return Outcome(called, list(calls), time.perf_counter() - started, failure)


async def run_pipeline(
    entry: BfclItem, llm: LanguageModel, orchestrator: DomainOrchestrator
) -> Outcome:
    """The selection step, then each activated tool's parameters as the orchestrator fills
    them (one extraction each, unless the selection carried them)."""
    item = entry.item
    remote = {item.tool_name(function.name): function.name for function in item.functions}
    started = time.perf_counter()
    called: dict[str, dict[str, Any] | None] = {}
    with collect_calls() as calls:
        selection = await orchestrator.selector.select(item.question, llm, attempts=1)
        for name in selection.record.activated:
            tool = orchestrator.tool(name)
            params = selection.parameters.get(name)
            if params is None:
                try:
                    params = await extract_params(
                        llm, tool.params_model, tool.parameter_instruction(), item.question, 1
                    )
                except ModelError:
                    called[remote[name]] = None
                    continue
            called[remote[name]] = wire_arguments(params)
    seconds = time.perf_counter() - started
    return Outcome(called, list(calls), seconds, selection.record.failure)


async def evaluate(
    names: Sequence[str], entries: Sequence[BfclItem], llm: LanguageModel, verbose: bool
) -> list[Row]:
    app = function_set_app([entry.item for entry in entries], llm=llm)
    rows: list[Row] = []
    print(HEADER, flush=True)
    try:
        for name in names:
            row = Row(name)
            orchestrators: dict[str, DomainOrchestrator] = {}
            if name != "native":
                settings = OrchestratorSettings(selection=selection_settings(name))
                orchestrators = {
                    domain: DomainOrchestrator(spec, app.registry, app.tools, llm, settings)
                    for domain, spec in app.domains.items()
                }
            for entry in entries:
                if name == "native":
                    outcome = await run_native(entry, llm)
                else:
                    outcome = await run_pipeline(entry, llm, orchestrators[entry.item.domain])
                row.add(entry, outcome)
            rows.append(row)
            print(row.line(), flush=True)
            if verbose:
                for line in row.wrong:
                    print(f"    {line}", flush=True)
    finally:
        await app.aclose()
    return rows


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--pipelines",
        nargs="+",
        default=["core", "native"],
        help="names of scoring.PIPELINES, comma-joined step lists, or native",
    )
    parser.add_argument("--kinds", nargs="+", default=["multiple", "irrelevance"])
    parser.add_argument("--replay", action="store_true", help="answer from the recording alone")
    parser.add_argument("--no-record", action="store_true", help="neither record nor replay")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions of each kind")
    parser.add_argument("--verbose", action="store_true", help="list every wrong question")
    args = parser.parse_args()

    from replay_model import replayed_model

    entries = load_bfcl(args.split, tuple(args.kinds))
    if args.limit:
        entries = [
            entry
            for kind in args.kinds
            for entry in [e for e in entries if e.item.kind == kind][: args.limit]
        ]
    recording = None if args.no_record else REPLAY_FOLDER / f"bfcl-{args.split}.jsonl"
    llm, transport = replayed_model(recording, replay_only=args.replay)
    print(f"== BFCL v4 non-live ({args.split} half): {len(entries)} questions ==")
    try:
        if not args.replay:
            await warm_up(llm)
        await evaluate(args.pipelines, entries, llm, args.verbose)
        if transport is not None:
            print(f"(replayed {transport.hits} replies, asked the model {transport.misses})")
    finally:
        await llm.aclose()


if __name__ == "__main__":
    asyncio.run(main())
