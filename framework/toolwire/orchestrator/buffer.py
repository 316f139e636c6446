"""The context buffer: what tools produced, keyed ``"<task_no>:<tool name>"`` (seed 6.4, 6.7).

The buffer is never stored separately: it is read off the task tree, whose results (in each
task's run state) survive clarification rounds. A task's buffer holds the results of the tasks
that closed before it in the round (:func:`closed_before`), then its subtasks' results
(depth-first, each subtask's own subtasks first), then its own results so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

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


def closed_before(root: TaskInfo, task: TaskInfo) -> list[PromptAndContext]:
    """The results of the tasks that closed before ``task`` in the round: the earlier siblings
    of ``task`` and of each of its ancestors, each with its subtree, in tree order (seed 6.7:
    the buffer holds the output of any tool that ran earlier in the same processing round).

    Subtasks run in list order and a later one starts only once the earlier ones are closed, so
    these are exactly the siblings that closed before it. Empty when ``task`` is not in
    ``root``'s tree (or is the root).
    """
    path = _path(root, task)
    results: list[PromptAndContext] = []
    for parent, child in pairwise(path):
        for sibling in parent.sub_tasks:
            if sibling is child:
                break
            results.extend(subtree_results(sibling))
    return results


def _path(root: TaskInfo, task: TaskInfo) -> list[TaskInfo]:
    """The tasks from ``root`` down to ``task`` (empty when ``task`` is not below ``root``)."""
    if root is task:
        return [root]
    for sub_task in root.sub_tasks:
        below = _path(sub_task, task)
        if below:
            return [root, *below]
    return []
