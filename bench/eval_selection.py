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

Modes: ``choose`` (retrieve, choose in one call constrained to the candidates' names, confirm
with the default ``confirm: also``: the first chosen tool on its own question, each later one as
a further request), ``choose:choice=function_call`` (the candidates offered as functions to the
model's native tool calling), ``choose/batched``
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
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from labelled import LabelledMessage, load_labelled, selectable_tools, selection_app
from scoring import Case, evaluate_modes, print_kinds, warm_up

from toolwire.app import App
from toolwire.llm import LanguageModel, collect_calls, create_language_model
from toolwire.orchestrator import DomainOrchestrator
from toolwire.orchestrator.preselection import preselections
from toolwire.selection.routing import DomainRouter
from toolwire.settings import LLMSettings, OrchestratorSettings, RoutingSettings

KINDS = ("one tool", "two tools", "no tool", "off-topic", "pydocs")


def kind_of(message: LabelledMessage) -> str:
    if message.domain is None:
        return "off-topic"
    if message.domain == "pydocs":
        return "pydocs"
    return {0: "no tool", 1: "one tool"}.get(len(message.tools), "two tools")


def cases_of(messages: list[LabelledMessage], rotation: list[str]) -> list[Case]:
    """Each message in its labelled domain; an off-topic one in a domain with selectable tools,
    in rotation. pydocs messages (nothing to choose) are counted by kind only."""
    return [
        Case(
            id=message.id,
            text=message.message,
            domain=message.domain or rotation[index % len(rotation)],
            expected=frozenset(message.tools),
            kind=kind_of(message),
            scored=kind_of(message) != "pydocs",
        )
        for index, message in enumerate(messages)
    ]


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
        with collect_calls() as calls, preselections():
            record = await router.route(
                message.message,
                llm,
                attempts=2,
                takes=lambda domain, text: orchestrators[domain].takes(text),
            )
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
            "choose:choice=function_call",
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
        await warm_up(llm)
        cases = cases_of(messages, rotation)
        tallies = await evaluate_modes(args.modes, cases, llm, app, KINDS, args.verbose)
        print_kinds(tallies)
        if not args.no_routing:
            await evaluate_routing(messages, llm, app, args.verbose)
    finally:
        await llm.aclose()
        await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
