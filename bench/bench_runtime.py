"""The embedded runtime's own options, measured on whole questions (issue 33, "faster tokens").

Each configuration starts the embedded 1.5B model's server with its launcher options
(``toolwire.llm.embedded_server``: flash attention, the KV cache type, speculative decoding
with the 0.5B model as a draft or with n-grams of the prompt), warms it with one question that
is not measured, then runs the README's two questions, pydocs evaluation questions and the
pharma story end to end through ``App.ask_stream``, one configuration after the other in one
run. Per configuration: median wall seconds and seconds to the first answer token, and the
ratios to the first configuration; whether each answer's text is the same as the first
configuration's (an option that changes the numbers may change an answer).

    flock /tmp/toolwire-model.lock .venv/bin/python bench/bench_runtime.py
        [--configs no_lookup,shipped,flash,kv_q8,draft] [--pydocs 8]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedded_pipelines import PYDOCS_PICK, README, STORY

from toolwire.app import App
from toolwire.events import AnswerDelta
from toolwire.llm.local import LOCAL_MODELS, LocalModelServer, assemble_model, local_server
from toolwire.orchestrator.streaming import Answered

DRAFT_MODEL = "qwen2.5-coder-0.5b"
"""The draft for speculative decoding: the same family and tokenizer as the served 1.5B."""


def _draft_path() -> str:
    return str(assemble_model(LOCAL_MODELS[DRAFT_MODEL]))


CONFIGS: dict[str, Callable[[], list[str]]] = {
    "no_lookup": lambda: ["--no-lookup"],
    "shipped": lambda: [],
    "flash": lambda: ["--no-lookup", "--flash-attn", "on"],
    "kv_q8": lambda: ["--no-lookup", "--flash-attn", "on", "--kv-type", "q8_0"],
    "draft": lambda: ["--draft", _draft_path()],
}
"""Launcher options by name (computed when the configuration runs); ``shipped`` is the launcher
as toolwire starts it (n-gram lookup on), ``no_lookup`` the launcher before it."""


@dataclass
class Measured:
    config: str
    walls: list[float] = field(default_factory=list)
    first_tokens: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


def _with_options(options: list[str]) -> None:
    """Every embedded server this process starts gets ``options`` on its launcher."""
    command = LocalModelServer._command

    def extended(self: LocalModelServer, model_path: Path, port: int) -> list[str]:
        return [*command(self, model_path, port), *options]

    LocalModelServer._command = extended  # type: ignore[method-assign]


async def _ask(
    app: App, domain: str, message: str, session: str | None
) -> tuple[Any, float, float]:
    started = time.perf_counter()
    first_token = float("nan")
    answer = None
    async for event in app.ask_stream(message, None if session else domain, session):
        if isinstance(event, AnswerDelta) and first_token != first_token:
            first_token = time.perf_counter() - started
        if isinstance(event, Answered):
            answer = event.answer
    assert answer is not None
    seconds = time.perf_counter() - started
    await app.settle()  # the next turn's warm-up, outside the question's time
    return answer, seconds, first_token


async def run_config(name: str, pydocs: int, directory: Path) -> Measured:
    options = CONFIGS[name]()
    config = directory / f"{name}.yaml"
    config.write_text('{"sessions": {"store": "memory"}, "default_domain": "pharma"}')
    _with_options(options)
    app = App.load(config)
    server = local_server(app.config.llm, app.model_profile.context_window_tokens)
    server.shares_running_server = False  # a `toolwire model serve` server has other options
    measured = Measured(name)
    print(f"\n== {name}: {' '.join(options) or '(the launcher as shipped)'} ==", flush=True)
    try:
        await server.ensure_started()
        await _ask(app, "pydocs", "What does the pass statement do?", None)  # warm, unmeasured
        plan = [*README, *((f"pydocs {n}", "pydocs", q, False) for n, q in enumerate(
            PYDOCS_PICK[:pydocs], start=1)), *STORY]  # fmt: skip
        session = None
        for label, domain, message, reply in plan:
            answer, wall, first = await _ask(app, domain, message, session if reply else None)
            session = answer.session_id
            measured.walls.append(wall)
            measured.texts.append(answer.text)
            if first == first:
                measured.first_tokens.append(first)
            print(f"  {label:<18} wall={wall:6.1f}s first token={first:6.1f}s", flush=True)
    finally:
        await app.aclose()
        await server.aclose()
        LocalModelServer._command = _original_command  # type: ignore[method-assign]
    return measured


_original_command = LocalModelServer._command


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(rows: list[Measured]) -> None:
    base = rows[0]
    print("\n== Per configuration: medians, and ratios to the first ==")
    print(
        f"{'config':<10} {'wall s':>7} {'ratio':>6} {'1st token s':>11} {'ratio':>6} "
        f"{'same answers':>12}"
    )
    for row in rows:
        same = sum(a == b for a, b in zip(row.texts, base.texts, strict=False))
        print(
            f"{row.config:<10} {_median(row.walls):7.1f} "
            f"{_median(row.walls) / _median(base.walls):6.2f} "
            f"{_median(row.first_tokens):11.1f} "
            f"{_median(row.first_tokens) / _median(base.first_tokens):6.2f} "
            f"{same:>7}/{len(row.texts)}"
        )


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-joined, in order")
    parser.add_argument("--pydocs", type=int, default=len(PYDOCS_PICK), help="pydocs questions")
    args = parser.parse_args()
    names = [name for name in args.configs.split(",") if name]
    if unknown := sorted(set(names) - set(CONFIGS)):
        parser.error(f"unknown configurations {unknown}; known: {', '.join(CONFIGS)}")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            rows.append(await run_config(name, args.pydocs, Path(directory)))
    report(rows)


if __name__ == "__main__":
    asyncio.run(main())
