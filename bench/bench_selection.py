"""The cost of tool selection as a domain grows: 10, 100 and 1,000 tools, every pipeline side by
side.

    .venv/bin/python bench/bench_selection.py [--questions N]

Each question runs end to end through ``ConversationService`` and the real OpenAI gateway against
the fake OpenAI-compatible server (``toolwire.testing.fake_openai``: tokens estimated at four
characters, a simulated prefix cache, no latency). The fake model names the best-placed
candidate, confirms it, fills its parameters and answers, so every mode activates one tool and
the downstream calls are the same. Printed per domain size and mode, as medians per question
after a warm-up: model calls, prompt tokens, the cached share, and the framework's own time
(wall time minus the time spent inside model calls, so it does not depend on the fake
server; n/a for ``confirm_all``, whose calls overlap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import statistics
import sys
import time
from pathlib import Path

import structlog
from pydantic import BaseModel, Field

from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.llm import OpenAIGateway
from toolwire.llm.profiles import ModelProfile
from toolwire.orchestrator import ConversationService
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore
from toolwire.settings import LLMSettings, OrchestratorSettings, SelectionSettings
from toolwire.testing import registry_of
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest, default_output

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))
from scoring import PIPELINES

_SUBJECT_WORDS = """
invoice order parcel ticket booking refund contract meeting report budget salary payment
shipment warehouse supplier customer account password license subscription device printer laptop
server backup database network firewall badge parking visitor room desk vehicle flight hotel
visa insurance claim expense receipt
"""
_ACTION_WORDS = """
find create cancel update approve reject track schedule renew archive export import summarise
translate verify reset assign close reopen estimate print share merge split audit
"""
SUBJECTS = tuple(_SUBJECT_WORDS.split())
ACTIONS = tuple(_ACTION_WORDS.split())


class Target(BaseModel):
    reference: str = Field(description="the identifier or name of the item")
    note: str = Field(default="", description="anything else the message says")


class SyntheticTool(OrchestratorActivatedTool[Target]):
    """Stands for one of many similar business tools (``<action>_<subject>``)."""

    def __init__(self, action: str, subject: str) -> None:
        self.name = f"{action}_{subject}"
        self.action, self.subject = action, subject

    def description(self) -> str:
        return f"{self.action.capitalize()}s a {self.subject} in the company's records."

    def executable_instruction(self) -> str:
        return f"Does the message ask to {self.action} a {self.subject}?"

    def execute_with_result(self, params: Target, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"{self.name} done for {params.reference}")


def synthetic_tools(count: int) -> list[SyntheticTool]:
    pairs = [(action, subject) for subject in SUBJECTS for action in ACTIONS]
    return [SyntheticTool(action, subject) for action, subject in pairs[:count]]


TARGET = re.compile(r"Please (\w+) the (\w+) number")


def fake_model(request: FakeRequest) -> FakeReply:
    """A model that always knows which tool the message needs (``Please <action> the
    <subject> …``): it names that candidate, answers yes to that tool's question only, fills
    the parameters with defaults and answers. Every mode then runs the same one tool."""
    schema = request.output_schema
    prompt = " ".join(str(message.get("content") or "") for message in request.messages)
    found = TARGET.search(prompt)
    action, subject = found.groups() if found else ("", "")
    asks = f"to {action} a {subject}?"
    if offered := request.offered_functions:  # the choice as a function call
        names = [function.get("name") for function in offered]
        called = [name for name in names if name == f"{action}_{subject}"]
        return FakeReply(calls=[(name, {"reference": "1000"}) for name in called])
    if schema is None:
        return FakeReply(text="Done.")
    properties = schema.get("properties", {})
    if "choice" in properties:
        options = properties["choice"].get("items", {}).get("enum", [])
        chosen = [name for name in options if name == f"{action}_{subject}"]
        return FakeReply(text=json.dumps({"choice": chosen}))
    if "reply" in properties:  # a confirmation carrying the parameters: no, or yes and them
        refused, confirmed = properties["reply"]["anyOf"]
        branch = {**(confirmed if asks in prompt else refused), "$defs": schema.get("$defs", {})}
        return FakeReply(text=json.dumps({"reply": json.loads(default_output(branch))}))
    if properties.get("answer", {}).get("enum") == ["yes", "no"]:
        return FakeReply(text=json.dumps({"answer": "yes" if asks in prompt else "no"}))
    if properties and all(p.get("type") == "boolean" for p in properties.values()):
        answers = {name: asks in p.get("description", "") for name, p in properties.items()}
        return FakeReply(text=json.dumps(answers))
    return FakeReply(text=default_output(schema))


MODES = {
    name: SelectionSettings(steps=list(PIPELINES[name]))
    for name in ("core", "core_args", "words", "call", "call_confirm", "english", "confirm_all")
}
"""The default first (``core``: retrieve, choose, confirm), then the other pipelines of
``scoring.PIPELINES``; ``confirm_all`` asks every candidate's question (no choice)."""


