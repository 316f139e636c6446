"""A second chosen tool's confirmation: its plain question, or asked besides the first request.

    .venv/bin/python bench/probe_further_requests.py [--split dev|test]

When the choice names two tools, the second is either a second request of the task or a sibling
of the first (the choice named both). Pairs from ``bench/selection/labelled.yaml``, on the
embedded model: every two-tool message, each of its tools in turn handled and the other asked
(the answer must be yes), and every one-tool message with its right tool handled and that tool's
closest sibling asked (the answer must be no). Each pair is asked the tool's plain yes/no
question, and whether the task also asks it besides the handled request (``confirm: also``).
Printed per way of asking: second requests accepted, siblings refused, the pairs it got wrong.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from labelled import LabelledMessage, load_labelled
from probes import YesNoTally, embedded_probing, split_argument

from toolwire.selection.catalogue import SelectableTool
from toolwire.selection.selector import ToolSelector
from toolwire.settings import OrchestratorSettings

Pair = tuple[LabelledMessage, SelectableTool, SelectableTool, bool]
"""(message, the handled tool, the tool asked, whether the asked tool is a second request)."""


def pairs_of(messages: list[LabelledMessage], selectors: dict[str, ToolSelector]) -> list[Pair]:
    pairs: list[Pair] = []
    for message in messages:
        if message.domain is None or not message.tools:
            continue
        selector = selectors[message.domain]
        by_name = {tool.qualified_name: tool for tool in selector.tools}
        tools = [by_name[name] for name in message.tools]
        if len(tools) == 2:
            first, second = tools
            pairs += [(message, first, second, True), (message, second, first, True)]
        elif len(tools) == 1:
            siblings = [name for name in selector.siblings_of(tools[0]) if name in by_name]
            pairs += [(message, tools[0], by_name[siblings[0]], False)] if siblings else []
    return pairs


async def main() -> None:
    split = split_argument(__doc__)
    async with embedded_probing(OrchestratorSettings()) as probing:
        llm = probing.llm
        selectors = {name: orch.selector for name, orch in probing.orchestrators.items()}
        pairs = pairs_of(load_labelled(split=split), selectors)
        seconds = sum(second for *_, second in pairs)
        siblings = len(pairs) - seconds
        print(f"{len(pairs)} pairs ({split}): {seconds} second requests, {siblings} siblings")
        for way in ("plain question", "also asked"):
            tally = YesNoTally()
            for message, handled, asked, second in pairs:
                question = asked.suitability_question()
                besides = handled.suitability_question() if way == "also asked" else None
                answers = await llm.suitability(message.message, [question], handled=besides)
                tally.add(answers[question.tool_name], second, f"{message.id}->{asked.short_name}")
            print(
                f"{way:<15} second requests accepted {tally.yes}/{seconds}  siblings refused "
                f"{tally.no}/{siblings}  wrong: {tally.wrong_text()}",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
