"""SPEC §3 steps 1 and 2: the coordinator chain, restore on error, the applied set, stamping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from toolwire.errors import PLUGIN_FAILURES
from toolwire.events import CoordinatorFinished, CoordinatorStarted, emit, opened
from toolwire.logging import bound
from toolwire.orchestrator.invoke import describe, failed
from toolwire.task import ContextBuffer, CoordinatorRunRecord, SubtaskDecision, TaskInfo
from toolwire.tool_threads import PluginRunner
from toolwire.tools import AgentCoordinator, ChatbotTool

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class NamedCoordinator:
    """A coordinator and the names it answers to in ``applied_coordinator_names``."""

    qualified_name: str
    short_name: str
    coordinator: AgentCoordinator

    @classmethod
    def of(cls, tool: ChatbotTool[Any]) -> NamedCoordinator:
        assert isinstance(tool, AgentCoordinator)
        return cls(tool.qualified_name, tool.name, tool)

    def applied_on(self, task: TaskInfo) -> bool:
        names = task.applied_coordinator_names
        return self.qualified_name in names or self.short_name in names


async def apply_coordinators(
    task: TaskInfo,
    coordinators: Sequence[NamedCoordinator],
    runner: PluginRunner,
    *,
    force: bool = False,
) -> None:
    """Run each coordinator not yet applied on ``task`` (ascending priority), each on the
    previous one's output; then extend the applied set on the task and every new subtask and stamp
    the new subtasks' number, owner and prompt context.

    A coordinator works on a copy of the task, with ``prompt_context`` hidden; what it returns is
    then taken into the tree (every existing task keeps its identity). One that raises, runs out
    of time, returns another instance or numbers two tasks alike leaves the task as it was and the
    chain goes on (a plain method that ran out of time may still be running: it changes only its
    copy); it still counts as applied, since it had its chance. ``force`` runs the coordinators
    even when already applied (the deep fallback, which is a separate step from the chain).
    """
    ran: list[str] = []
    created: list[tuple[TaskInfo, str]] = []
    for named in coordinators:
        if named.applied_on(task) and not force:
            continue
        ran.append(named.qualified_name)
        before = task.model_dump()
        working = TaskInfo.model_validate(before)  # a deep copy, four times faster than deepcopy
        originals = {id(copy): each for each, copy in zip(task.walk(), working.walk(), strict=True)}
        working.prompt_context = None
        step: str | None = None
        started = CoordinatorStarted(task_no=task.task_no, coordinator_name=named.qualified_name)
        try:
            with opened(started) as step, bound(coordinator=named.qualified_name):
                returned = await runner.call(named.coordinator.decompose_into_subtasks, working)
            if returned is not working:
                raise TypeError(
                    "decompose_into_subtasks must return the TaskInfo instance it received "
                    f"(changed in place), not {type(returned).__name__}"
                )
            new = [sub_task for sub_task in working.sub_tasks if id(sub_task) not in originals]
            number_subtasks(working, new)
        except PLUGIN_FAILURES as error:
            detail = describe(error)
            task.coordinator_runs.append(
                CoordinatorRunRecord(
                    coordinator_name=named.qualified_name, outcome="error", detail=detail
                )
            )
            task.failures.append(f"coordinator {named.qualified_name} {failed(error)}")
            _finished(step, task)
            log.warning(
                "coordinator_failed",
                task_no=task.task_no,
                coordinator=named.qualified_name,
                error=detail,
            )
            continue
        working.prompt_context = task.prompt_context
        changed = working.model_dump() != before
        _adopt(working, originals)
        created.extend((sub_task, named.qualified_name) for sub_task in new)
        task.coordinator_runs.append(
            CoordinatorRunRecord(
                coordinator_name=named.qualified_name,
                outcome="decomposed" if changed else "unchanged",
                detail=f"{len(new)} new subtask(s)" if new else "",
            )
        )
        _finished(step, task, new)
        log.info(
            "coordinator_applied",
            task_no=task.task_no,
            coordinator=named.qualified_name,
            changed=changed,
            new_subtasks=len(new),
        )
    if not ran:
        return
    applied = task.applied_coordinator_names | set(ran)
    task.applied_coordinator_names = applied
    for sub_task, owner in created:
        _stamp(sub_task, owner, task.execution_text(), applied)


def _finished(step: str | None, task: TaskInfo, new: Sequence[TaskInfo] = ()) -> None:
    """The coordinator step's end, with the record it just left on the task."""
    emit(
        CoordinatorFinished(
            step=step,
            task_no=task.task_no,
            record=task.coordinator_runs[-1].model_copy(),
            new_subtasks=[sub_task.task_no for sub_task in new],
        )
    )


