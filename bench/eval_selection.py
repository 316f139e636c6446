"""Tool selection on the embedded model: every mode side by side on the labelled set (issue 9).

    .venv/bin/python bench/eval_selection.py                       # test split, every mode
    .venv/bin/python bench/eval_selection.py --split dev --modes choose batched --verbose
    .venv/bin/python bench/eval_selection.py --sample 40 --modes   # 40 messages, routing only

The set (``bench/selection/labelled.yaml``) holds user messages over the two bundled domains and
four synthetic domains of deliberately similar tools, each labelled with its domain and the exact
set of tools that should take it. For each mode, every message goes through the orchestrator's
own selection step (SPEC §3 step 5, ``DomainOrchestrator.selector``) in its labelled domain; a
message labelled off-topic for every domain (``domain: null``) is put to one domain with
selectable tools, in rotation. Printed per mode: exact-set accuracy, tool precision and recall,
the refusal rate on messages no tool should take, model calls, prompt tokens (and the cached
share) and seconds per message; then exact-set accuracy by kind of message. pydocs messages
(no user-selectable tool: nothing to choose, no model call) are counted apart. Last, routing:
every message put to the domain router as if it named no domain (its labelled domain is right;
none for an off-topic one).

Modes: ``choose`` (retrieve, choose, confirm with the default ``confirm: also``: the first
chosen tool on its own question, each later one as a further request), ``choose/batched``
(confirm the choice in one call), ``choose/per_tool`` (each chosen tool on its own question),
``choose/off`` (no confirmation), ``batched``, ``per_tool``; ``choose:k=5`` sets ``top_k``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from labelled import LabelledMessage, load_labelled, selectable_tools, selection_app

from toolwire.app import App
from toolwire.llm import (
    LanguageModel,
    SuitabilityQuestion,
    collect_calls,
    create_language_model,
)
from toolwire.orchestrator import DomainOrchestrator
from toolwire.orchestrator.execution import extract_params
from toolwire.selection.routing import DomainRouter
from toolwire.settings import LLMSettings, OrchestratorSettings, RoutingSettings, SelectionSettings
from toolwire.tools import ChatbotTool

KINDS = ("one tool", "two tools", "no tool", "off-topic", "pydocs")


def selection_settings(spec: str) -> SelectionSettings:
    """``choose``, ``choose/off``, ``choose/batched:k=5``, ``batched``, ``per_tool``."""
    name, _, options = spec.partition(":")
    mode, _, confirm = name.partition("/")
    values: dict[str, Any] = {"mode": mode}
    if confirm:
        values["confirm"] = confirm
    for option in filter(None, options.split(",")):
        key, _, value = option.partition("=")
        values[{"k": "top_k"}.get(key, key)] = int(value)
    return SelectionSettings(**values)


def kind_of(message: LabelledMessage) -> str:
    if message.domain is None:
        return "off-topic"
    if message.domain == "pydocs":
        return "pydocs"
    return {0: "no tool", 1: "one tool"}.get(len(message.tools), "two tools")


@dataclass
class Tally:
    """What one mode did on the set."""

    mode: str
    messages: int = 0
    exact: int = 0
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    refusals: int = 0
    no_tool_messages: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    failures: int = 0
    seconds: float = 0.0
    by_kind: Counter[str] = field(default_factory=Counter)
    right_by_kind: Counter[str] = field(default_factory=Counter)
    carried: int = 0
    """Tools whose parameters came with their confirmation (``with_parameters``)…"""
    carried_as_extracted: int = 0
    """…and of them, those equal to what the tool's own extraction gives."""

    def add(
        self, message: LabelledMessage, chosen: set[str], calls: list[Any], seconds: float
    ) -> bool:
        expected = set(message.tools)
        kind = kind_of(message)
        right = chosen == expected
        self.by_kind[kind] += 1
        self.right_by_kind[kind] += right
        if kind == "pydocs":
            return right
        self.messages += 1
        self.exact += right
        self.true_positives += len(chosen & expected)
        self.false_positives += len(chosen - expected)
        self.false_negatives += len(expected - chosen)
        if not expected:
            self.no_tool_messages += 1
            self.refusals += not chosen
        self.calls += len(calls)
        self.prompt_tokens += sum(call.prompt_tokens for call in calls)
        self.cached_tokens += sum(call.cached_prompt_tokens for call in calls)
        self.failures += sum(not call.ok for call in calls)
        self.seconds += seconds
        return right

    def row(self) -> str:
        n = max(self.messages, 1)
        precision = self.true_positives / max(self.true_positives + self.false_positives, 1)
        recall = self.true_positives / max(self.true_positives + self.false_negatives, 1)
        refusal = self.refusals / max(self.no_tool_messages, 1)
        cached = self.cached_tokens / max(self.prompt_tokens, 1)
        return (
            f"{self.mode:<22} {self.exact / n:>5.2f} {precision:>9.2f} {recall:>6.2f} "
            f"{refusal:>7.2f} {self.calls / n:>7.2f} {self.prompt_tokens / n:>8.0f} "
            f"{cached:>6.0%} {self.seconds / n:>6.2f} {self.failures:>5}"
        )

    def kinds_row(self) -> str:
        cells = [
            f"{kind} {self.right_by_kind[kind]}/{self.by_kind[kind]}"
            for kind in KINDS
            if self.by_kind[kind]
        ]
        if self.carried:
            cells.append(
                f"(parameters carried by the confirmation equal to the tool's own extraction: "
                f"{self.carried_as_extracted}/{self.carried})"
            )
        return f"{self.mode:<22} " + "  ".join(cells)


