"""SPEC §3 steps 1 and 2: the coordinator chain, restore on error, the applied set, stamping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from toolwire.context_buffer import ContextBuffer
from toolwire.errors import PLUGIN_FAILURES
from toolwire.events import CoordinatorFinished, CoordinatorStarted, emit, opened
from toolwire.logging import bound
from toolwire.orchestrator.invoke import describe, failed
from toolwire.run_state import CoordinatorRunRecord, SubtaskDecision, TaskRun
from toolwire.task import MAX_TASK_DEPTH, SPEC_FIELDS, TaskInfo
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
    the new subtasks' number, owner and prompt context (a subtask added under another subtask, an
    earlier coordinator's too, is new: it is numbered under its parent, and the coordinator that
    added it owns it).

    A coordinator works on a copy of the task (:func:`coordinator_view`: its SPEC §2 fields,
    ``prompt_context`` hidden, none of the run state); what it changes of those fields is then
    taken into the tree (every existing task keeps its identity and its run state). One that
    raises, runs out of time, returns another instance, numbers two tasks alike or leaves a value
    a field does not accept (changed in place) leaves the task as it was and the chain goes on
    (a plain method that ran out of time may still be running: it changes only its copy); it
    still counts as applied, since it had its chance. ``force`` runs the coordinators even when
    already applied: the deep fallback, a separate step from the chain, whose copy carries the
    task's deep search progress and whose progress is taken back.
    """
    ran: list[str] = []
    created: list[tuple[TaskInfo, TaskInfo, str]] = []  # new subtask, its parent, its owner
    for named in coordinators:
        if named.applied_on(task) and not force:
            continue
        ran.append(named.qualified_name)
        before = spec_dump(task)
        working = coordinator_view(task, with_progress=force, dumped=before)
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
            _check_depth(working)
            _check_fields(working)
            new = new_subtasks(working, originals)
            number_subtasks(working, new)
        except PLUGIN_FAILURES as error:
            detail = describe(error)
            task.run.coordinator_runs.append(
                CoordinatorRunRecord(
                    coordinator_name=named.qualified_name, outcome="error", detail=detail
                )
            )
            task.run.failures.append(f"coordinator {named.qualified_name} {failed(error)}")
            _finished(step, task)
            log.warning(
                "coordinator_failed",
                task_no=task.task_no,
                coordinator=named.qualified_name,
                error=detail,
            )
            continue
        working.prompt_context = task.prompt_context
        changed = spec_dump(working) != before
        if force:
            task.run.deep_search = working.run.deep_search
        _adopt(working, originals)
        created.extend(
            (sub_task, originals[id(parent)], named.qualified_name) for parent, sub_task in new
        )
        task.run.coordinator_runs.append(
            CoordinatorRunRecord(
                coordinator_name=named.qualified_name,
                outcome="decomposed" if changed else "unchanged",
                detail=f"{len(new)} new subtask(s)" if new else "",
            )
        )
        _finished(step, task, [sub_task for _, sub_task in new])
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
    for sub_task, parent, owner in created:  # a parent before the subtasks added under it
        _stamp(sub_task, owner, parent.execution_text(), applied)


def _check_depth(task: TaskInfo) -> None:
    """Refuse a decomposition whose subtasks nest deeper than ``MAX_TASK_DEPTH`` in the tree
    (the task's depth is in its number: ``"1.2.1"`` is depth 2)."""
    depth = task.task_no.count(".") + task.levels_below()
    if depth > MAX_TASK_DEPTH:
        raise ValueError(
            f"its subtasks nest {depth} levels deep; a task tree may nest at most "
            f"{MAX_TASK_DEPTH} (orchestrator.max_depth of them are processed): put subtasks "
            "side by side in sub_tasks instead of each inside the previous one"
        )


def _check_fields(task: TaskInfo) -> None:
    """Refuse a copy whose tasks hold values their fields do not accept: a coordinator may have
    changed a field in place (``tool_params[name] = Params(...)``, ``required_tool_names.add(5)``),
    which no assignment validated. Checked as assigning them into the tree would check them."""
    for each in task.walk():
        TaskInfo.model_validate({name: getattr(each, name) for name in _SPEC_FIELDS_BUT_SUBTASKS})


def new_subtasks(
    working: TaskInfo, originals: Mapping[int, TaskInfo]
) -> list[tuple[TaskInfo, TaskInfo]]:
    """The subtasks a coordinator added to its copy at any depth, each after its parent: those
    under a copied task (a new task's own subtasks are new with it), depth-first."""
    return [
        (parent, sub_task)
        for parent in working.walk()
        if id(parent) in originals
        for sub_task in parent.sub_tasks
        if id(sub_task) not in originals
    ]


