"""SPEC §3 steps 1 and 2: the coordinator chain, restore on error, the applied set, stamping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from toolwire.events import CoordinatorFinished, CoordinatorStarted, emit, opened
from toolwire.orchestrator.invoke import call_plugin, describe
from toolwire.task import ContextBuffer, CoordinatorRunRecord, SubtaskDecision, TaskInfo
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


@dataclass(frozen=True)
class _Checkpoint:
    """A task tree's state before one coordinator ran, for undoing what that coordinator did.

    Restoring puts the saved field values back into the *same* instances (each may sit in a
    parent's list, and subtasks an earlier coordinator of the chain created are still to be
    stamped), so the tree keeps its identity; subtasks the failing coordinator added are dropped.
    """

    tasks: list[TaskInfo]
    children: list[list[TaskInfo]]
    saved: list[TaskInfo]

    @classmethod
    def of(cls, task: TaskInfo) -> _Checkpoint:
        tasks = task.walk()
        return cls(
            tasks,
            [list(each.sub_tasks) for each in tasks],
            task.model_copy(deep=True).walk(),
        )

    def restore(self) -> None:
        for task, children, saved in zip(self.tasks, self.children, self.saved, strict=True):
            for name in TaskInfo.model_fields:
                if name != "sub_tasks":
                    setattr(task, name, getattr(saved, name))
            task.sub_tasks = children


async def apply_coordinators(
    task: TaskInfo, coordinators: Sequence[NamedCoordinator], *, force: bool = False
) -> None:
    """Run each coordinator not yet applied on ``task`` (ascending priority), each on the
    previous one's output; then extend the applied set on the task and every new subtask and stamp
    the new subtasks' owner and prompt context.

    A coordinator sees ``task_prompt`` only: ``prompt_context`` is hidden while it runs. One that
    raises (or returns another instance) leaves the task as it was before it and the chain goes on;
    it still counts as applied, since it had its chance. ``force`` runs the coordinators even when
    already applied (the deep fallback, which is a separate step from the chain).
    """
    ran: list[str] = []
    created: list[tuple[TaskInfo, str]] = []
    for named in coordinators:
        if named.applied_on(task) and not force:
            continue
        ran.append(named.qualified_name)
        checkpoint = _Checkpoint.of(task)
        saved = checkpoint.saved[0]
        existing = {id(sub_task) for sub_task in task.sub_tasks}
        prompt_context = task.prompt_context
        task.prompt_context = None
        step: str | None = None
        started = CoordinatorStarted(task_no=task.task_no, coordinator_name=named.qualified_name)
        try:
            with opened(started) as step:
                returned = await call_plugin(named.coordinator.decompose_into_subtasks, task)
            if returned is not task:
                raise TypeError(
                    "decompose_into_subtasks must return the TaskInfo instance it received "
                    f"(changed in place), not {type(returned).__name__}"
                )
        except Exception as error:
            checkpoint.restore()
            detail = describe(error)
            task.coordinator_runs.append(
                CoordinatorRunRecord(
                    coordinator_name=named.qualified_name, outcome="error", detail=detail
                )
            )
            task.failures.append(f"coordinator {named.qualified_name} raised {detail}")
            _finished(step, task)
            log.warning(
                "coordinator_failed",
                task_no=task.task_no,
                coordinator=named.qualified_name,
                error=detail,
            )
            continue
        task.prompt_context = prompt_context
        new = [sub_task for sub_task in task.sub_tasks if id(sub_task) not in existing]
        created.extend((sub_task, named.qualified_name) for sub_task in new)
        changed = task.model_dump() != saved.model_dump()
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


def _stamp(sub_task: TaskInfo, owner: str, parent_text: str, applied: set[str]) -> None:
    sub_task.owner_coordinator_name = owner
    sub_task.prompt_context = parent_text
    sub_task.applied_coordinator_names = sub_task.applied_coordinator_names | applied
    for child in sub_task.sub_tasks:
        _stamp(child, owner, sub_task.execution_text(), applied)


async def decide_conditional(
    owner: AgentCoordinator | None,
    parent: TaskInfo,
    next_subtask: TaskInfo,
    completed_so_far: ContextBuffer,
) -> tuple[SubtaskDecision, str]:
    """The owner's decision on a conditional subtask and why; RUN when it raises or has no owner."""
    if owner is None:
        return SubtaskDecision.RUN, "no owner coordinator to decide: run"
    try:
        decision = await call_plugin(
            owner.decide_conditional_subtask, parent, next_subtask, completed_so_far
        )
        return SubtaskDecision(decision), f"owner decided {SubtaskDecision(decision).value}"
    except Exception as error:
        return SubtaskDecision.RUN, f"decision raised {describe(error)}: run"
