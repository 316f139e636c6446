"""Multi-turn conversations on the configured model (the embedded one by default): later turns
that need earlier ones, and turns that change the subject, with and without the history.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_conversations.py --limit 12

Each conversation of ``bench/conversations/pharma.jsonl`` is labelled turn by turn: the tools
that must run on the turn's task and the products their (guaranteed, verbatim) answer must name,
and the products it must not name (the old topic). Two modes, one after the other in one run:

* ``history``: the turns sent as one conversation (``session_id``): a later turn reads the turns
  before and is rewritten to stand on its own;
* ``alone``: the same messages sent each as a new conversation (what toolwire did before).

Printed per mode: later turns right (exact tool set and every product, none of the absent ones),
subject changes right, and per turn kind the model calls, prompt and cached tokens and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire import App
from toolwire.orchestrator import Answer, TaskTrace

SET = Path(__file__).with_name("conversations") / "pharma.jsonl"
RAN = {"guaranteed", "context", "terminal"}
ANSWERING = {"pharma.dosage_info", "pharma.interaction_analysis"}
"""The tools a turn is labelled with (the lookup is a service the coordinator's subtasks use)."""


def ran_tools(trace: TaskTrace) -> set[str]:
    """The answering tools that ran anywhere in the task tree."""
    ran = {run.tool_name for run in trace.tools if run.outcome in RAN}
    for sub_task in trace.sub_tasks:
        ran |= ran_tools(sub_task)
    return ran & ANSWERING


@dataclass
class Tally:
    """One mode's figures, by turn role (first, follow_up, subject_change)."""

    right: dict[str, list[bool]] = field(default_factory=dict)
    calls: dict[str, list[int]] = field(default_factory=dict)
    prompt: dict[str, list[int]] = field(default_factory=dict)
    cached: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def add(self, role: str, ok: bool, answer: Answer, seconds: float) -> None:
        self.right.setdefault(role, []).append(ok)
        self.calls.setdefault(role, []).append(answer.usage.llm_calls)
        self.prompt.setdefault(role, []).append(answer.usage.prompt_tokens)
        self.cached.setdefault(role, []).append(answer.usage.cached_prompt_tokens)
        self.seconds.setdefault(role, []).append(seconds)


def judged(turn: dict[str, Any], answer: Answer) -> bool:
    """The turn's exact tool set ran, its answer names every expected product and none of the
    absent ones (read in the tools' guaranteed answers, verbatim)."""
    ran = ran_tools(answer.trace)
    found = " ".join(answer.guaranteed_contexts).lower()
    named = all(product.lower() in found for product in turn["products"])
    dragged = any(product.lower() in found for product in turn["absent"])
    return ran == set(turn["tools"]) and named and not dragged


async def run(app: App, conversations: list[dict[str, Any]], mode: str) -> Tally:
    tally = Tally()
    for conversation in conversations:
        session: str | None = None
        for turn in conversation["turns"]:
            started = time.perf_counter()
            try:
                answer = await app.ask(turn["message"], "pharma", session)
            except Exception as error:  # a failed turn counts as wrong; the run goes on
                print(f"  {conversation['id']}: {turn['message']!r} failed: {error}")
                session = None
                continue
            seconds = time.perf_counter() - started
            ok = judged(turn, answer)
            tally.add(turn["role"], ok, answer, seconds)
            if not ok:
                ran = sorted(ran_tools(answer.trace))
                tally.misses.append(
                    f"{conversation['id']} {turn['message']!r}: ran {ran}, "
                    f"task {answer.trace.task_prompt!r}"
                )
            if mode == "history":
                session = answer.session_id if answer.kind != "clarification" else None
    return tally


def report(mode: str, tally: Tally) -> None:
    print(f"\n== {mode}")
    for role in ("first", "follow_up", "subject_change"):
        if role not in tally.right:
            continue
        right, n = sum(tally.right[role]), len(tally.right[role])
        prompt, cached = sum(tally.prompt[role]), sum(tally.cached[role])
        share = cached / prompt if prompt else 0.0
        calls, tokens = statistics.mean(tally.calls[role]), statistics.mean(tally.prompt[role])
        print(
            f"{role:15} right {right}/{n} = {right / n:.2f}; calls {calls:.2f}, prompt "
            f"{tokens:.0f} tokens ({share:.0%} cached), "
            f"{statistics.mean(tally.seconds[role]):.1f} s a turn"
        )
    if "first" in tally.seconds and "follow_up" in tally.seconds:
        later = tally.seconds["follow_up"] + tally.seconds.get("subject_change", [])
        ratio = statistics.mean(later) / statistics.mean(tally.seconds["first"])
        print(f"later turn / first turn seconds: {ratio:.2f}")
    for miss in tally.misses:
        print(f"  miss: {miss}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="the first N conversations only")
    parser.add_argument("--modes", default="history,alone")
    args = parser.parse_args()
    conversations = [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]
    if args.limit:
        conversations = conversations[:: max(1, len(conversations) // args.limit)][: args.limit]
    print(
        f"{len(conversations)} conversations, {sum(len(c['turns']) for c in conversations)} turns"
    )
    app = App.load(None)
    try:
        for mode in args.modes.split(","):
            report(mode, await run(app, conversations, mode))
    finally:
        await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
