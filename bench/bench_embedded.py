"""Whole questions on the embedded models: calls, prompt tokens, cache share and seconds.

The README's two questions, the pydocs evaluation questions (bench/eval_pydocs.py) and the
pharma story (a clarifying question and its reply, then a dosage question) run end to end through
``App.ask``, once per embedded model, in one run. Per question: model calls, prompt tokens, the
share the server took from its cache, seconds; per model: medians and totals, and the pydocs
evaluation figures. (The per-purpose layout this bench once compared against is gone;
docs/models.md keeps the comparison's figures.)

``--pipelines`` (first argument) runs the same questions on two commits instead, today's pipeline
against a later one, and reports the issue-33 figures (``bench/embedded_pipelines.py``).

Part 1 measures where each structured-output mode puts the schema (a grammar, or rendered into
the prompt by the chat template): two calls with the same messages and different schemas.

    flock /tmp/toolwire-model.lock .venv/bin/python bench/bench_embedded.py
        [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b]
        [--limit N]          # the first N pydocs questions only
        [--skip-schema]      # no part 1
        [--calls]            # every model call: purpose, prompt and cached tokens, shared prefix
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_pydocs import QUESTIONS as PYDOCS_QUESTIONS
from eval_pydocs import ModelRow, summarize

from toolwire.app import App
from toolwire.llm import ChatRequest, Purpose, prompts
from toolwire.llm.builtin_profiles import EMBEDDED_PROFILE
from toolwire.llm.local import local_server
from toolwire.llm.openai_transport import OpenAITransport
from toolwire.orchestrator import Answer
from toolwire.settings import LLMSettings

DEFAULT_MODELS = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
WINDOW = EMBEDDED_PROFILE.context_window_tokens


@dataclass(frozen=True)
class Step:
    """One message of the run: a fresh question, or the reply to the previous step's question."""

    label: str
    domain: str
    message: str
    reply_to_previous: bool = False


README = [
    Step("readme pharma", "pharma", "Can I take ibuprofen together with warfarin?"),
    Step("readme pydocs", "pydocs", "How do I sort the keys when I serialize an object to JSON?"),
]
PHARMA_STORY = [
    Step("story: ambiguous", "pharma", "Can I take Coumadin with Excedrin?"),
    Step("story: the reply", "pharma", "the PM one", reply_to_previous=True),
    Step("story: dosage", "pharma", "How much Advil can I take?"),
]


@dataclass
class Row:
    step: Step
    answer: Answer | None
    seconds: float
    error: str = ""

    @property
    def prompt(self) -> int:
        return self.answer.usage.prompt_tokens if self.answer else 0

    @property
    def cached(self) -> int:
        return self.answer.usage.cached_prompt_tokens if self.answer else 0

    def call_lines(self) -> list[str]:
        """Each model call of the question in order: where the cache was lost."""
        return [
            f"      {call.purpose:15} prompt={call.prompt_tokens:5} "
            f"cached={call.cached_prompt_tokens:5} shared_chars={call.shared_prefix_chars:6} "
            f"completion={call.completion_tokens:4} {call.latency_ms / 1000:5.1f}s"
            for call in (self.answer.model_calls if self.answer else [])
        ]

    def line(self) -> str:
        if self.answer is None:
            return f"  {self.step.label:22} FAILED after {self.seconds:5.1f}s: {self.error[:120]}"
        usage = self.answer.usage
        share = self.cached / self.prompt if self.prompt else 0.0
        return (
            f"  {self.step.label:22} {self.answer.kind:13} calls={usage.llm_calls:2} "
            f"prompt={usage.prompt_tokens:5} cached={usage.cached_prompt_tokens:5} "
            f"({share:4.0%}) completion={usage.completion_tokens:4} {self.seconds:6.1f}s"
            f"{' failures=' + str(len(self.answer.failures)) if self.answer.failures else ''}"
        )


@dataclass
class Run:
    config: str
    rows: list[Row] = field(default_factory=list)
    pydocs: list[ModelRow] = field(default_factory=list)

    @property
    def answered(self) -> list[Row]:
        return [row for row in self.rows if row.answer is not None]

    def median_seconds(self) -> float:
        return statistics.median(row.seconds for row in self.rows)

    def by_purpose(self) -> dict[str, tuple[int, int, int, float]]:
        """Purpose → (calls, prompt tokens, cached prompt tokens, milliseconds) over the run."""
        totals: dict[str, tuple[int, int, int, float]] = {}
        for row in self.answered:
            for call in row.answer.model_calls if row.answer else []:
                calls, prompt, cached, ms = totals.get(call.purpose, (0, 0, 0, 0.0))
                totals[call.purpose] = (
                    calls + 1,
                    prompt + call.prompt_tokens,
                    cached + call.cached_prompt_tokens,
                    ms + call.latency_ms,
                )
        return dict(sorted(totals.items(), key=lambda item: -item[1][1]))

    def cached_share(self) -> float:
        prompt = sum(row.prompt for row in self.rows)
        return sum(row.cached for row in self.rows) / prompt if prompt else 0.0


def steps(limit: int | None) -> list[Step]:
    readme_texts = {step.message for step in README}
    pydocs = [
        Step(f"pydocs {index:02d}", "pydocs", question.text)
        for index, question in enumerate(PYDOCS_QUESTIONS[:limit] if limit else PYDOCS_QUESTIONS)
        if question.text not in readme_texts
    ]
    return [*README, *pydocs, *PHARMA_STORY]


def config_file(directory: Path, model: str) -> Path:
    path = directory / f"{model}.yaml"
    settings = {
        "llm": {"local_model": model},
        "sessions": {"store": "memory"},
        "default_domain": "pharma",
    }
    path.write_text(json.dumps(settings), encoding="utf-8")
    return path


