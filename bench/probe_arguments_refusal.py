"""Would the ``arguments`` step's function call, as a third opinion, refuse better? (issue 31)

``arguments`` offers the confirmed tools alone to native function calling and never changes
which tools run. This probe replays ``core_args`` on a BFCL half from its recording (no model)
and scores two stricter readings of the same calls, side by side with the step as it is:

* ``not_called``: a confirmed tool the model, offered it alone, does not call, does not run;
* ``not_valid``: nor does one whose call's arguments do not fit its parameter model (a
  required value missing, a wrong type): the request does not give what the tool needs.

    .venv/bin/python bench/probe_arguments_refusal.py --split dev
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_bfcl import REPLAY_FOLDER, evaluate, load_bfcl
from replay_model import replayed_model
from scoring import PIPELINES

from toolwire.selection.state import SelectionState
from toolwire.selection.steps import arguments as arguments_step
from toolwire.selection.trace import StepRecord

STRICT: dict[str, str] = {}
"""Which reading the patched step applies (set per run)."""


async def _strict_run(self: Any, state: SelectionState, record: StepRecord) -> None:
    tools = list(state.selected or [])
    await _original(self, state, record)
    if not tools or STRICT.get("reading") is None:
        return
    carried = {name for name, verdict in record.verdicts.items() if "carried" in verdict}
    called = set(STRICT_CALLED)
    keep = []
    for tool in tools:
        name = tool.qualified_name
        if STRICT["reading"] == "not_called" and tool.short_name not in called:
            continue
        if STRICT["reading"] == "not_valid" and name not in carried:
            continue
        keep.append(tool)
    state.select(keep)
    STRICT_CALLED.clear()


STRICT_CALLED: list[str] = []
_original = arguments_step.CallArguments.run


def _recording_calls() -> None:
    """Remember the names each arguments call called (the step keeps only valid ones)."""
    choose = arguments_step.SelectionState.ask

    async def ask(self: SelectionState, purpose: Any, call: Any, failed: str, **kw: Any) -> Any:
        result = await choose(self, purpose, call, failed, **kw)
        if isinstance(result, list) and all(hasattr(each, "arguments") for each in result):
            STRICT_CALLED[:] = [each.name for each in result]
        return result

    arguments_step.SelectionState.ask = ask  # type: ignore[method-assign]


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    args = parser.parse_args()
    entries = load_bfcl(args.split, ("multiple", "irrelevance"))
    llm, transport = replayed_model(REPLAY_FOLDER / f"bfcl-{args.split}.jsonl", replay_only=True)
    _recording_calls()
    arguments_step.CallArguments.run = _strict_run  # type: ignore[method-assign]
    PIPELINES["core_args_not_called"] = PIPELINES["core_args"]
    PIPELINES["core_args_not_valid"] = PIPELINES["core_args"]
    try:
        for name, reading in (("core_args", None), ("core_args_not_called", "not_called"),
                              ("core_args_not_valid", "not_valid")):  # fmt: skip
            STRICT["reading"] = reading  # type: ignore[assignment]
            await evaluate([name], entries, llm, verbose=False)
        assert transport is not None
        print(f"(replayed {transport.hits} replies, {transport.misses} missing)")
    finally:
        await llm.aclose()


if __name__ == "__main__":
    asyncio.run(main())
