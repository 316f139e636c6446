"""What the selection evaluations (``bench/eval_selection.py``, ``bench/eval_functions.py``)
share: the modes as settings, one case put to a domain's own selection step, and the tally and
rows they print per mode.

Each case goes through the orchestrator's selection step (SPEC §3 step 5,
``DomainOrchestrator.selector``) in its domain, with the mode's settings; the tally counts
exact-set accuracy, tool precision and recall, the refusal rate on cases no tool should take,
model calls, prompt tokens (and the cached share) and seconds per case, and exact-set accuracy by
kind of case.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from toolwire.app import App
from toolwire.llm import CallRecord, LanguageModel, SuitabilityQuestion, collect_calls
from toolwire.orchestrator import DomainOrchestrator
from toolwire.orchestrator.execution import extract_params
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.tools import ChatbotTool

PIPELINES: dict[str, tuple[str, ...]] = {
    "core": ("retrieve", "choose", "confirm"),
    "core_args": ("retrieve", "choose", "confirm", "arguments"),
    "call": ("retrieve", "call"),
    "call_confirm": ("retrieve", "call", "confirm"),
    "choose_only": ("retrieve", "choose"),
    "confirm_all": ("retrieve", "confirm"),
    "words": ("retrieve", "decisive_words", "choose", "confirm"),
    "english": (
        "retrieve",
        "choose",
        "confirm",
        "english.several_requests",
        "english.leading_action",
    ),
}
"""The pipelines the evaluations compare, by name; any other name is a comma-joined step list
(``retrieve,choose,confirm``), optionally followed by ``:k=<top_k>``."""


def selection_settings(spec: str) -> SelectionSettings:
    """The selection settings of a pipeline name or step list (see :data:`PIPELINES`)."""
    name, _, options = spec.partition(":")
    steps = PIPELINES.get(name) or tuple(filter(None, name.split(",")))
    values: dict[str, Any] = {"steps": list(steps)}
    for option in filter(None, options.split(",")):
        key, _, value = option.partition("=")
        values[{"k": "top_k"}.get(key, key)] = int(value)
    return SelectionSettings(**values)


@dataclass(frozen=True)
class Case:
    """One message to select tools for, and the exact set that should take it."""

    id: str
    text: str
    domain: str
    """The domain whose selection step it is put to."""
    expected: frozenset[str]
    """Prefixed names of the tools that should run; empty: none."""
    kind: str
    scored: bool = True
    """False: counted by kind only (a domain with nothing to choose)."""


@dataclass
class Tally:
    """What one mode did on a set."""

    mode: str
    kinds: Sequence[str]
    """The kinds of case, in the order the kinds row lists them."""
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
    """Tools whose parameters came with the selection (the ``call`` step carried them)…"""
    carried_as_extracted: int = 0
    """…and of them, those equal to what the tool's own extraction gives."""

    def add(
        self,
        case: Case,
        chosen: set[str],
        calls: Sequence[CallRecord],
        seconds: float,
        failure: str | None = None,
    ) -> bool:
        """Count one case; whether the chosen set was exactly right. A case whose selection
        had a step fail (``failure``) is wrong whatever was chosen: a failure is no refusal."""
        expected = set(case.expected)
        right = failure is None and chosen == expected
        self.by_kind[case.kind] += 1
        self.right_by_kind[case.kind] += right
        if not case.scored:
            return right
        self.messages += 1
        self.exact += right
        self.true_positives += len(chosen & expected)
        self.false_positives += len(chosen - expected)
        self.false_negatives += len(expected - chosen)
        if not expected:
            self.no_tool_messages += 1
            self.refusals += failure is None and not chosen
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
            for kind in self.kinds
            if self.by_kind[kind]
        ]
        if self.carried:
            cells.append(
                f"(parameters carried by the selection equal to the tool's own extraction: "
                f"{self.carried_as_extracted}/{self.carried})"
            )
        return f"{self.mode:<22} " + "  ".join(cells)