def spec_dump(task: TaskInfo) -> dict[str, Any]:
    """The task's SPEC §2 fields and its subtasks', as plain data (no run state)."""
    data = task.model_dump(include=_SPEC_FIELDS_BUT_SUBTASKS)
    data["sub_tasks"] = [spec_dump(sub_task) for sub_task in task.sub_tasks]
    return data


_SPEC_FIELDS_BUT_SUBTASKS = set(SPEC_FIELDS) - {"sub_tasks"}


def coordinator_view(
    task: TaskInfo, *, with_progress: bool = False, dumped: dict[str, Any] | None = None
) -> TaskInfo:
    """A copy of the task tree as a coordinator gets it: the SPEC §2 fields, a fresh run state
    (results, failures and the trace's records are not a coordinator's to read or change) and,
    ``with_progress``, the task's deep search progress (the deep fallback's input). ``dumped``:
    the task's :func:`spec_dump`, when the caller has it."""
    view = TaskInfo.model_validate(dumped if dumped is not None else spec_dump(task))
    if with_progress:
        view.run.deep_search = task.run.deep_search.model_copy(deep=True)
    return view


def _finished(step: str | None, task: TaskInfo, new: Sequence[TaskInfo] = ()) -> None:
    """The coordinator step's end, with the record it just left on the task."""
    emit(
        CoordinatorFinished(
            step=step,
            task_no=task.task_no,
            record=task.run.coordinator_runs[-1].model_copy(),
            new_subtasks=[sub_task.task_no for sub_task in new],
        )
    )


def _adopt(working: TaskInfo, originals: Mapping[int, TaskInfo]) -> TaskInfo:
    """Put a coordinator's finished copy into the tree: every copied task's SPEC §2 fields that
    changed go back into its original instance (which may sit in a parent's list, or wait in
    ``created`` to be stamped), its run state stays as it was; tasks the coordinator created are
    used as they are, with a fresh run state (nothing a coordinator puts there is taken)."""
    children = [_adopt(child, originals) for child in working.sub_tasks]
    task = originals.get(id(working))
    if task is None:
        task = working
        task.run = TaskRun()
    else:
        for name in _SPEC_FIELDS_BUT_SUBTASKS:
            value = getattr(working, name)
            if getattr(task, name) != value:
                setattr(task, name, value)
    task.sub_tasks = children
    return task


def number_subtasks(task: TaskInfo, new: Sequence[tuple[TaskInfo, TaskInfo]]) -> None:
    """Give new subtasks (and theirs), each given after its parent in ``task``'s tree, numbers
    under their parent's: ``"<parent>.<n>"`` (SPEC §3).

    A number the coordinator chose under the parent's (``"1.2"``, the deep search's ``"1.2.n"``)
    is kept: a coordinator may find its subtasks by it. Any other (the default ``"1"`` of a
    ``TaskInfo`` made without one, a copy of the parent's) becomes the next free ``n``. Task
    numbers key the context buffer, so two alike would overwrite each other's results: a
    coordinator that chooses a number already taken in the task's tree is rejected.
    """
    fresh = {id(each) for _, sub_task in new for each in sub_task.walk()}
    taken = {each.task_no for each in task.walk() if id(each) not in fresh}
    siblings: dict[int, tuple[TaskInfo, list[TaskInfo]]] = {}
    for parent, sub_task in new:
        siblings.setdefault(id(parent), (parent, []))[1].append(sub_task)
    for parent, children in siblings.values():
        _number_children(parent.task_no, children, taken)


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
) -> None:
    """Record the owner's decision on a conditional subtask, and why, on its run state; RUN when
    the decision fails or there is no owner.

    The owner gets copies (:func:`coordinator_view`; the parent's with its deep search progress,
    which pairs the deep search's subtasks), so a decision changes nothing in the tree. A
    decision that raises (or returns something else than a ``SubtaskDecision``) is a failure of
    the subtask, like a coordinator's: its text goes to ``failures`` (which the answer's
    disclosure withholds from callers behind an error id), never into the trace's notes.
    """
    run = next_subtask.run
    if owner is None:
        run.decision = SubtaskDecision.RUN
        run.decision_reason = "no owner coordinator to decide: run"
        return
    name = next_subtask.owner_coordinator_name
    try:
        with bound(coordinator=name):
            decided = await runner.call(
                owner.decide_conditional_subtask,
                coordinator_view(parent, with_progress=True),
                coordinator_view(next_subtask),
                completed_so_far,
            )
        decision = SubtaskDecision(decided)
    except PLUGIN_FAILURES as error:
        run.failures.append(f"conditional decision of coordinator {name} {failed(error)}")
        run.decision = SubtaskDecision.RUN
        run.decision_reason = "the decision failed: run"
        log.warning(
            "conditional_decision_failed",
            task_no=next_subtask.task_no,
            coordinator=name,
            error=describe(error),
        )
        return
    run.decision = decision
    run.decision_reason = f"owner decided {decision.value}"
