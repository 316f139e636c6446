"""The deep fallback loop (SPEC §3 step 8) in what it searches for and when it ends: what is
missing when the gatekeeper lists nothing, and a round whose decomposition fails."""

from __future__ import annotations

from orchestration_kit import Coordinator, EchoTool, domain
from toolwire import TaskInfo
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.orchestrator import ConversationService
from toolwire.testing import ScriptedModel, conversation_for

MESSAGE = "what is the weather in Rome?"


def service_with(model: ScriptedModel, *coordinators: Coordinator) -> ConversationService:
    return conversation_for(
        domain(rag_tool="rag", deep_fallback={"*": "deep"}),
        EchoTool("rag", "partial"),
        *coordinators,
        model=model,
    )


async def test_a_verdict_listing_nothing_missing_searches_for_the_question_it_judged() -> None:
    """Before, the deep search looked for ``task_prompt``, here a coordinator's JSON rewrite of
    the message, while the gatekeeper had judged the context against the user's question."""
    missing: list[list[str]] = []

    def rewrite(task: TaskInfo) -> None:
        task.task_prompt = '{"city": "Rome", "topic": "weather"}'

    def deep_search(task: TaskInfo) -> None:
        if task.run.deep_search.missing:  # a fallback round (in the chain it has none)
            missing.append(list(task.run.deep_search.missing))

    model = ScriptedModel().on_suitability([]).on_answer()
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=[]), times=1)
    model.on_gatekeeper(True)
    service = service_with(
        model, Coordinator("rewriter", rewrite, priority=1), Coordinator("deep", deep_search)
    )

    answer = await service.ask(MESSAGE)

    assert answer.trace.task_prompt == '{"city": "Rome", "topic": "weather"}'
    judged = [call.inputs["question"] for call in model.calls_for(Purpose.GATEKEEPER)]
    assert judged == [MESSAGE, MESSAGE]
    assert missing == [[MESSAGE]]


async def test_a_failed_first_round_ends_the_deep_search() -> None:
    """Before, the fallback whose decomposition raised still ran on the task as a tool, the
    gatekeeper judged again and the next round decomposed (and failed) again."""
    rounds: list[int] = []

    def deep_search(task: TaskInfo) -> None:
        if task.run.deep_search.missing:
            rounds.append(len(task.run.deep_search.verdicts))
            raise RuntimeError("search index unavailable")

    model = ScriptedModel().on_suitability([]).on_answer()
    model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["the forecast"]))
    service = service_with(model, Coordinator("deep", deep_search))

    answer = await service.ask(MESSAGE)

    assert answer.kind == "answer" and answer.text.startswith("partial")
    assert rounds == [1]  # one round, after the first verdict
    assert len(model.calls_for(Purpose.GATEKEEPER)) == 1
    assert [(run.tool_name, run.reason) for run in answer.trace.tools] == [("demo.rag", "rag")]
    assert [record.outcome for record in answer.trace.coordinators] == ["unchanged", "error"]
    assert answer.failures == [
        "task 1: coordinator demo.deep raised RuntimeError: search index unavailable"
    ]
