"""A chosen tool's yes/no question, plain and carrying its parameters, on the same pairs.

    .venv/bin/python bench/probe_confirmation.py [--split dev|test]

Pairs from ``bench/selection/labelled.yaml``: every message no tool should take, with the tool the
choice step names for it (the hard negatives: the confirmation must refuse them), and every third
one-tool message with its right tool. Each pair is asked the tool's plain yes/no question
(``LanguageModel.suitability``) and the same question whose answer carries the parameters
(``LanguageModel.confirm_with_parameters``, ``confirm: with_parameters``). Printed per way of
asking: refusals of the negatives, acceptances of the right tools, the pairs it got wrong; and
how many carried parameters equal the tool's own extraction (``LanguageModel.extract``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "selection"))

from labelled import LabelledMessage, load_labelled, selectable_tools
from probes import YesNoTally, embedded_probing, split_argument
from scoring import own_extraction

from toolwire.llm import LanguageModel
from toolwire.orchestrator import DomainOrchestrator
from toolwire.selection.catalogue import SelectableTool
from toolwire.settings import OrchestratorSettings, SelectionSettings

Pair = tuple[LabelledMessage, SelectableTool, bool]
CHOICE_ONLY = OrchestratorSettings(selection=SelectionSettings(confirm="off"))


async def pairs_of(
    messages: list[LabelledMessage],
    orchestrators: dict[str, DomainOrchestrator],
    rotation: list[str],
    llm: LanguageModel,
) -> list[Pair]:
    """(message, tool, whether the tool is right): negatives with the tool the choice names
    (the orchestrators select with ``confirm: off``, so what runs is what the choice named)."""
    pairs: list[Pair] = []
    negatives = [message for message in messages if not message.tools]
    for index, message in enumerate(negatives):
        selector = orchestrators[message.domain or rotation[index % len(rotation)]].selector
        selection = await selector.select(message.message, llm, attempts=1)
        by_name = {tool.qualified_name: tool for tool in selector.tools}
        named = selection.record.chosen or []
        pairs.extend((message, by_name[name], False) for name in named[:1])
    for message in [message for message in messages if len(message.tools) == 1][::3]:
        assert message.domain is not None
        tools = orchestrators[message.domain].selector.tools
        right = next(tool for tool in tools if tool.qualified_name == message.tools[0])
        pairs.append((message, right, True))
    return pairs


async def main() -> None:
    split = split_argument(__doc__)
    async with embedded_probing(CHOICE_ONLY) as probing:
        llm, app, orchestrators = probing.llm, probing.app, probing.orchestrators
        rotation = sorted(name for name, tools in selectable_tools(app).items() if tools)
        messages = [m for m in load_labelled(split=split) if m.domain != "pydocs"]
        pairs = await pairs_of(messages, orchestrators, rotation, llm)
        negatives = sum(not right for _, _, right in pairs)
        print(
            f"{len(pairs)} pairs ({split}): {negatives} negatives, "
            f"{len(pairs) - negatives} right tools"
        )
        carried_equal = carried = 0
        for way in ("plain question", "with parameters"):
            tally = YesNoTally()
            for message, tool, right in pairs:
                question = tool.suitability_question()
                if way == "plain question":
                    answers = await llm.suitability(message.message, [question], batched=False)
                    yes = bool(answers[question.tool_name])
                else:
                    params = tool.tool.params_model
                    yes, values = await llm.confirm_with_parameters(
                        message.message, question, params
                    )
                    if yes and right and values is not None:
                        extracted = await own_extraction(llm, tool.tool, message.message)
                        carried += 1
                        carried_equal += values == extracted
                tally.add(yes, right, f"{message.id}->{tool.short_name}")
            print(
                f"{way:<16} refused {tally.no}/{negatives}  accepted {tally.yes}/"
                f"{len(pairs) - negatives}  wrong: {tally.wrong_text()}",
                flush=True,
            )
        print(f"carried parameters equal to the tool's own extraction: {carried_equal}/{carried}")


if __name__ == "__main__":
    asyncio.run(main())