HEADER = (
    f"{'mode':<22} {'exact':>5} {'precision':>9} {'recall':>6} {'refusal':>7} "
    f"{'calls/m':>7} {'prompt/m':>8} {'cached':>6} {'s/m':>6} {'fails':>5}"
)


async def evaluate(
    spec: str,
    messages: list[LabelledMessage],
    llm: LanguageModel,
    orchestrators: dict[str, DomainOrchestrator],
    rotation: list[str],
    verbose: bool,
) -> Tally:
    tally = Tally(spec)
    tools = {
        entry.qualified_name: entry.tool
        for orchestrator in orchestrators.values()
        for entry in orchestrator.selector.tools
    }
    for index, message in enumerate(messages):
        domain = message.domain or rotation[index % len(rotation)]
        orchestrator = orchestrators[domain]
        started = time.perf_counter()
        with collect_calls() as calls:
            selection = await orchestrator.selector.select(message.message, llm, attempts=2)
        record = selection.record
        seconds = time.perf_counter() - started
        chosen = set(record.activated)
        right = tally.add(message, chosen, list(calls), seconds)
        for name, carried in selection.parameters.items():  # measured, not counted as calls
            extracted = await own_extraction(llm, tools[name], message.message)
            tally.carried += 1
            tally.carried_as_extracted += carried == extracted
            if verbose and carried != extracted:
                print(
                    f"  [{spec}] {message.id}: {name} carried {carried!r}, extracted {extracted!r}",
                    flush=True,
                )
        if verbose and not right:
            print(
                f"  [{spec}] {message.id}: chose {sorted(chosen)} (named {record.chosen}), "
                f"expected {sorted(message.tools)}; {message.message[:80]!r}",
                flush=True,
            )
    return tally


async def own_extraction(llm: LanguageModel, tool: ChatbotTool[Any], text: str) -> BaseModel:
    """The parameters the orchestrator's own extraction gives for ``tool``: what parameters a
    confirmation carried (``confirm: with_parameters``) are compared with."""
    instruction = tool.parameter_instruction()
    return await extract_params(llm, tool.params_model, instruction, text, attempts=1)