async def measure(
    server: FakeOpenAIServer, count: int, mode: str, questions: int
) -> dict[str, float]:
    tools = synthetic_tools(count)
    registry, instances = registry_of("corp", *tools)
    gateway = OpenAIGateway(
        LLMSettings(base_url=server.base_url, model="fake"),
        profile=ModelProfile(structured_output="json_schema"),
        api_key="bench",
    )
    settings = OrchestratorSettings(selection=MODES[mode])
    service = ConversationService(
        registry=registry,
        domains={"corp": DomainSpec(name="corp", description="Company records.")},
        tools=instances,
        llm=gateway,
        store=MemorySessionStore(),
        settings=settings,
    )
    rows: list[tuple[int, int, int, float]] = []
    for index in range(questions + 1):
        tool = tools[(index * 7) % len(tools)]
        message = f"Please {tool.action} the {tool.subject} number {1000 + index} for me."
        started = time.perf_counter()
        answer = await service.ask(message)
        wall_ms = (time.perf_counter() - started) * 1000
        assert answer.kind == "answer", answer
        ran = [run.tool_name for run in answer.trace.tools]
        assert ran == [f"corp.{tool.name}"], f"{mode}: {ran}"  # the same work in every mode
        calls = answer.model_calls
        in_model_ms = sum(call.latency_ms for call in calls)
        rows.append(
            (
                len(calls),
                sum(call.prompt_tokens for call in calls),
                sum(call.cached_prompt_tokens for call in calls),
                wall_ms - in_model_ms,
            )
        )
    await gateway.aclose()
    warm = rows[1:]
    prompt = statistics.median(row[1] for row in warm)
    return {
        "calls": statistics.median(row[0] for row in warm),
        "prompt": prompt,
        "cached": statistics.median(row[2] for row in warm) / max(prompt, 1),
        "overhead_ms": statistics.median(row[3] for row in warm),
    }


def overhead(figures: dict[str, float]) -> str:
    """The framework's own time; n/a where calls overlap (per-tool calls run concurrently, so
    their summed latency exceeds the wall time)."""
    return f"{figures['overhead_ms']:>13.1f}" if figures["overhead_ms"] >= 0 else f"{'n/a':>13}"


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=20)
    args = parser.parse_args()
    print("== Tool selection cost by domain size (fake OpenAI-compatible server, medians) ==")
    print(
        f"{'tools':>5} {'mode':<22} {'calls/q':>7} {'prompt tok/q':>12} {'cached':>6} "
        f"{'overhead ms/q':>13}"
    )
    async with FakeOpenAIServer(fake_model) as server:
        for count in (10, 100, 1000):
            baseline: dict[str, float] | None = None
            for mode in MODES:
                questions = max(3, args.questions // 4) if mode == "confirm_all" else args.questions
                figures = await measure(server, count, mode, questions)
                baseline = baseline or figures
                ratio = figures["prompt"] / baseline["prompt"]
                print(
                    f"{count:>5} {mode:<22} {figures['calls']:>7.0f} {figures['prompt']:>12,.0f} "
                    f"{figures['cached']:>6.0%} {overhead(figures)}"
                    + (f"   ({ratio:.1f}x the tokens of core)" if mode != "core" else ""),
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
