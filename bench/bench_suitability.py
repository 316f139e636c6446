"""Batched against per-tool suitability: accuracy, calls, tokens, cache share and latency.

Part 1 (the embedded model, unless --skip-local): a labelled set of 18 messages over six tools,
both modes; accuracy per yes/no decision and per message (every decision right).
Part 2 (the fake OpenAI-compatible server, which counts tokens and simulates a prefix cache as
OpenAI does): 10 and 100 tools, model calls, prompt tokens and the cached share per question.

    .venv/bin/python bench/bench_suitability.py [--skip-local] [--questions N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from dataclasses import dataclass

import structlog

from toolwire.llm import OpenAIGateway, SuitabilityQuestion, collect_calls, create_language_model
from toolwire.settings import LLMSettings
from toolwire.testing.fake_openai import FakeOpenAIServer

TOOLS = [
    SuitabilityQuestion(
        tool_name="pharma.drug_info",
        question="Does the task ask what a medicine is, what it is used for, its dose or its "
        "side effects?",
    ),
    SuitabilityQuestion(
        tool_name="pharma.interactions",
        question="Does the task ask whether two medicines can be taken together?",
    ),
    SuitabilityQuestion(
        tool_name="weather.forecast", question="Does the task ask about the weather?"
    ),
    SuitabilityQuestion(
        tool_name="travel.trains", question="Does the task ask about train times or trains?"
    ),
    SuitabilityQuestion(
        tool_name="finance.exchange",
        question="Does the task ask to convert money between currencies?",
    ),
    SuitabilityQuestion(
        tool_name="docs.python",
        question="Does the task ask how to do something in the Python programming language?",
    ),
]

LABELLED: list[tuple[str, set[str]]] = [
    ("What is paracetamol used for?", {"pharma.drug_info"}),
    ("What are the side effects of metformin?", {"pharma.drug_info"}),
    ("What is the maximum daily dose of ibuprofen?", {"pharma.drug_info"}),
    ("Can I take ibuprofen together with warfarin?", {"pharma.interactions"}),
    ("Is it safe to combine aspirin and clopidogrel?", {"pharma.interactions"}),
    ("Does omeprazole interact with clopidogrel?", {"pharma.interactions"}),
    ("Will it rain in Budapest tomorrow?", {"weather.forecast"}),
    ("How cold will it be in Oslo this weekend?", {"weather.forecast"}),
    ("Is it sunny in Rome right now?", {"weather.forecast"}),
    ("When does the next train leave from Vienna to Salzburg?", {"travel.trains"}),
    ("What time does the last train arrive in Munich tonight?", {"travel.trains"}),
    ("How many euros is 100 US dollars?", {"finance.exchange"}),
    ("Convert 50 British pounds to Hungarian forints.", {"finance.exchange"}),
    ("What is the exchange rate from Swiss francs to yen?", {"finance.exchange"}),
    ("How do I read a JSON file in Python?", {"docs.python"}),
    ("Which Python function sorts a list in place?", {"docs.python"}),
    ("How do I merge two pandas DataFrames?", {"docs.python"}),
    ("Tell me a joke about cats.", set()),
]


@dataclass
class ModeResult:
    mode: str
    decisions_right: int = 0
    decisions: int = 0
    messages_right: int = 0
    messages: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    failures: int = 0
    found: int = 0
    """Messages whose expected tool was among the chosen ones (recall)."""
    expected: int = 0
    extra: int = 0
    """Tools chosen that should not have been (false positives)."""

    def row(self) -> str:
        n = max(self.messages, 1)
        cached = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        return (
            f"{self.mode:<9} decisions {self.decisions_right}/{self.decisions} "
            f"({self.decisions_right / max(self.decisions, 1):.0%})  right tool found "
            f"{self.found}/{self.expected}  extra tools/q {self.extra / n:.1f}  exact messages "
            f"{self.messages_right}/{self.messages} ({self.messages_right / n:.0%})  "
            f"calls/q {self.calls / n:.1f}  prompt tok/q {self.prompt_tokens / n:.0f}  "
            f"cached {cached:.0%}  s/q {self.seconds / n:.2f}  failed {self.failures}"
        )


async def run_mode(
    gateway: OpenAIGateway, mode: str, labelled: list[tuple[str, set[str]]], verbose: bool
) -> ModeResult:
    result = ModeResult(mode)
    for message, expected in labelled:
        started = time.perf_counter()
        with collect_calls() as calls:
            try:
                answers = await gateway.suitability(message, TOOLS)
            except Exception as exc:  # a failed question counts as all-wrong, and is reported
                print(f"  [{mode}] {message!r}: {exc}")
                answers = {}
                result.failures += 1
        result.seconds += time.perf_counter() - started
        result.calls += len(calls)
        result.prompt_tokens += sum(call.prompt_tokens for call in calls)
        result.cached_tokens += sum(call.cached_prompt_tokens for call in calls)
        chosen = {name for name, yes in answers.items() if yes}
        right = sum((tool.tool_name in chosen) == (tool.tool_name in expected) for tool in TOOLS)
        result.decisions += len(TOOLS)
        result.decisions_right += right
        result.messages += 1
        result.expected += bool(expected)
        result.found += bool(expected) and expected <= chosen
        result.extra += len(chosen - expected)
        result.messages_right += right == len(TOOLS)
        if verbose and right != len(TOOLS):
            print(
                f"  [{mode}] {message!r}: chose {sorted(chosen)}, expected {sorted(expected)}",
                flush=True,
            )
    return result


async def local_accuracy(verbose: bool, modes: list[str]) -> None:
    print("== Embedded model (qwen2.5-coder-0.5b-instruct Q4_K_M, llama.cpp, 2 threads) ==")
    print(f"{len(LABELLED)} labelled messages x {len(TOOLS)} tools")
    results = []
    for mode in modes:
        gateway = create_language_model(LLMSettings(suitability_mode=mode), environ={})
        assert isinstance(gateway, OpenAIGateway)
        await gateway.suitability("warm-up", TOOLS)  # server start and first prompt eval
        results.append(await run_mode(gateway, mode, LABELLED, verbose))
        await gateway.aclose()
        print(results[-1].row(), flush=True)


def synthetic_tools(count: int) -> list[SuitabilityQuestion]:
    return [
        SuitabilityQuestion(
            tool_name=f"domain{i % 5}.tool_{i:03d}",
            question=f"Does the task ask about topic number {i}, its details, its history or "
            f"how to use it?",
        )
        for i in range(count)
    ]


async def fake_scaling(questions: int) -> None:
    print("\n== Fake OpenAI-compatible server (tokens ~ chars/4, simulated prefix cache) ==")
    print(f"{questions} questions per row; figures per question after the first (warm cache)")
    async with FakeOpenAIServer() as server:
        for count in (10, 100):
            tools = synthetic_tools(count)
            for mode in ("batched", "per_tool"):
                settings = LLMSettings(
                    base_url=server.base_url,
                    model="fake",
                    suitability_mode=mode,
                    structured_output="json_schema",
                )
                gateway = OpenAIGateway(settings, api_key="bench")
                per_question = []
                for index in range(questions):
                    with collect_calls() as calls:
                        started = time.perf_counter()
                        await gateway.suitability(f"Question {index}: what about topic 7?", tools)
                        elapsed = time.perf_counter() - started
                    per_question.append((calls, elapsed))
                await gateway.aclose()
                warm = per_question[1:] or per_question
                calls_q = statistics.mean(len(calls) for calls, _ in warm)
                prompt_q = statistics.mean(sum(c.prompt_tokens for c in calls) for calls, _ in warm)
                cached_q = statistics.mean(
                    sum(c.cached_prompt_tokens for c in calls) for calls, _ in warm
                )
                cold_prompt = sum(c.prompt_tokens for c in per_question[0][0])
                print(
                    f"{count:>3} tools {mode:<9} calls/q {calls_q:>5.0f}  prompt tok/q "
                    f"{prompt_q:>7.0f}  uncached tok/q {prompt_q - cached_q:>6.0f}  cached share "
                    f"{cached_q / prompt_q:>4.0%}  (first question {cold_prompt} tok)  "
                    f"gateway ms/q {1000 * statistics.mean(e for _, e in warm):.1f}"
                )


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-local", action="store_true", help="only the fake-server part")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--verbose", action="store_true", help="print every wrong decision")
    parser.add_argument("--modes", nargs="+", default=["batched", "per_tool"])
    parser.add_argument("--skip-fake", action="store_true", help="only the embedded-model part")
    args = parser.parse_args()
    if not args.skip_local:
        await local_accuracy(args.verbose, args.modes)
    if not args.skip_fake:
        await fake_scaling(args.questions)


if __name__ == "__main__":
    asyncio.run(main())