HEADER = (
    f"{'mode':<22} {'exact':>5} {'precision':>9} {'recall':>6} {'refusal':>7} "
    f"{'calls/m':>7} {'prompt/m':>8} {'cached':>6} {'s/m':>6} {'fails':>5}"
)


def print_row(tallies: Sequence[Tally]) -> None:
    """The last tally's row, under the header when it is the first."""
    row = tallies[-1].row()
    print(row if len(tallies) > 1 else f"{HEADER}\n{row}", flush=True)


def print_kinds(tallies: Sequence[Tally]) -> None:
    if tallies:
        print("\nexact-set accuracy by kind")
    for tally in tallies:
        print(tally.kinds_row())


async def warm_up(llm: LanguageModel) -> None:
    """Start and warm the model, so that the server's start is not measured. The embedded model
    is warmed directly (``warm_up``), past any recording: a warm-up answered from the recording
    would leave the server cold, and the first reply the recording lacks would keep the start's
    seconds as its latency. Another model gets one call."""
    start = getattr(llm, "warm_up", None)
    if start is not None:
        await start()
        return
    question = SuitabilityQuestion(tool_name="warm.up", question="Is this a test?")
    await llm.suitability("warm-up", [question])


async def evaluate_modes(
    specs: Sequence[str],
    cases: Sequence[Case],
    llm: LanguageModel,
    app: App,
    kinds: Sequence[str],
    verbose: bool,
) -> list[Tally]:
    """Every mode over every case, one row printed per mode as it finishes."""
    tallies: list[Tally] = []
    for spec in specs:
        settings = OrchestratorSettings(selection=selection_settings(spec))
        orchestrators = {
            name: DomainOrchestrator(domain, app.registry, app.tools, llm, settings)
            for name, domain in app.domains.items()
        }
        tallies.append(await evaluate(spec, cases, llm, orchestrators, kinds, verbose))
        print_row(tallies)
    return tallies


async def evaluate(
    spec: str,
    cases: Sequence[Case],
    llm: LanguageModel,
    orchestrators: dict[str, DomainOrchestrator],
    kinds: Sequence[str],
    verbose: bool,
) -> Tally:
    """One mode over every case, each through its domain's own selection step."""
    tally = Tally(spec, kinds)
    tools = {
        entry.qualified_name: entry.tool
        for orchestrator in orchestrators.values()
        for entry in orchestrator.selector.catalogue.tools
    }
    for case in cases:
        started = time.perf_counter()
        with collect_calls() as calls:
            selection = await orchestrators[case.domain].selector.select(case.text, llm, attempts=2)
        record = selection.record
        seconds = time.perf_counter() - started
        chosen = set(record.activated)
        right = tally.add(case, chosen, list(calls), seconds, record.failure)
        for name, carried in selection.parameters.items():  # measured, not counted as calls
            extracted = await own_extraction(llm, tools[name], case.text)
            tally.carried += 1
            tally.carried_as_extracted += carried == extracted
            if verbose and carried != extracted:
                print(
                    f"  [{spec}] {case.id}: {name} carried {carried!r}, extracted {extracted!r}",
                    flush=True,
                )
        if verbose and not right:
            reasons = "; ".join(f"{name}: {why}" for name, why in record.reasons().items())
            print(
                f"  [{spec}] {case.id}: chose {sorted(chosen)}, expected "
                f"{sorted(case.expected)} ({record.describe()}; {reasons}); {case.text[:80]!r}",
                flush=True,
            )
    return tally


async def own_extraction(llm: LanguageModel, tool: ChatbotTool[Any], text: str) -> BaseModel:
    """The parameters the orchestrator's own extraction gives for ``tool``: what parameters a
    step carried (``call``) are compared with."""
    instruction = tool.parameter_instruction()
    return await extract_params(llm, tool.params_model, instruction, text, attempts=1)
