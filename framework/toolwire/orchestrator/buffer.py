"""The context buffer: what tools produced, keyed ``"<task_no>:<tool name>"`` (seed 6.4, 6.7).

The buffer is never stored separately: it is read off the task tree, whose results (in each
task's run state) survive clarification rounds. A task's buffer holds its subtasks' results
(depth-first, each subtask's own subtasks first) followed by its own results so far.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolwire.context_buffer import ContextBuffer, PromptAndContext
from toolwire.task import TaskInfo


def subtree_results(task: TaskInfo) -> list[PromptAndContext]:
    """Everything tools produced on ``task`` and its descendants, children before parents."""
    results: list[PromptAndContext] = []
    for sub_task in task.sub_tasks:
        results.extend(subtree_results(sub_task))
    results.extend(task.run.results)
    return results


def buffer_of(results: Iterable[PromptAndContext]) -> ContextBuffer:
    """Group results by completion key, keeping their order."""
    buffer: ContextBuffer = {}
    for result in results:
        buffer.setdefault(result.completion_key, []).append(result)
    return buffer


def snapshot(buffer: ContextBuffer) -> ContextBuffer:
    """A copy a tool may keep or change without touching the orchestrator's state."""
    return {key: list(values) for key, values in buffer.items()}


def siblings_so_far(parent: TaskInfo, next_subtask: TaskInfo) -> ContextBuffer:
    """The results of ``next_subtask``'s earlier siblings: what a conditional decision sees."""
    results: list[PromptAndContext] = []
    for sibling in parent.sub_tasks:
        if sibling is next_subtask:
            break
        results.extend(subtree_results(sibling))
    return buffer_of(results)