async def run_config(
    config: str, plan: list[Step], directory: Path, timeout_s: float, calls: bool = False
) -> Run:
    app = App.load(config_file(directory, config))
    run = Run(config)
    by_text = {question.text: question for question in PYDOCS_QUESTIONS}
    # the model load is not a question's time
    await local_server(app.config.llm, app.model_profile.context_window_tokens).ensure_started()
    session: str | None = None
    print(f"\n== {config} ==")
    try:
        for step in plan:
            started = time.perf_counter()
            try:
                answer = await asyncio.wait_for(
                    app.ask(
                        step.message,
                        None if step.reply_to_previous else step.domain,
                        session if step.reply_to_previous else None,
                    ),
                    timeout_s,
                )
            except Exception as error:  # a bench reports a failure and goes on
                problem = f"{type(error).__name__}: {error}"
                row = Row(step, None, time.perf_counter() - started, problem)
            else:
                row = Row(step, answer, time.perf_counter() - started)
                session = answer.session_id
                question = by_text.get(step.message)
                if question is not None and step.domain == "pydocs":
                    run.pydocs.append(ModelRow(question, answer, row.seconds))
            run.rows.append(row)
            print(row.line(), flush=True)
            await app.settle()  # the next turn's warm-up runs here, outside any question's time
            if calls:
                print("\n".join(row.call_lines()), flush=True)
    finally:
        await app.aclose()
    return run


def report(runs: list[Run], pydocs_total: int) -> None:
    print("\n== Summary (per question: model calls, prompt tokens, cached share, seconds) ==")
    print(f"{'configuration':36} {'questions':>9} {'failed':>6} {'calls/q':>7} {'prompt/q':>8} "
          f"{'cached':>7} {'median s':>8} {'mean s':>7}")  # fmt: skip
    for run in runs:
        answered = run.answered
        calls = statistics.mean(r.answer.usage.llm_calls for r in answered if r.answer)
        prompt = statistics.mean(r.prompt for r in answered) if answered else 0
        seconds = [row.seconds for row in run.rows]
        print(
            f"{run.config:36} {len(run.rows):9} {len(run.rows) - len(answered):6} {calls:7.1f} "
            f"{prompt:8.0f} {run.cached_share():7.0%} {run.median_seconds():8.1f} "
            f"{statistics.mean(seconds):7.1f}"
        )
    print("\n== By purpose: calls, prompt tokens, cached share, seconds per call ==")
    for run in runs:
        print(f"-- {run.config}")
        for purpose, (calls, prompt, cached, ms) in run.by_purpose().items():
            share = cached / max(prompt, 1)
            print(f"  {purpose:15} {calls:4} calls {prompt:7} prompt {share:5.0%} cached "
                  f"{ms / calls / 1000:6.1f} s/call")  # fmt: skip
    for run in runs:
        print(f"\n-- pydocs evaluation, {run.config} --")
        failed = pydocs_total - len(run.pydocs)
        print("\n".join(summarize(run.pydocs, failed)))


class DrugPair(BaseModel):
    drug_a: str
    drug_b: str


class Verdict(BaseModel):
    sufficient: bool
    missing: list[str]


async def schema_placement(model: str) -> None:
    """Two calls, same messages, different schemas: what the second one reuses, per mode."""
    settings = LLMSettings(local_model=model)
    server = local_server(settings, WINDOW)
    base_url = await server.ensure_started()
    task = "Can I take ibuprofen together with warfarin? " * 8
    prompt = prompts.extract_prompt(Purpose.PARAMETERS, task, "", DrugPair)
    messages = prompt.messages()
    print(f"== Where the schema goes ({model}; the same {len(messages)} messages, two schemas) ==")
    for mode in ("json_schema", "tools"):
        transport = OpenAITransport(base_url=base_url, model=model, structured_output=mode)
        figures = []
        for schema in (DrugPair, Verdict, DrugPair):
            request = ChatRequest("parameters", messages, schema, max_tokens=48, timeout_s=300)
            reply = await transport.send(request)
            figures.append((schema.__name__, reply.prompt_tokens, reply.cached_prompt_tokens))
        await transport.aclose()
        shown = ", ".join(f"{name}: {prompt} prompt / {cached} cached" for name, prompt, cached
                          in figures)  # fmt: skip
        print(f"  {mode:12} {shown}")
    await server.aclose()


def main() -> None:
    if sys.argv[1:2] == ["--pipelines"]:  # issue 33: today's pipeline against a later commit
        from embedded_pipelines import main as pipelines

        pipelines(sys.argv[2:])
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="embedded models, comma-separated")  # fmt: skip
    parser.add_argument("--limit", type=int, default=None, help="the first N pydocs questions")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per question")
    parser.add_argument("--skip-schema", action="store_true", help="no schema placement part")
    parser.add_argument("--calls", action="store_true", help="print every model call")
    arguments = parser.parse_args()
    plan = steps(arguments.limit)
    evaluated = {question.text for question in PYDOCS_QUESTIONS}
    pydocs_total = sum(step.message in evaluated for step in plan)
    print(f"{len(plan)} steps per model")

    async def everything() -> list[Run]:
        if not arguments.skip_schema:
            await schema_placement("qwen2.5-coder-1.5b")
        runs = []
        with tempfile.TemporaryDirectory() as directory:
            for config in arguments.models.split(","):
                run = await run_config(
                    config, plan, Path(directory), arguments.timeout, arguments.calls
                )
                runs.append(run)
        return runs

    report(asyncio.run(everything()), pydocs_total)


if __name__ == "__main__":
    main()
