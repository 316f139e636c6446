"""The default selection steps on a sample of the labelled set, replayed from the embedded
model's recorded replies (``bench/selection/replay/``): a regression check in seconds, with no
model. A change to a step's logic shows in the figures; a change to a prompt shows as replies
the recording lacks (record again: ``bench/eval_selection.py --set labelled --split dev
--sample 40 --modes core --no-routing`` on the embedded model)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH / "selection")]

from eval_selection import KINDS, REPLAY_FOLDER, SETS, cases_of  # noqa: E402
from labelled import load_labelled, selectable_tools, selection_app  # noqa: E402
from replay_model import replayed_model  # noqa: E402
from scoring import PIPELINES, evaluate_modes  # noqa: E402

from toolwire.llm.profiles import DEFAULT_SELECTION_STEPS  # noqa: E402

SAMPLE = 40
RECORDING = REPLAY_FOLDER / "labelled-dev-qwen2.5-coder-1.5b.jsonl"


async def test_the_default_steps_select_on_the_labelled_sample_as_recorded() -> None:
    assert PIPELINES["core"] == DEFAULT_SELECTION_STEPS  # the pipeline replayed is the default
    messages = load_labelled(SETS["labelled"], split="dev")
    messages = [messages[i * len(messages) // SAMPLE] for i in range(SAMPLE)]
    llm, transport = replayed_model(RECORDING, replay_only=True)
    assert transport is not None
    app = selection_app(llm=llm)
    rotation = sorted(name for name, tools in selectable_tools(app).items() if tools)
    try:
        [tally] = await evaluate_modes(
            ["core"], cases_of(messages, rotation), llm, app, KINDS, verbose=False
        )
    finally:
        await app.aclose()

    assert transport.misses == 0, f"{transport.misses} prompts changed since the recording"
    assert (tally.messages, tally.exact, tally.calls) == (38, 31, 76)
    assert tally.right_by_kind == {
        "one tool": 20,
        "two tools": 2,
        "no tool": 4,
        "off-topic": 5,
        "pydocs": 2,
    }