def _adopt(working: TaskInfo, originals: Mapping[int, TaskInfo]) -> TaskInfo:
    """Put a coordinator's finished copy into the tree: every copied task's fields go back into
    its original instance (which may sit in a parent's list, or wait in ``created`` to be
    stamped); tasks the coordinator created are used as they are."""
    children = [_adopt(child, originals) for child in working.sub_tasks]
    task = originals.get(id(working), working)
    if task is not working:
        for name in TaskInfo.model_fields:
            value = getattr(working, name)
            if name != "sub_tasks" and getattr(task, name) != value:
                setattr(task, name, value)
    task.sub_tasks = children
    return task


def number_subtasks(task: TaskInfo, new: Sequence[TaskInfo]) -> None:
    """Give new subtasks (and theirs) numbers under their parent's: ``"<parent>.<n>"`` (SPEC §3).

    A number the coordinator chose under the parent's (``"1.2"``, the deep search's ``"1.2.n"``)
    is kept: a coordinator may find its subtasks by it. Any other (the default ``"1"`` of a
    ``TaskInfo`` made without one, a copy of the parent's) becomes the next free ``n``. Task
    numbers key the context buffer, so two alike would overwrite each other's results: a
    coordinator that chooses a number already taken in the task's tree is rejected.
    """
    fresh = {id(each) for sub_task in new for each in sub_task.walk()}
    taken = {each.task_no for each in task.walk() if id(each) not in fresh}
    _number_children(task.task_no, new, taken)


def _number_children(parent_no: str, children: Sequence[TaskInfo], taken: set[str]) -> None:
    prefix = f"{parent_no}."
    chosen = [c for c in children if c.task_no.startswith(prefix) and c.task_no != prefix]
    for child in chosen:
        if child.task_no in taken:
            raise ValueError(
                f"two tasks are numbered {child.task_no!r}; task numbers key the context buffer "
                "and must be unique: leave task_no unset on new subtasks and the orchestrator "
                f"numbers them {prefix}1, {prefix}2, …"
            )
        taken.add(child.task_no)
    n = 0
    for child in children:
        if any(child is kept for kept in chosen):
            continue
        n += 1
        while f"{prefix}{n}" in taken:
            n += 1
        child.task_no = f"{prefix}{n}"
        taken.add(child.task_no)
    for child in children:
        _number_children(child.task_no, child.sub_tasks, taken)


def _stamp(sub_task: TaskInfo, owner: str, parent_text: str, applied: set[str]) -> None:
    sub_task.owner_coordinator_name = owner
    sub_task.prompt_context = parent_text
    sub_task.applied_coordinator_names = sub_task.applied_coordinator_names | applied
    for child in sub_task.sub_tasks:
        _stamp(child, owner, sub_task.execution_text(), applied)


async def decide_conditional(
    runner: PluginRunner,
    owner: AgentCoordinator | None,
    parent: TaskInfo,
    next_subtask: TaskInfo,
    completed_so_far: ContextBuffer,
) -> tuple[SubtaskDecision, str]:
    """The owner's decision on a conditional subtask and why; RUN when it raises or has no owner."""
    if owner is None:
        return SubtaskDecision.RUN, "no owner coordinator to decide: run"
    try:
        with bound(coordinator=next_subtask.owner_coordinator_name):
            decision = await runner.call(
                owner.decide_conditional_subtask, parent, next_subtask, completed_so_far
            )
        return SubtaskDecision(decision), f"owner decided {SubtaskDecision(decision).value}"
    except PLUGIN_FAILURES as error:
        return SubtaskDecision.RUN, f"decision {failed(error)}: run"
