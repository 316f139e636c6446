"""Time to the first streamed event and to the first answer token, beside the full answer, on the
embedded model: the README's pharma question and the pydocs question, watched with
``App.ask_stream`` as ``toolwire ask`` and the HTTP stream watch them.

The model server is started (and the model assembled, on a fresh install) before the clock runs;
that start is reported on its own line. Run it alone on the machine's cores:

    flock /tmp/toolwire-model.lock .venv/bin/python bench/bench_first_token.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass

from toolwire import App
from toolwire.events import AnswerDelta, Event, ModelProgress, observing
from toolwire.llm.factory import resolve_settings
from toolwire.llm.local import local_server
from toolwire.orchestrator.streaming import Answered

QUESTIONS = [
    ("pharma", "Can I take ibuprofen together with warfarin?"),
    ("pydocs", "What does the nonlocal statement do?"),
]


@dataclass
class Timing:
    first_event_s: float
    first_token_s: float | None
    """None: no token was streamed (a tool's guaranteed answer needs no composition)."""
    answer_s: float
    longest_silence_s: float
    """The longest wait between two events: what a watcher stares at."""
    events: int
    model_calls: int


async def watch(app: App, domain: str, question: str) -> Timing:
    started = time.perf_counter()
    seen: list[float] = []
    first_token: float | None = None
    async for event in app.ask_stream(question, domain):
        now = time.perf_counter() - started
        seen.append(now)
        if isinstance(event, AnswerDelta) and first_token is None:
            first_token = now
        if isinstance(event, Answered):
            gaps = [later - earlier for earlier, later in itertools.pairwise(seen)]
            calls = event.answer.usage.llm_calls
            await app.settle()  # the next turn's warm-up, outside the question's time
            return Timing(seen[0], first_token, now, max(gaps), len(seen), calls)
    raise AssertionError("the stream ended without an answer")


async def start_model(app: App) -> float:
    """Start the embedded server the app's model uses (assembling the model on a fresh
    install); the seconds the start took."""
    window = app.model_profile.context_window_tokens
    server = local_server(resolve_settings(app.config.llm), window)
    seen: list[Event] = []
    started = time.perf_counter()
    with observing(seen.append):
        await server.ensure_started()
    ready = [e for e in seen if isinstance(e, ModelProgress) and e.stage == "ready"]
    return ready[0].seconds if ready else time.perf_counter() - started


async def main(rounds: int) -> None:
    os.environ["TOOLWIRE_PLUGINS"] = "pharma,pydocs"
    for variable in ("OPENAI_API_KEY", "TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_LLM_MODEL"):
        os.environ.pop(variable, None)
    with tempfile.TemporaryDirectory() as workdir:
        os.chdir(workdir)  # no config file: the built-in defaults, the embedded model
        app = App.load()
        try:
            startup = await start_model(app)
            print(f"embedded model server start (not counted below): {startup:.1f} s\n")
            print(
                f"{'question':<52} {'first event':>11} {'first token':>11} {'answer':>8} "
                f"{'longest silence':>15} {'events':>6} {'calls':>5}"
            )
            for domain, question in QUESTIONS:
                timings = [await watch(app, domain, question) for _ in range(rounds)]
                tokens = [t.first_token_s for t in timings if t.first_token_s is not None]
                token = f"{statistics.median(tokens):9.1f} s" if tokens else "   (none)  "
                print(
                    f"{domain + ': ' + question:<52} "
                    f"{statistics.median(t.first_event_s for t in timings):9.3f} s {token} "
                    f"{statistics.median(t.answer_s for t in timings):6.1f} s "
                    f"{statistics.median(t.longest_silence_s for t in timings):13.1f} s "
                    f"{statistics.median(t.events for t in timings):6.0f} "
                    f"{statistics.median(t.model_calls for t in timings):5.0f}"
                )
            print("\n(none): the answer is a tool's guaranteed text, composed by no model call")
        finally:
            await app.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each question (median)")
    asyncio.run(main(parser.parse_args().rounds))
