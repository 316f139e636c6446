"""Tool selection on the embedded model: every pipeline side by side on a labelled set.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_selection.py --split dev
    .venv/bin/python bench/eval_selection.py --set fresh --split dev --pipelines core words
    .venv/bin/python bench/eval_selection.py --split dev --replay   # from the recording, no model
    .venv/bin/python bench/eval_selection.py --sample 40 --pipelines  # 40 messages, routing only

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

Sets (``--set``): ``labelled`` (``bench/selection/labelled.yaml``, a regression check: its
messages were read while the old rules were written), ``fresh`` (``fresh.yaml``, written before
the redesign and held out) and ``languages`` (``languages.yaml``, German and Spanish, test only).
Pipelines (``--pipelines``): the names of ``scoring.PIPELINES`` or comma-joined step lists. Every
reply is recorded in ``bench/selection/replay/<set>-<split>.jsonl`` (``--replay`` answers from it
alone, ``--no-record`` neither records nor replays).
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
from toolwire.llm import LanguageModel, collect_calls
from toolwire.orchestrator import DomainOrchestrator
from toolwire.selection.routing import DomainRouter
from toolwire.settings import LLMSettings, OrchestratorSettings

SETS = {
    name: Path(__file__).resolve().parent / "selection" / f"{name}.yaml"
    for name in ("labelled", "fresh", "languages")
}
REPLAY_FOLDER = Path(__file__).resolve().parent / "selection" / "replay"

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
    an off-topic message: the default domain answers it) is the right one; a routing whose model
    call failed is wrong (a failure is no decision)."""
    orchestrators = {
        name: DomainOrchestrator(domain, app.registry, app.tools, llm, OrchestratorSettings())
        for name, domain in app.domains.items()
    }
    router = DomainRouter.build(
        {name: o.domain for name, o in orchestrators.items()},
        {name: o.describing_tools() for name, o in orchestrators.items()},
    )
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    lexical = calls_made = 0
    started = time.perf_counter()
    for message in messages:
        with collect_calls() as calls:
            decision = await router.route(
                message.message,
                llm,
                attempts=2,
                select=lambda domain, text: orchestrators[domain].select_first(text),
            )
        record = decision.record
        calls_made += len(calls)
        lexical += record.decided_by == "lexical"
        kind = kind_of(message)
        total[kind] += 1
        right[kind] += record.decided_by != "failure" and record.domain == message.domain
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
    parser.add_argument("--set", choices=sorted(SETS), default="labelled")
    parser.add_argument("--split", choices=["dev", "test", "all"], default="test")
    parser.add_argument(
        "--pipelines",
        "--modes",
        dest="pipelines",
        nargs="*",
        default=["core"],
        help="pipelines (scoring.PIPELINES or comma-joined steps); none: routing only",
    )
    parser.add_argument("--replay", action="store_true", help="answer from the recording alone")
    parser.add_argument("--no-record", action="store_true", help="neither record nor replay")
    parser.add_argument(
        "--sample", type=int, default=0, help="N messages spread evenly over the split"
    )
    parser.add_argument("--local-model", default=None, help="e.g. qwen2.5-coder-0.5b")
    parser.add_argument("--no-routing", action="store_true", help="selection figures only")
    parser.add_argument("--verbose", action="store_true", help="print every wrong selection")
    args = parser.parse_args()

    from replay_model import replayed_model

    messages = load_labelled(SETS[args.set], split=None if args.split == "all" else args.split)
    if 0 < args.sample < len(messages):
        messages = [messages[i * len(messages) // args.sample] for i in range(args.sample)]
    settings = LLMSettings(**({"local_model": args.local_model} if args.local_model else {}))
    model_name = settings.local_model
    recording = REPLAY_FOLDER / f"{args.set}-{args.split}-{model_name}.jsonl"
    llm, transport = replayed_model(
        None if args.no_record else recording, replay_only=args.replay, settings=settings
    )
    app = selection_app(llm=llm)
    rotation = sorted(name for name, tools in selectable_tools(app).items() if tools)
    print(f"== Tool selection on the embedded model ({model_name}), {args.set} set ==")
    print(
        f"{len(messages)} messages ({args.split} split), {len(app.domains)} domains, "
        f"{sum(len(t) for t in selectable_tools(app).values())} selectable tools"
    )
    try:
        if not args.replay:
            await warm_up(llm)
        cases = cases_of(messages, rotation)
        tallies = await evaluate_modes(args.pipelines, cases, llm, app, KINDS, args.verbose)
        print_kinds(tallies)
        if not args.no_routing:
            await evaluate_routing(messages, llm, app, args.verbose)
        if transport is not None:
            print(f"(replayed {transport.hits} replies, asked the model {transport.misses})")
    finally:
        await llm.aclose()
        await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
