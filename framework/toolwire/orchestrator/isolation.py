"""Subtask isolation for the answer (SPEC §5, seed 004): the parent gets a subtask's result, not
its exploration.

With ``orchestrator.subtask_results: short`` the answer reads, for every subtask, its tools'
contexts compressed into one short part aware of the subtask's own prompt (one model call per
subtask that returned context; :func:`~toolwire.llm.compression.compress_parts`, so identifiers
stay verbatim and the part is marked as compressed, never compressed again). The root task's own
contexts and every guaranteed context stay as they are. A compression that fails, or is not
shorter, leaves that subtask's contexts whole and is reported like any other (a notice on the
task). Only the answer reads the short results: the parent's context consumers, conditional
decisions and the gatekeeper read the buffer itself. With ``full`` (the default) the answer
reads every context as the buffer holds it.
"""

from __future__ import annotations

from typing import Literal

import structlog

from toolwire.context_buffer import PromptAndContext
from toolwire.llm.base import LanguageModel
from toolwire.llm.compression import compress_parts, is_compressed
from toolwire.llm.context_limits import CompressionFailure, report_context_issue
from toolwire.orchestrator.buffer import subtree_results
from toolwire.task import TaskInfo

log = structlog.get_logger(__name__)

SubtaskResults = Literal["full", "short"]


async def answer_contexts(
    root: TaskInfo, llm: LanguageModel, mode: SubtaskResults
) -> list[PromptAndContext]:
    """The contexts the answer reads, in buffer order (children before parents)."""
    if mode == "full":
        return _with_context(subtree_results(root))
    return await _view(root, llm, is_root=True)


async def _view(task: TaskInfo, llm: LanguageModel, *, is_root: bool) -> list[PromptAndContext]:
    contexts: list[PromptAndContext] = []
    for sub_task in task.sub_tasks:
        contexts.extend(await _view(sub_task, llm, is_root=False))
    own = _with_context(task.run.results)
    if is_root:
        return [*contexts, *own]
    fresh = [result for result in own if not result.guaranteed and not is_compressed(result)]
    if not fresh:
        return [*contexts, *own]
    short = await compress_parts(llm, task.task_prompt, fresh)
    if isinstance(short, CompressionFailure):
        report_context_issue(short)
        return [*contexts, *own]
    log.info("subtask_result_shortened", task_no=task.task_no, parts=len(fresh))
    kept = [result for result in own if result not in fresh]
    return [*contexts, short, *kept]


def _with_context(results: list[PromptAndContext]) -> list[PromptAndContext]:
    return [result for result in results if result.context]
