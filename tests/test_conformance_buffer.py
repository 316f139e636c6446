"""Seed 000, 6.7: the context buffer holds the output of any tool that ran earlier in the same
processing round, so a later sibling subtask's context consumer sees the results of the siblings
that closed before it; the model's prompts of a subtask still read its own subtree only (SPEC §5).

Named after its clause, like ``test_conformance.py``: the real orchestrator over
``orchestration_kit``'s tools and a ``ScriptedModel``.
"""

from __future__ import annotations

from typing import Any

from orchestration_kit import Consumer, Coordinator, EchoTool, domain, subtask
from toolwire import ContextBuffer, TaskInfo, ToolExecutionResult
from toolwire.llm.base import current_retrieval_place
from toolwire.testing import ScriptedModel, conversation_for


def _split(*sub_tasks: TaskInfo):  # type: ignore[no-untyped-def]
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = [sub.model_copy(deep=True) for sub in sub_tasks]

    return decompose


class PlaceRecorder(Consumer):
    """A consumer that also records where the orchestrator says its context will stand: the
    contexts a relevance check of its pages would read before them."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.earlier: list[list[str]] = []

    def execute_with_prior_context(
        self, params: Any, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        place = current_retrieval_place()
        self.earlier.append([] if place is None else [pac.completion_key for pac in place.earlier])
        return super().execute_with_prior_context(params, text, prior_context)


async def test_seed_6_7_a_later_sibling_subtask_sees_the_results_of_the_siblings_closed_before_it(
    scripted_model: ScriptedModel,
) -> None:
    nested = subtask("1.2", "b", "collector")
    nested.sub_tasks = [subtask("1.2.1", "b1", "inner")]
    splitter = Coordinator(
        "splitter",
        _split(subtask("1.1", "a", "finder"), nested, subtask("1.3", "c", "late")),
    )
    finder, late = EchoTool("finder", "A from 1.1"), EchoTool("late", "C from 1.3")
    collector, inner = PlaceRecorder("collector"), PlaceRecorder("inner")
    scripted_model.on_suitability({}).on_answer()
    service = conversation_for(
        domain(), splitter, finder, late, collector, inner, model=scripted_model
    )

    await service.ask("q")

    # 1.2.1 ran after 1.1 closed: it sees 1.1's result, not its parent's or a later sibling's
    assert list(inner.snapshots[0]) == ["1.1:finder"]
    assert inner.snapshots[0]["1.1:finder"][0].context == "A from 1.1"
    # 1.2 sees the sibling closed before it, then its own subtask's result; never 1.3's
    assert list(collector.snapshots[0]) == ["1.1:finder", "1.2.1:inner"]
    # the model's prompts of a subtask read its own subtree only (SPEC §5)
    assert inner.earlier == [[]]
    assert collector.earlier == [["1.2.1:inner"]]
