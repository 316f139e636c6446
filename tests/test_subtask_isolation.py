"""Subtask isolation for the answer (SPEC §5): with ``orchestrator.subtask_results: short`` the
answer reads each subtask's result, its contexts compressed aware of its own prompt, not its
exploration; ``full`` reads everything; a failed compression keeps the whole context, reported."""

from __future__ import annotations

from orchestration_kit import Coordinator, EchoTool, domain, subtask
from toolwire import TaskInfo
from toolwire.llm import Purpose
from toolwire.llm.compression import COMPRESSED_MARKER, CompressedContext
from toolwire.settings import OrchestratorSettings
from toolwire.testing import ScriptedModel, conversation_for

EXPLORATION = "page 1: nothing useful. page 2: the dose is 5 mg (ID-42). page 3: unrelated. " * 3


def _service(model: ScriptedModel, mode: str):  # type: ignore[no-untyped-def]
    def split(task: TaskInfo) -> None:
        task.sub_tasks = [subtask("1.1", "the dose", "finder")]

    tools = (
        Coordinator("splitter", split),
        EchoTool("finder", EXPLORATION),
        EchoTool("own", "the root's own context"),
    )
    settings = OrchestratorSettings(subtask_results=mode)
    return conversation_for(domain(), *tools, model=model, settings=settings)


def _answer_contexts(model: ScriptedModel) -> list[tuple[str, str]]:
    [answer] = model.calls_for(Purpose.ANSWER)
    return [(pac.completion_key, pac.context) for pac in answer.inputs["contexts"]]


async def test_short_subtask_results_reach_the_answer_instead_of_the_exploration(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_suitability(["own"]).on_extract(
        CompressedContext, {"summary": "The dose is 5 mg."}, purpose=Purpose.COMPRESSION
    ).on_answer("5 mg")

    answer = await _service(scripted_model, "short").ask("How much?")

    [compression] = scripted_model.calls_for(Purpose.COMPRESSION)
    assert compression.inputs["text"].endswith("Keep what this question needs: the dose")
    [(key, short), own] = _answer_contexts(scripted_model)
    assert key == "1.1:toolwire.compressed"
    assert short.startswith(f"{COMPRESSED_MARKER} sources: 1.1:finder\nThe dose is 5 mg.")
    assert "ID-42" in short  # an identifier the summary dropped, kept verbatim
    assert own == ("1:own", "the root's own context")  # the parent's own context stays whole
    assert answer.text == "5 mg" and not answer.failures


async def test_full_subtask_results_reach_the_answer_whole_without_a_call(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_suitability(["own"]).on_answer("5 mg")

    await _service(scripted_model, "full").ask("How much?")

    assert _answer_contexts(scripted_model) == [
        ("1.1:finder", EXPLORATION),
        ("1:own", "the root's own context"),
    ]
    assert not scripted_model.calls_for(Purpose.COMPRESSION)


async def test_a_failed_short_result_keeps_the_subtasks_context_and_is_reported(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_suitability(["own"]).on_extract(
        CompressedContext, None, purpose=Purpose.COMPRESSION
    ).on_answer("5 mg")

    answer = await _service(scripted_model, "short").ask("How much?")

    assert _answer_contexts(scripted_model)[0] == ("1.1:finder", EXPLORATION)
    assert any("1.1:finder" in line and "no valid summary" in line for line in answer.failures)
