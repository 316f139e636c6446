"""Subtask numbers (issue 11 item 7): the orchestrator numbers new subtasks ``<parent>.<n>``
itself, keeps a number a coordinator chose under the parent's, and rejects a coordinator that
numbers two tasks alike, since their results would overwrite each other in the buffer."""

from __future__ import annotations

from orchestration_kit import ActivatedConsumer, Coordinator, EchoTool, NoParams, domain, subtask
from toolwire import SubtaskDecision, TaskInfo, ToolExecutionResult, extract_coordinator_task
from toolwire.orchestrator import Answer, TaskTrace
from toolwire.task import AGENT_COORDINATOR_MARKER
from toolwire.testing import ScriptedModel, conversation_for


class Finder(EchoTool):
    """Answers ``found <its own task>``."""

    def __init__(self) -> None:
        super().__init__("finder")

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"found {extract_coordinator_task(text)}")


def unnumbered(*prompts: str, sub_tasks: list[TaskInfo] | None = None) -> list[TaskInfo]:
    """Subtasks as a coordinator author writes them who does not think of numbers."""
    return [
        TaskInfo(task_prompt=prompt, required_tool_names={"finder"}, sub_tasks=sub_tasks or [])
        for prompt in prompts
    ]


def numbers(trace: TaskTrace) -> list[str]:
    return [trace.task_no, *(no for sub in trace.sub_tasks for no in numbers(sub))]


async def ask_with(
    scripted_model: ScriptedModel, *coordinators: Coordinator
) -> tuple[Answer, ActivatedConsumer]:
    collector = ActivatedConsumer("collector", priority=1000)
    scripted_model.on_suitability(["collector"]).on_answer()
    service = conversation_for(domain(), *coordinators, Finder(), collector, model=scripted_model)
    return await service.ask("q"), collector


def found(collector: ActivatedConsumer) -> dict[str, list[str]]:
    [snapshot] = collector.snapshots
    return {key: [result.context for result in results] for key, results in snapshot.items()}


async def test_subtasks_made_without_a_number_are_numbered_and_keep_their_own_results(
    scripted_model: ScriptedModel,
) -> None:
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = unnumbered("a", "b", "c")

    answer, collector = await ask_with(scripted_model, Coordinator("splitter", decompose))

    assert numbers(answer.trace) == ["1", "1.1", "1.2", "1.3"]
    assert found(collector) == {
        "1.1:finder": ["found a"],
        "1.2:finder": ["found b"],
        "1.3:finder": ["found c"],
    }
    assert answer.failures == []


async def test_nested_and_later_subtasks_continue_the_numbering(
    scripted_model: ScriptedModel,
) -> None:
    def first(task: TaskInfo) -> None:
        task.sub_tasks = unnumbered("a", sub_tasks=unnumbered("a1", "a2"))

    def second(task: TaskInfo) -> None:
        task.sub_tasks.append(
            TaskInfo(task_no="1", task_prompt="b", required_tool_names={"finder"})
        )

    answer, collector = await ask_with(
        scripted_model,
        Coordinator("first", first, priority=1),
        Coordinator("second", second, priority=2),
    )

    assert numbers(answer.trace) == ["1", "1.1", "1.1.1", "1.1.2", "1.2"]
    assert set(found(collector)) == {"1.1.1:finder", "1.1.2:finder", "1.1:finder", "1.2:finder"}


async def test_a_number_the_coordinator_chose_under_the_parents_is_kept(
    scripted_model: ScriptedModel,
) -> None:
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = [
            subtask("1.7", "seventh", "finder"),
            subtask("1.2.n", "cheap", "finder"),
            subtask("3", "elsewhere", "finder"),  # not under "1": numbered by the orchestrator
        ]

    answer, collector = await ask_with(scripted_model, Coordinator("splitter", decompose))

    assert numbers(answer.trace) == ["1", "1.7", "1.2.n", "1.1"]
    assert set(found(collector)) == {"1.7:finder", "1.2.n:finder", "1.1:finder"}


async def test_a_coordinator_numbering_two_tasks_alike_is_rejected_and_the_chain_goes_on(
    scripted_model: ScriptedModel,
) -> None:
    def clashing(task: TaskInfo) -> None:
        task.task_prompt = "rewritten by the clashing coordinator"
        task.sub_tasks = [subtask("1.1", "a", "finder"), subtask("1.1", "b", "finder")]

    def careful(task: TaskInfo) -> None:
        task.sub_tasks = [*task.sub_tasks, *unnumbered("c")]

    answer, collector = await ask_with(
        scripted_model,
        Coordinator("clashing", clashing, priority=1),
        Coordinator("careful", careful, priority=2),
    )

    assert answer.trace.task_prompt == "q"  # the clashing coordinator's run is undone
    assert numbers(answer.trace) == ["1", "1.1"]
    assert found(collector) == {"1.1:finder": ["found c"]}
    [failure] = answer.failures
    assert failure.startswith(
        "task 1: coordinator demo.clashing raised ValueError: two tasks are numbered '1.1'; "
        "task numbers key the context buffer and must be unique"
    )
    assert [run.outcome for run in answer.trace.coordinators] == ["error", "decomposed"]


async def test_a_chosen_number_an_earlier_coordinator_already_took_is_rejected(
    scripted_model: ScriptedModel,
) -> None:
    def first(task: TaskInfo) -> None:
        task.sub_tasks = [subtask("1.1", "a", "finder")]

    def second(task: TaskInfo) -> None:
        task.sub_tasks.append(subtask("1.1", "b", "finder"))

    answer, collector = await ask_with(
        scripted_model,
        Coordinator("first", first, priority=1),
        Coordinator("second", second, priority=2),
    )

    assert found(collector) == {"1.1:finder": ["found a"]}
    assert (
        "coordinator demo.second raised ValueError: two tasks are numbered '1.1'"
        in (answer.failures[0])
    )


async def test_a_later_coordinator_adding_under_an_earlier_ones_subtask_numbers_and_owns_it(
    scripted_model: ScriptedModel,
) -> None:
    """Before, only the task's direct children counted as new: the nested one kept the number
    "1" (the root's) and was stamped as the earlier coordinator's, whose decision it then got."""
    decided: list[TaskInfo] = []

    def first(task: TaskInfo) -> None:
        task.sub_tasks = unnumbered("a")

    def second(task: TaskInfo) -> None:
        task.sub_tasks[0].sub_tasks.append(
            TaskInfo(task_prompt="b", conditional=True, required_tool_names={"finder"})
        )

    def decide(parent: TaskInfo, next_subtask: TaskInfo, done: object) -> SubtaskDecision:
        decided.append(next_subtask)
        return SubtaskDecision.RUN

    earlier = Coordinator("first", first, priority=1, decide=decide)
    later = Coordinator("second", second, priority=2, decide=decide)
    answer, collector = await ask_with(scripted_model, earlier, later)

    assert numbers(answer.trace) == ["1", "1.1", "1.1.1"]
    [a] = answer.trace.sub_tasks
    [b] = a.sub_tasks
    assert (a.owner_coordinator_name, b.owner_coordinator_name) == ("demo.first", "demo.second")
    assert b.applied_coordinator_names == ["demo.first", "demo.second"]
    assert [no for no, _ in later.decisions] == ["1.1.1"] and earlier.decisions == []
    [b_as_decided] = decided
    assert b_as_decided.prompt_context == f"q{AGENT_COORDINATOR_MARKER}a"  # its parent's text
    assert found(collector) == {"1.1.1:finder": ["found b"], "1.1:finder": ["found a"]}
    assert answer.failures == []
