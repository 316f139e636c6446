"""Multi-turn conversations on the configured model (the embedded one by default): later turns
that need earlier ones, and turns that change the subject, with and without the history.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/eval_conversations.py --split dev
    .venv/bin/python bench/eval_conversations.py --domains pharma,travel --limit 6
    .venv/bin/python bench/eval_conversations.py --split dev --record   # keep every reply
    .venv/bin/python bench/eval_conversations.py --split dev --replay   # from them, no model

The set is ``bench/conversations/<domain>.jsonl`` (its labels, matching rules and fixed split:
``bench/conversations/conversation_set.py``), over the bundled pharma and pydocs domains and the
synthetic geometry, finance, travel and office domains, loaded the way the selection evaluation
loads them (``bench/selection/labelled.py``: the plugins as objects, no entry points). Two modes
in one run, one after the other:

* ``history``: each conversation's turns sent as one conversation (``session_id``): a later turn
  reads the turns before and is rewritten to stand on its own; a turn that ends in a clarifying
  question is answered by the next message, as at every front door;
* ``alone``: the same messages each sent as a new conversation (what toolwire did before).

A turn is right when the exact set of its domain's answering tools ran on it (a tool's
clarifying question counts as running), every labelled parameter value is in the parameters
they ran with (``ToolRunRecord.params`` in the answer's trace, any task of the tree), none of
the absent values is, the turn ended as labelled (an answer, or a clarifying question) and the
tools' guaranteed answers hold its ``answer_has`` texts. A turn that raises is wrong, and is
listed with its error; the conversation goes on from what was stored before it.

Printed per mode and per domain: first turns, later turns (``follow_up``) and subject changes
right; per turn role the medians of model calls, prompt tokens and seconds, and the share of the
role's prompt tokens that the server had cached; the ratio of a later turn's median seconds
(follow-ups and subject changes) to a first turn's; every wrong turn with why.

After each turn the run waits, as a user reading the answer would, until the app has settled
(``App.settle``: the next turn's prompt warmed into the server's cache where the model profile
has ``prefix_warming``); that wait is in no turn's seconds and is printed apart (warm-up s).
A run with a recording (``--record``, ``--replay``) warms nothing: its seconds are unwarmed
ones (``replay_model.py`` says why); warmed seconds come from a live run without one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent / "conversations"))

from conversation_set import (
    DOMAINS,
    ROLES,
    SET_DIR,
    LabelledConversation,
    LabelledTurn,
    answering_tools,
    labelling_app,
    load_set,
    matches,
    text_query_tools,
)

from toolwire import App
from toolwire.llm import LanguageModel
from toolwire.orchestrator import Answer, TaskTrace, follow_up
from toolwire.search.requests import search_request
from toolwire.sessions.memory import MemorySessionStore
from toolwire.settings import LLMSettings

RAN = {"guaranteed", "context", "terminal", "clarification"}
"""Outcomes of a tool that ran (one that asked a clarifying question ran too)."""
MODES = ("history", "alone")
REPLAY_FOLDER = SET_DIR / "replay"


class ReferentFirst(BaseModel):
    """Candidate: the model names what the words pointing back mean before it rewrites."""

    refers_to: str = Field(
        description="What the task's words that point back to the conversation mean (a thing "
        "named in an earlier turn); empty when nothing in the task points back"
    )
    task: str = Field(description="The task, understandable without the conversation")


REFERENT_FIRST_INSTRUCTION = (
    "The messages before the task are the earlier turns of this conversation. First write in "
    "refers_to what the task's words that point back to the conversation mean: the thing named "
    "in an earlier turn that they stand for; leave it empty when the task asks about something "
    "new or stands on its own. Then write in task the user's task with those words replaced by "
    "what they mean, completed into a full request like the earlier one when it is short, so "
    "that it can be understood without the conversation; when refers_to is empty, copy the task "
    "exactly. Keep the task's language, copy names and numbers exactly, and never answer the "
    "task."
)


def _referent_first() -> None:
    follow_up.StandaloneTask = ReferentFirst  # type: ignore[misc]
    follow_up.FOLLOW_UP_INSTRUCTION = REFERENT_FIRST_INSTRUCTION


FOLLOW_UP_VARIANTS: dict[str, Callable[[], None]] = {
    "rewrite": lambda: None,
    "referent": _referent_first,
}
"""How a later turn is made to stand on its own: toolwire's own rewrite, or a candidate put in
its place for a measurement (bench/conversations/LOG.md)."""


@dataclass(frozen=True)
class Domain:
    """What judging a turn of one domain needs from the app."""

    name: str
    answering: frozenset[str]
    text_query: frozenset[str]


def runs(trace: TaskTrace) -> Iterator[tuple[TaskTrace, str, dict[str, Any]]]:
    """Every tool run of the task tree that ran: (its task, the tool, its parameters)."""
    for run in trace.tools:
        if run.outcome in RAN:
            yield trace, run.tool_name, dict(run.params or {})
    for sub_task in trace.sub_tasks:
        yield from runs(sub_task)


def ran_with(answer: Answer, domain: Domain) -> dict[str, list[dict[str, Any]]]:
    """The domain's answering tools that ran, each with the parameters of each of its runs; a
    search's empty ``query`` is its task's request, as the search reads it."""
    found: dict[str, list[dict[str, Any]]] = {}
    for task, tool, params in runs(answer.trace):
        if tool not in domain.answering:
            continue
        if tool in domain.text_query and not str(params.get("query") or "").strip():
            params["query"] = search_request(task.task_prompt)
        found.setdefault(tool, []).append(params)
    return found


def misjudged(turn: LabelledTurn, answer: Answer, domain: Domain) -> list[str]:
    """Why the turn is wrong (empty: it is right)."""
    found = ran_with(answer, domain)
    why: list[str] = []
    if set(found) != set(turn.tools):
        why.append(f"ran {sorted(found)}, not {sorted(turn.tools)}")
    for tool, fields in turn.params.items():
        for name, labels in fields.items():
            values = [params.get(name) for params in found.get(tool, [])]
            for label in labels:
                if not any(matches(label, value) for value in values):
                    why.append(f"{tool}.{name} {values} lacks {label!r}")
    for tool, old_fields in turn.absent.items():
        for name, absent in old_fields.items():
            values = [params.get(name) for params in found.get(tool, [])]
            for value in absent:
                if any(matches(value, have) for have in values):
                    why.append(f"{tool}.{name} {values} holds the old {value!r}")
    if answer.kind != turn.answer:
        why.append(f"ended in {answer.kind!r}, not {turn.answer!r}")
    guaranteed = "\n".join(answer.guaranteed_contexts)
    why += [
        f"no guaranteed answer holds {text!r}" for text in turn.answer_has if text not in guaranteed
    ]
    return why


@dataclass
class TurnResult:
    domain: str
    role: str
    right: bool
    answer: Answer | None
    seconds: float


@dataclass
class Tally:
    """One mode's turns, and what went wrong on them."""

    mode: str
    turns: list[TurnResult] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    warm_ups: list[float] = field(default_factory=list)
    """The seconds after each turn until the app settled (its warm-up of the next turn's prompt,
    ``prefix_warming``): spent while a user reads the answer, not in any turn's seconds."""

    def of(self, domain: str | None = None, role: str | None = None) -> list[TurnResult]:
        return [
            t
            for t in self.turns
            if (domain is None or t.domain == domain) and (role is None or t.role == role)
        ]


