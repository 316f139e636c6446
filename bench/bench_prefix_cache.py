"""Time to first token on the embedded server: unchanged prefix against a prefix changed in its
first bytes (seed 004, experiment 2-1; the "Current time: {{now}}" incident).

The same long system prompt (a tool catalogue, as toolwire sends) is followed by different
questions. With the prefix unchanged, llama.cpp reuses the KV cache of the shared tokens and
evaluates only the new tail; a timestamp line put in front changes the first bytes, so every
token after it is evaluated again.

    .venv/bin/python bench/bench_prefix_cache.py [--rounds N] [--tools N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time

import structlog
from openai import AsyncOpenAI

from toolwire.llm.local import DEFAULT_LOCAL_MODEL, LocalModelServer

MODEL_NAME = DEFAULT_LOCAL_MODEL

QUESTIONS = [
    "Can I take ibuprofen together with warfarin?",
    "Will it rain in Budapest tomorrow?",
    "How many euros is 100 US dollars?",
    "When does the next train leave for Vienna?",
    "How do I read a JSON file in Python?",
    "What are the side effects of metformin?",
]


def system_prompt(tools: int) -> str:
    lines = [
        "You decide which tools should handle a user's task. Each tool has a yes/no question.",
        "Answer true only when the answer to the tool's question is clearly yes for the task.",
        "",
        "Tools and their questions:",
    ]
    lines += [
        f"- domain{i % 5}-tool_{i:03d}: Does the task ask about topic number {i}, its details, "
        "its history or how to use it?"
        for i in range(tools)
    ]
    return "\n".join(lines)


async def time_to_first_token(client: AsyncOpenAI, system: str, question: str) -> float:
    started = time.perf_counter()
    stream = await client.chat.completions.create(
        model=MODEL_NAME,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        temperature=0,
        max_tokens=4,
        stream=True,
    )
    first: float | None = None
    async for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
    return first if first is not None else time.perf_counter() - started


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tools", type=int, default=40, help="tools in the system prompt")
    parser.add_argument(
        "--prompt-cache", action="store_true", help="llama.cpp's prompt cache in RAM on"
    )
    args = parser.parse_args()

    server = LocalModelServer(cache_mib=512 if args.prompt_cache else 0)
    base_url = await server.ensure_started()
    client = AsyncOpenAI(base_url=base_url, api_key="not-needed", timeout=300)
    system = system_prompt(args.tools)
    try:
        await time_to_first_token(client, system, "warm-up")  # fills the cache with the prefix
        unchanged: list[float] = []
        changed: list[float] = []
        for index in range(args.rounds):
            question = QUESTIONS[index % len(QUESTIONS)]
            # a prefix changed in its first bytes, as a per-request timestamp would do
            stamped = f"Current time: 2026-01-01 12:00:{index:02d}\n{system}"
            changed.append(await time_to_first_token(client, stamped, question))
            await time_to_first_token(client, system, "re-warm")  # back to the stable prefix
            unchanged.append(await time_to_first_token(client, system, question))
        tokens = await client.chat.completions.create(
            model=MODEL_NAME,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "x"}],
            max_tokens=1,
        )
    finally:
        await client.close()
        await server.aclose()

    prompt_tokens = tokens.usage.prompt_tokens if tokens.usage else 0
    median_unchanged = statistics.median(unchanged)
    median_changed = statistics.median(changed)
    print(f"== Time to first token, embedded model {MODEL_NAME} (llama.cpp) ==")
    print(f"system prompt: {args.tools} tools, {len(system)} chars, ~{prompt_tokens} tokens")
    print(f"prompt cache option: {'on' if args.prompt_cache else 'off'}; rounds: {args.rounds}")
    print(f"unchanged prefix:        median {median_unchanged * 1000:7.0f} ms  {_ms(unchanged)}")
    print(f"prefix changed at start: median {median_changed * 1000:7.0f} ms  {_ms(changed)}")
    print(f"ratio changed/unchanged: {median_changed / median_unchanged:.1f}x")


def _ms(values: list[float]) -> str:
    return "[" + ", ".join(f"{value * 1000:.0f}" for value in values) + "]"


if __name__ == "__main__":
    asyncio.run(main())