async def evaluate_routing(
    messages: list[LabelledMessage],
    llm: LanguageModel,
    app: App,
    verbose: bool,
) -> None:
    """Each message put to the router as if it named no domain: the labelled domain (none for
    an off-topic message: the default domain answers it) is the right one."""
    orchestrators = {
        name: DomainOrchestrator(domain, app.registry, app.tools, llm, OrchestratorSettings())
        for name, domain in app.domains.items()
    }
    router = DomainRouter.build(
        {name: o.domain for name, o in orchestrators.items()},
        {name: o.describing_tools() for name, o in orchestrators.items()},
        RoutingSettings(),
    )
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    lexical = calls_made = 0
    started = time.perf_counter()
    for message in messages:
        with collect_calls() as calls:
            record = await router.route(message.message, llm, attempts=2)
        calls_made += len(calls)
        lexical += record.decided_by == "lexical"
        kind = kind_of(message)
        total[kind] += 1
        right[kind] += record.domain == message.domain
        if verbose and record.domain != message.domain:
            print(
                f"  [routing] {message.id}: {record.domain} ({record.decided_by}), expected "
                f"{message.domain}; {message.message[:80]!r}",
                flush=True,
            )
    n = max(len(messages), 1)
    print(
        f"\nrouting (no domain named): accuracy {sum(right.values()) / n:.2f}, decided without "
        f"a model call {lexical / n:.0%}, {calls_made / n:.2f} calls and "
        f"{(time.perf_counter() - started) / n:.2f} s per message"
    )
    print("  " + "  ".join(f"{kind} {right[kind]}/{total[kind]}" for kind in KINDS if total[kind]))


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--split", choices=["dev", "test", "all"], default="test")
    parser.add_argument(
        "--modes",
        nargs="*",
        default=[
            "choose",
            "choose/batched",
            "choose/per_tool",
            "choose/off",
            "batched",
            "per_tool",
        ],
        help="none: routing only",
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="N messages spread evenly over the split"
    )
    parser.add_argument("--local-model", default=None, help="e.g. qwen2.5-coder-0.5b")
    parser.add_argument("--no-routing", action="store_true", help="selection figures only")
    parser.add_argument("--verbose", action="store_true", help="print every wrong selection")
    args = parser.parse_args()

    messages = load_labelled(split=None if args.split == "all" else args.split)
    if 0 < args.sample < len(messages):
        messages = [messages[i * len(messages) // args.sample] for i in range(args.sample)]
    settings = LLMSettings(**({"local_model": args.local_model} if args.local_model else {}))
    llm = create_language_model(settings, environ={})
    app = selection_app(llm=llm)
    rotation = sorted(name for name, tools in selectable_tools(app).items() if tools)
    print(f"== Tool selection on the embedded model ({settings.local_model}) ==")
    print(
        f"{len(messages)} messages ({args.split} split), {len(app.domains)} domains, "
        f"{sum(len(t) for t in selectable_tools(app).values())} selectable tools"
    )
    try:
        warm_up = SuitabilityQuestion(tool_name="warm.up", question="Is this a test?")
        await llm.suitability("warm-up", [warm_up])  # the server's start is not measured
        tallies = []
        for spec in args.modes:
            settings_for_mode = OrchestratorSettings(selection=selection_settings(spec))
            orchestrators = {
                name: DomainOrchestrator(domain, app.registry, app.tools, llm, settings_for_mode)
                for name, domain in app.domains.items()
            }
            tallies.append(
                await evaluate(spec, messages, llm, orchestrators, rotation, args.verbose)
            )
            print(
                tallies[-1].row() if len(tallies) > 1 else f"{HEADER}\n{tallies[-1].row()}",
                flush=True,
            )
        if tallies:
            print("\nexact-set accuracy by kind of message")
        for tally in tallies:
            print(tally.kinds_row())
        if not args.no_routing:
            await evaluate_routing(messages, llm, app, args.verbose)
    finally:
        await llm.aclose()
        await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