class Stopwatch:
    """A turn's seconds: the wall time, plus the recorded latency of every reply the recording
    gave instead of the model (a message sent again, in this run or an earlier one, costs what
    the model took for it, not nothing)."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def _replayed_ms(self) -> float:
        return float(self.transport.recorded_ms) if self.transport is not None else 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self._replayed = self._replayed_ms()

    def seconds(self) -> float:
        replayed = (self._replayed_ms() - self._replayed) / 1000
        return time.perf_counter() - self._started + replayed


async def run_mode(
    app: App,
    conversations: dict[str, list[LabelledConversation]],
    domains: dict[str, Domain],
    mode: str,
    clock: Stopwatch,
) -> Tally:
    tally = Tally(mode)
    for name, listed in conversations.items():
        for conversation in listed:
            session: str | None = None
            for number, turn in enumerate(conversation.turns, start=1):
                where = f"{conversation.id} turn {number} ({turn.role}) {turn.message!r}"
                clock.start()
                try:
                    answer = await app.ask(turn.message, name, session)
                except Exception as error:  # a failed turn counts as wrong; the run goes on
                    tally.turns.append(TurnResult(name, turn.role, False, None, clock.seconds()))
                    tally.misses.append(f"{where}: raised {type(error).__name__}: {error}")
                    continue  # in history mode the conversation goes on as it was stored
                seconds = clock.seconds()
                why = misjudged(turn, answer, domains[name])
                tally.turns.append(TurnResult(name, turn.role, not why, answer, seconds))
                if why:
                    notes = answer.context.notes if answer.context is not None else []
                    noted = "".join(f"; {note}" for note in notes)
                    task = answer.trace.task_prompt
                    tally.misses.append(f"{where}: {'; '.join(why)} (task {task!r}{noted})")
                if mode == "history":
                    session = answer.session_id
                clock.start()  # a user reads the answer: the next message waits for the warm-up
                await app.settle()
                tally.warm_ups.append(clock.seconds())
    return tally


def _right(turns: Sequence[TurnResult]) -> str:
    if not turns:
        return "-"
    right = sum(t.right for t in turns)
    return f"{right}/{len(turns)} {right / len(turns):.2f}"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _cost(turns: Sequence[TurnResult]) -> str:
    answered = [t.answer for t in turns if t.answer is not None]
    prompt = sum(a.usage.prompt_tokens for a in answered)
    cached = sum(a.usage.cached_prompt_tokens for a in answered)
    share = f"{cached / prompt:.0%}" if prompt else "-"
    calls = _median([a.usage.llm_calls for a in answered])
    tokens = _median([a.usage.prompt_tokens for a in answered])
    seconds = _median([t.seconds for t in turns if t.answer is not None])
    return f"{len(answered):5} {calls:6.1f} {tokens:7.0f} {share:>7} {seconds:8.1f}"


def ratio(tally: Tally, domain: str | None = None) -> float | None:
    """A later turn's median seconds over a first turn's (later: every turn after the first,
    follow-ups and subject changes alike; turns that raised left out)."""
    first = [t.seconds for t in tally.of(domain, "first") if t.answer is not None]
    later = [t.seconds for t in tally.of(domain) if t.role != "first" and t.answer is not None]
    if not first or not later:
        return None
    return _median(later) / _median(first)


def report(tally: Tally, names: Sequence[str]) -> None:
    print(f"\n== {tally.mode}")
    heads = ("first right", "follow-ups right", "subject right")
    print(f"{'domain':10} " + " ".join(f"{head:>14}" for head in heads) + "  later/first s")
    for name in [*names, None]:
        shown = ratio(tally, name)
        print(
            f"{name or 'all':10} {_right(tally.of(name, 'first')):>14} "
            f"{_right(tally.of(name, 'follow_up')):>14} "
            f"{_right(tally.of(name, 'subject_change')):>14}  "
            + (f"{shown:.2f}" if shown is not None else "-")
        )
    print(
        "medians per turn (cached: share of the role's prompt tokens; turns that raised left out)"
    )
    print(f"{'domain':10} {'role':15} turns  calls  prompt  cached  seconds")
    for name in [*names, None]:
        for role in ROLES:
            turns = tally.of(name, role)
            if turns:
                print(f"{name or 'all':10} {role:15} {_cost(turns)}")
    raised = sum(t.answer is None for t in tally.turns)
    if raised:
        print(f"{raised} turn(s) raised")
    for miss in tally.misses:
        print(f"  miss: {miss}")


def summary(tallies: Sequence[Tally]) -> None:
    print("\n== side by side (all domains)")
    print(
        f"{'mode':8} {'first':>14} {'follow-ups':>14} {'subject':>14} {'first s':>8} "
        f"{'later s':>8} {'later/first s':>14} {'later cached':>13} {'warm-up s':>10}"
    )
    for tally in tallies:
        first = [t.seconds for t in tally.of(role="first") if t.answer is not None]
        later = [t for t in tally.turns if t.role != "first" and t.answer is not None]
        prompt = sum(t.answer.usage.prompt_tokens for t in later if t.answer)
        cached = sum(t.answer.usage.cached_prompt_tokens for t in later if t.answer)
        shown = ratio(tally)
        print(
            f"{tally.mode:8} {_right(tally.of(role='first')):>14} "
            f"{_right(tally.of(role='follow_up')):>14} "
            f"{_right(tally.of(role='subject_change')):>14} "
            f"{_median(first):8.1f} {_median([t.seconds for t in later]):8.1f} "
            f"{(f'{shown:.2f}' if shown is not None else '-'):>14} "
            f"{(f'{cached / prompt:.0%}' if prompt else '-'):>13} "
            f"{_median(tally.warm_ups):10.1f}"
        )
    print("(later: every turn after the first, follow-ups and subject changes alike; seconds are")
    print(" medians; warm-up s: after each turn, until the next turn's prompt was warmed, while")
    print(" a user reads the answer: in no turn's seconds)")


def spread(
    conversations: dict[str, list[LabelledConversation]], limit: int
) -> dict[str, list[LabelledConversation]]:
    """``limit`` conversations spread evenly over the selected ones (in domain and file order)."""
    every = [(name, c) for name, listed in conversations.items() for c in listed]
    if not 0 < limit < len(every):
        return conversations
    kept = {id(every[i * len(every) // limit][1]) for i in range(limit)}
    return {name: [c for c in listed if id(c) in kept] for name, listed in conversations.items()}


def build_app(args: argparse.Namespace) -> tuple[App, LanguageModel | None, Any]:
    """The app the set is labelled against, its sessions in memory; with ``--record`` or
    ``--replay`` its model behind the recording (``bench/selection/replay_model.py``), returned
    to be closed with the recording's transport."""
    store = MemorySessionStore()
    if not (args.record or args.replay):
        return labelling_app(session_store=store), None, None
    from replay_model import replayed_model

    settings = LLMSettings()
    recording = REPLAY_FOLDER / f"{args.split}-{settings.local_model}.jsonl"
    llm, transport = replayed_model(recording, replay_only=args.replay, settings=settings)
    return labelling_app(llm=llm, session_store=store), llm, transport


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--domains", default=",".join(DOMAINS), help=f"comma-joined, of {', '.join(DOMAINS)}"
    )
    parser.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    parser.add_argument(
        "--limit", type=int, default=0, help="N conversations spread evenly over the selection"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-joined, of history,alone")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"keep every reply in {REPLAY_FOLDER.name}/<split>-<model>.jsonl (the model answers "
        "what it lacks)",
    )
    parser.add_argument(
        "--replay", action="store_true", help="answer from that recording alone, no model"
    )
    parser.add_argument(
        "--warming",
        choices=["profile", "off"],
        default="profile",
        help="warm the next turn's prompt between turns as the model profile says "
        "(prefix_warming), or never (to measure what warming saves)",
    )
    parser.add_argument(
        "--follow-up",
        choices=sorted(FOLLOW_UP_VARIANTS),
        default="rewrite",
        help="how a later turn is made to stand on its own: toolwire's rewrite, or a candidate",
    )
    args = parser.parse_args()
    FOLLOW_UP_VARIANTS[args.follow_up]()
    names = [name.strip() for name in args.domains.split(",") if name.strip()]
    unknown = sorted(set(names) - set(DOMAINS))
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if unknown or not names or set(modes) - set(MODES) or not modes:
        parser.error(f"domains are {', '.join(DOMAINS)}; modes are {', '.join(MODES)}")
    chosen = load_set(names, None if args.split == "all" else args.split)
    conversations = spread(chosen, args.limit)
    turns = sum(len(c.turns) for listed in conversations.values() for c in listed)
    count = sum(len(listed) for listed in conversations.values())
    print(f"{count} conversations, {turns} turns ({args.split} split; {', '.join(names)})")
    app, own_llm, transport = build_app(args)
    if args.warming == "off":
        from replay_model import without_warming

        without_warming(app.llm)
    domains = {
        name: Domain(
            name, frozenset(answering_tools(app, name)), frozenset(text_query_tools(app, name))
        )
        for name in names
    }
    try:
        if not args.replay:
            from scoring import warm_up

            await warm_up(app.llm)
        tallies = []
        for mode in modes:
            tally = await run_mode(app, conversations, domains, mode, Stopwatch(transport))
            report(tally, names)
            tallies.append(tally)
        summary(tallies)
        if transport is not None:
            print(f"(replayed {transport.hits} replies, asked the model {transport.misses})")
    finally:
        if own_llm is not None:
            await own_llm.aclose()
        await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
