"""One test per clause of SPEC §3 (seed 000, 6.1-6.10), named after its clause.

Each builds the real orchestrator over tools defined in ``orchestration_kit`` and a
``ScriptedModel``: an unscripted model call fails the test loudly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestration_kit import (
    ActivatedConsumer,
    AskingTool,
    ClarifiableConsumer,
    Consumer,
    Coordinator,
    EchoTool,
    Query,
    QueryTool,
    domain,
    subtask,
)
from toolwire import (
    AGENT_COORDINATOR_MARKER,
    ContextBuffer,
    SubtaskDecision,
    TaskInfo,
    TaskStatus,
    ToolExecutionResult,
    extract_coordinator_original,
    extract_coordinator_task,
)
from toolwire.llm import GatekeeperVerdict, Purpose
from toolwire.orchestrator import ConversationService
from toolwire.settings import OrchestratorSettings
from toolwire.testing import ScriptedModel, conversation_for, orchestrator_for
from toolwire.tools import ChatbotTool, is_coordinator_requested

SELECTION = (Purpose.CHOICE, Purpose.SUITABILITY)
"""The purposes of tool-selection calls, whichever selection steps run."""


def _extend(tag: str):  # type: ignore[no-untyped-def]
    def decompose(task: TaskInfo) -> None:
        task.task_prompt += f" +{tag}"

    return decompose


def _split(*sub_tasks: TaskInfo):  # type: ignore[no-untyped-def]
    def decompose(task: TaskInfo) -> None:
        task.sub_tasks = [sub.model_copy(deep=True) for sub in sub_tasks]

    return decompose


def _tool_names(answer_trace) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return [(run.tool_name, run.reason, run.outcome) for run in answer_trace.tools]


# -- step 1: coordinators ------------------------------------------------------------------


async def test_step1_coordinators_run_in_ascending_priority_each_on_the_previous_output(
    scripted_model: ScriptedModel,
) -> None:
    late = Coordinator("late", _extend("late"), priority=20)
    early = Coordinator("early", _extend("early"), priority=10)
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), late, early, model=scripted_model)

    answer = await service.ask("q")

    assert early.seen[0]["task_prompt"] == "q"
    assert late.seen[0]["task_prompt"] == "q +early"
    assert answer.trace.task_prompt == "q +early +late"
    assert [run.coordinator_name for run in answer.trace.coordinators] == [
        "demo.early",
        "demo.late",
    ]
    # before the task's own tool selection, which sees the chain's output
    [selection] = scripted_model.calls_for(*SELECTION)
    assert scripted_model.purposes[0] is selection.purpose
    assert selection.inputs["task_prompt"] == "q +early +late"


async def test_step1_coordinator_already_applied_is_skipped_in_either_name_form(
    scripted_model: ScriptedModel,
) -> None:
    short = Coordinator("short", _extend("short"), priority=1)
    prefixed = Coordinator("prefixed", _extend("prefixed"), priority=2)
    untried = Coordinator("untried", _extend("untried"), priority=3)
    scripted_model.on_suitability({}).on_answer("done")
    orchestrator = orchestrator_for(domain(), short, prefixed, untried, model=scripted_model)
    task = TaskInfo(task_prompt="q", applied_coordinator_names={"short", "demo.prefixed"})

    await orchestrator.run_round(task)

    assert short.seen == [] and prefixed.seen == []
    assert len(untried.seen) == 1
    assert task.task_prompt == "q +untried"
    assert task.applied_coordinator_names == {"short", "demo.prefixed", "demo.untried"}


async def test_step1_coordinator_error_restores_the_task_and_the_others_still_run(
    scripted_model: ScriptedModel,
) -> None:
    def breaks(task: TaskInfo) -> None:
        task.task_prompt = "broken"
        task.sub_tasks = [subtask("1.1", "half-made")]
        task.important_words.append("garbage")
        raise RuntimeError("boom")

    first = Coordinator("first", _extend("first"), priority=1)
    bad = Coordinator("bad", breaks, priority=2)
    third = Coordinator("third", _extend("third"), priority=3)
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), first, bad, third, model=scripted_model)

    answer = await service.ask("q")

    assert third.seen[0]["task_prompt"] == "q +first"
    assert answer.trace.task_prompt == "q +first +third"
    assert answer.trace.sub_tasks == []
    assert [(r.coordinator_name, r.outcome) for r in answer.trace.coordinators] == [
        ("demo.first", "decomposed"),
        ("demo.bad", "error"),
        ("demo.third", "decomposed"),
    ]
    assert answer.trace.coordinators[1].detail == "RuntimeError: boom"
    assert answer.failures == ["task 1: coordinator demo.bad raised RuntimeError: boom"]
    assert answer.kind == "answer"


async def test_step1_applied_set_goes_to_every_new_subtask_and_survives_clarification_rounds(
    scripted_model: ScriptedModel,
) -> None:
    splitter = Coordinator("splitter", _split(subtask("1.1", "which?", "asker")), priority=1)
    bystander = Coordinator("bystander", priority=2)
    asker = AskingTool("asker")
    scripted_model.on_extract(Query, {"query": "x"}).on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, bystander, asker, model=scripted_model)

    first = await service.ask("q")
    stored = await service.store.load(first.session_id or "")

    applied = {"demo.splitter", "demo.bystander"}
    assert stored.task.applied_coordinator_names == applied
    assert stored.task.sub_tasks[0].applied_coordinator_names == applied

    second = await service.ask("the red one", session_id=first.session_id)

    assert second.kind == "answer"
    assert len(splitter.seen) == 1 and len(bystander.seen) == 1  # never again, on no task


async def test_step1_a_coordinator_untried_on_the_parent_still_runs_on_a_subtask(
    scripted_model: ScriptedModel,
) -> None:
    tried = Coordinator("tried", _extend("tried"), priority=1)
    untried = Coordinator("untried", _extend("untried"), priority=2)
    scripted_model.on_suitability({}).on_answer("done")
    orchestrator = orchestrator_for(domain(), tried, untried, model=scripted_model)
    child = TaskInfo(task_no="1.1", task_prompt="sub", applied_coordinator_names={"demo.tried"})
    root = TaskInfo(
        task_prompt="q", sub_tasks=[child], applied_coordinator_names={"tried", "untried"}
    )

    await orchestrator.run_round(root)

    assert [seen["task_no"] for seen in untried.seen] == ["1.1"]
    assert tried.seen == []
    assert root.sub_tasks[0].task_prompt == "sub +untried"


# -- step 2: stamping ----------------------------------------------------------------------


async def test_step2_new_subtasks_are_stamped_with_owner_and_the_parents_execution_text(
    scripted_model: ScriptedModel,
) -> None:
    def decompose(task: TaskInfo) -> None:
        task.task_prompt += " (expanded)"
        liar = subtask("1.1", "first", "echo")
        liar.owner_coordinator_name = "someone_else"
        task.sub_tasks = [liar, subtask("1.2", "second", "echo")]

    splitter = Coordinator("splitter", decompose)
    echo = EchoTool("echo", "ok")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, echo, model=scripted_model)

    answer = await service.ask("user question")

    for sub in answer.trace.sub_tasks:
        assert sub.owner_coordinator_name == "demo.splitter"
    root_text = "user question (expanded)"
    assert echo.texts == [
        f"{root_text}{AGENT_COORDINATOR_MARKER}first",
        f"{root_text}{AGENT_COORDINATOR_MARKER}second",
    ]


# -- step 3: subtasks first, depth limit, conditional subtasks, stops ----------------------


async def test_step3_subtasks_run_in_list_order_before_the_parents_activation(
    scripted_model: ScriptedModel,
) -> None:
    order: list[str] = []
    second, first, own = EchoTool("second", "2"), EchoTool("first", "1"), EchoTool("own", "o")
    for tool in (second, first, own):
        tool.log = order
    splitter = Coordinator(
        "splitter", _split(subtask("1.1", "a", "first"), subtask("1.2", "b", "second"))
    )
    scripted_model.on_suitability(["own"]).on_answer("done")
    service = conversation_for(domain(), splitter, second, first, own, model=scripted_model)

    answer = await service.ask("q")

    assert order == ["first", "second", "own"]
    suitability = scripted_model.calls_for(Purpose.SUITABILITY)
    assert [call.inputs["task_prompt"] for call in suitability] == ["q"]
    assert [sub.status for sub in answer.trace.sub_tasks] == [TaskStatus.DONE, TaskStatus.DONE]


async def test_step3_subtasks_below_the_depth_limit_are_not_processed(
    scripted_model: ScriptedModel,
) -> None:
    deep = subtask("1.1", "level one", "echo")
    deep.sub_tasks = [subtask("1.1.1", "level two", "echo")]
    splitter = Coordinator("splitter", _split(deep))
    echo = EchoTool("echo", "ok")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(
        domain(),
        splitter,
        echo,
        model=scripted_model,
        settings=OrchestratorSettings(max_depth=1),
    )

    answer = await service.ask("q")

    level_one = answer.trace.sub_tasks[0]
    assert level_one.status is TaskStatus.DONE
    assert level_one.sub_tasks[0].status is TaskStatus.FAILED
    assert echo.texts == [f"q{AGENT_COORDINATOR_MARKER}level one"]
    assert answer.failures == ["task 1.1.1: subtask 1.1.1 not processed: depth limit 1 reached"]
    assert answer.kind == "answer"


def _conditional_pair() -> list[TaskInfo]:
    return [subtask("1.1", "cheap", "cheap"), subtask("1.2", "full", "full", conditional=True)]


@pytest.mark.parametrize(
    ("decision", "full_runs", "status"),
    [
        (SubtaskDecision.SKIP, False, TaskStatus.SKIPPED),
        (SubtaskDecision.RUN, True, TaskStatus.DONE),
    ],
)
async def test_step3_conditional_subtask_follows_the_owners_decision_on_the_sibling_snapshot(
    scripted_model: ScriptedModel,
    decision: SubtaskDecision,
    full_runs: bool,
    status: TaskStatus,
) -> None:
    splitter = Coordinator(
        "splitter", _split(*_conditional_pair()), decide=lambda parent, nxt, done: decision
    )
    cheap, full = EchoTool("cheap", "found"), EchoTool("full", "expensive")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, cheap, full, model=scripted_model)

    answer = await service.ask("q")

    [(task_no, snapshot)] = splitter.decisions
    assert task_no == "1.2"
    assert list(snapshot) == ["1.1:cheap"]
    assert snapshot["1.1:cheap"][0].context == "found"
    assert bool(full.texts) is full_runs
    assert answer.trace.sub_tasks[1].status is status
    assert answer.trace.sub_tasks[1].decision is decision


async def test_step3_conditional_decision_that_raises_means_run(
    scripted_model: ScriptedModel,
) -> None:
    def explode(parent: TaskInfo, nxt: TaskInfo, done: ContextBuffer) -> SubtaskDecision:
        raise LookupError("no idea")

    splitter = Coordinator("splitter", _split(*_conditional_pair()), decide=explode)
    cheap, full = EchoTool("cheap", ""), EchoTool("full", "expensive")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, cheap, full, model=scripted_model)

    answer = await service.ask("q")

    assert len(full.texts) == 1
    assert answer.trace.sub_tasks[1].decision is SubtaskDecision.RUN
    assert answer.trace.sub_tasks[1].notes == ["conditional: the decision failed: run"]
    assert answer.trace.sub_tasks[1].failures == [
        "conditional decision of coordinator demo.splitter raised LookupError: no idea"
    ]


async def test_step3_clarification_in_a_subtask_stops_the_round_and_the_reply_resumes_there(
    scripted_model: ScriptedModel,
) -> None:
    splitter = Coordinator(
        "splitter",
        _split(
            subtask("1.1", "resolve A", "first"),
            subtask("1.2", "resolve B", "asker"),
            subtask("1.3", "resolve C", "last"),
        ),
    )
    first, last, asker = EchoTool("first", "A"), EchoTool("last", "C"), AskingTool("asker")
    scripted_model.on_extract(
        Query, lambda text, instruction: {"query": "red" if "the red one" in text else "?"}
    )
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, first, asker, last, model=scripted_model)

    question = await service.ask("q")

    assert question.kind == "clarification"
    assert question.text == "Which one?"
    assert question.session_id
    assert last.texts == []
    assert scripted_model.calls_for(Purpose.SUITABILITY) == []  # the parent did not activate

    answer = await service.ask("the red one", session_id=question.session_id)

    assert answer.kind == "answer"
    assert len(first.texts) == 1  # closed subtask not run again
    assert len(asker.runs) == 1
    [(params, clarification)] = asker.clarifications
    assert params.query == "red"
    assert (clarification.question, clarification.reply) == ("Which one?", "the red one")
    assert len(last.texts) == 1
    assert len(splitter.seen) == 1
    assert answer.session_id == question.session_id  # the conversation goes on
    assert (await service.store.load(question.session_id)).task is None  # nothing waits


async def test_step3_terminal_answer_in_a_subtask_ends_processing(
    scripted_model: ScriptedModel,
) -> None:
    splitter = Coordinator(
        "splitter", _split(subtask("1.1", "a", "stopper"), subtask("1.2", "b", "never"))
    )
    stopper = EchoTool("stopper", ToolExecutionResult.terminal("final answer"))
    never = EchoTool("never", "x")
    service = conversation_for(domain(), splitter, stopper, never, model=scripted_model)

    answer = await service.ask("q")

    assert (answer.kind, answer.text) == ("answer", "final answer")
    assert never.texts == []
    assert scripted_model.calls == []  # no suitability for the parent, no answer composition


# -- step 4: subtask results are shared ----------------------------------------------------


async def test_step4_subtask_results_reach_the_parents_context_consumer(
    scripted_model: ScriptedModel,
) -> None:
    splitter = Coordinator("splitter", _split(subtask("1.1", "a", "finder")))
    finder = EchoTool("finder", "A from the subtask")
    early = EchoTool("early", "E", priority=1)
    collector = ActivatedConsumer("collector", priority=200)
    scripted_model.on_suitability(["early", "collector"]).on_answer()
    service = conversation_for(domain(), splitter, finder, early, collector, model=scripted_model)

    answer = await service.ask("q")

    [snapshot] = collector.snapshots
    assert list(snapshot) == ["1.1:finder", "1:early"]
    assert snapshot["1.1:finder"][0].context == "A from the subtask"
    # the consumer cleared its snapshot: the buffer itself is untouched
    assert answer.text.splitlines() == ["A from the subtask", "E", "collector saw 2 keys"]


# -- step 5: which tools run ---------------------------------------------------------------


async def test_step5_required_tool_names_are_exclusive_in_short_and_prefixed_form(
    scripted_model: ScriptedModel,
) -> None:
    alpha, beta, other, rag = (
        EchoTool("alpha", "a"),
        EchoTool("beta", "b"),
        EchoTool("other", "o"),
        EchoTool("rag", "r"),
    )
    scripted_model.on_answer()  # no suitability script: a suitability call would fail the test
    orchestrator = orchestrator_for(
        domain(rag_tool="rag"), alpha, beta, other, rag, model=scripted_model
    )
    task = TaskInfo(task_prompt="q", required_tool_names={"alpha", "demo.beta"})

    result = await orchestrator.run_round(task)

    assert [(r.tool_name, r.reason) for r in task.run.tool_runs] == [
        ("demo.alpha", "required"),
        ("demo.beta", "required"),
    ]
    assert other.texts == [] and rag.texts == []
    assert scripted_model.purposes == [Purpose.ANSWER]
    assert result.text == "a\nb"


async def test_step5_suitability_sees_task_prompt_only_and_the_rag_tool_runs_beside_it(
    scripted_model: ScriptedModel,
) -> None:
    splitter = Coordinator("splitter", _split(subtask("1.1", "short directive")))
    lookup, rag = QueryTool("lookup"), EchoTool("rag", "retrieved")
    scripted_model.on_suitability(
        lambda prompt, names: {"lookup"} if prompt == "short directive" else set()
    )
    scripted_model.on_extract(Query, {"query": "z"}).on_answer()
    service = conversation_for(domain(rag_tool="rag"), splitter, lookup, rag, model=scripted_model)

    answer = await service.ask("the user's long question")

    selection = scripted_model.calls_for(*SELECTION)
    assert list(dict.fromkeys(call.inputs["task_prompt"] for call in selection)) == [
        "short directive",
        "the user's long question",
    ]
    offered = [call.inputs.get("options", call.inputs.get("tool_names")) for call in selection]
    assert all("rag" not in names and "demo.rag" not in names for names in offered)
    execution_text = f"the user's long question{AGENT_COORDINATOR_MARKER}short directive"
    [(_, text)] = lookup.calls
    assert text == execution_text and is_coordinator_requested(text)
    [extract] = scripted_model.calls_for(Purpose.PARAMETERS)
    assert extract.inputs["text"] == execution_text
    assert extract.inputs["instruction"] == lookup.parameter_instruction()
    assert "lookup" in extract.inputs["instruction"]
    assert _tool_names(answer.trace.sub_tasks[0]) == [
        ("demo.lookup", "suitability", "context"),
        ("demo.rag", "rag", "context"),
    ]
    assert _tool_names(answer.trace) == [("demo.rag", "rag", "context")]


async def test_step5_excluded_tools_are_never_activated(scripted_model: ScriptedModel) -> None:
    kept, banned = EchoTool("kept", "k"), EchoTool("banned", "b")
    scripted_model.on_suitability(["kept", "banned"]).on_answer()
    orchestrator = orchestrator_for(
        domain(excluded_tools=["banned"]), kept, banned, model=scripted_model
    )

    asked = TaskInfo(task_prompt="q")
    await orchestrator.run_round(asked)
    required = TaskInfo(task_prompt="q", required_tool_names={"demo.banned"})
    await orchestrator.run_round(required)

    assert scripted_model.calls_for(Purpose.SUITABILITY)[0].inputs["tool_names"] == ["demo.kept"]
    assert banned.texts == []
    assert required.run.tool_runs[0].record.outcome == "error"
    assert "excluded" in required.run.failures[0]


async def test_step5_coordinator_only_tools_are_never_put_to_the_suitability_test(
    scripted_model: ScriptedModel,
) -> None:
    """Seed 6.4: a tool that runs only on coordinator-designated tasks is never activated by a
    user question; declaring it spares the model call a small model could answer wrongly."""

    class DesignatedOnly(EchoTool):
        coordinator_only = True

    open_tool, designated = EchoTool("open", "o"), DesignatedOnly("designated", "d")
    scripted_model.on_suitability(["open", "designated"]).on_answer()
    orchestrator = orchestrator_for(domain(), open_tool, designated, model=scripted_model)

    await orchestrator.run_round(TaskInfo(task_prompt="q"))
    required = TaskInfo(task_prompt="q", required_tool_names={"designated"})
    await orchestrator.run_round(required)

    [suitability] = scripted_model.calls_for(Purpose.SUITABILITY)
    assert suitability.inputs["tool_names"] == ["demo.open"]
    assert designated.texts == ["q"]  # it ran once: on the designated task
    assert [run.reason for run in required.run.tool_runs] == ["required"]


async def test_step5_prompt_type_of_the_message_is_classified_once_when_it_decides(
    scripted_model: ScriptedModel,
) -> None:
    """The type chooses the deep fallback (toolwire reads it for nothing else): the message is
    classified once the gatekeeper found its context short, and only where the types'
    fallbacks differ; otherwise it costs no call."""
    scripted_model.on_classify("definition", ["x"]).on_suitability({}).on_answer("done")
    scripted_model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["more"]))
    service = conversation_for(
        domain(
            prompt_types=["definition", "howto"], rag_tool="rag", deep_fallback={"howto": "deep"}
        ),
        EchoTool("rag", "r"),
        EchoTool("finder"),
        FakeDeepSearch(),
        model=scripted_model,
    )

    answer = await service.ask("what is x")

    assert answer.trace.prompt_type == "definition"
    [call] = scripted_model.calls_for(Purpose.CLASSIFICATION)
    assert call.inputs["text"] == "what is x"

    same = ScriptedModel().on_suitability({}).on_answer("done")
    types = domain(prompt_types=["definition", "howto"])
    plain = conversation_for(types, EchoTool("any"), model=same)
    assert (await plain.ask("how do I install it")).trace.prompt_type == ""
    assert same.calls_for(Purpose.CLASSIFICATION) == []

    single = ScriptedModel().on_suitability({}).on_answer("done")
    only = conversation_for(domain(prompt_types=["faq"]), EchoTool("any"), model=single)
    assert (await only.ask("q")).trace.prompt_type == "faq"
    assert single.calls_for(Purpose.CLASSIFICATION) == []


# -- step 6: the execution text ------------------------------------------------------------


async def test_step6_extract_helpers_round_trip_the_execution_text_with_a_json_original(
    scripted_model: ScriptedModel,
) -> None:
    seen: list[tuple[object, str]] = []

    def decompose(task: TaskInfo) -> None:
        task.task_prompt = json.dumps({"products": ["Aspirin", "Ibuprofen"]})
        task.sub_tasks = [subtask("1.1", "check the pair", "reader")]

    def read(text: str) -> ToolExecutionResult:
        original = json.loads(extract_coordinator_original(text))
        seen.append((original, extract_coordinator_task(text)))
        return ToolExecutionResult.context("read")

    splitter = Coordinator("splitter", decompose)
    reader = EchoTool("reader", read)
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, reader, model=scripted_model)

    await service.ask("can I take aspirin with ibuprofen")

    assert seen == [({"products": ["Aspirin", "Ibuprofen"]}, "check the pair")]
    assert extract_coordinator_original("plain") == "plain"
    assert extract_coordinator_task("plain") == "plain"


# -- step 7: running tools -----------------------------------------------------------------


async def test_step7_activated_tools_run_in_priority_order(scripted_model: ScriptedModel) -> None:
    order: list[str] = []
    late, first, rag = (
        EchoTool("late", priority=50),
        EchoTool("first", priority=5),
        EchoTool("rag", priority=10),
    )
    for tool in (late, first, rag):
        tool.log = order
    scripted_model.on_suitability(["late", "first"]).on_answer("done")
    service = conversation_for(domain(rag_tool="rag"), late, first, rag, model=scripted_model)

    await service.ask("q")

    assert order == ["first", "rag", "late"]


async def test_step7_context_consumer_gets_a_snapshot_and_its_execute_with_result_raises(
    scripted_model: ScriptedModel,
) -> None:
    source = EchoTool("source", "S", priority=1)
    one, two = Consumer("one"), Consumer("two")
    one.priority, two.priority = 10, 20
    scripted_model.on_answer()
    orchestrator = orchestrator_for(domain(), source, one, two, model=scripted_model)
    task = TaskInfo(task_prompt="q", required_tool_names={"source", "one", "two"})

    await orchestrator.run_round(task)

    assert list(one.snapshots[0]) == ["1:source"]
    assert list(two.snapshots[0]) == ["1:source", "1:one"]  # one's clear() changed nothing
    with pytest.raises(TypeError, match="execute_with_prior_context"):
        one.execute_with_result(one.params_model(), "q")


async def test_step7_clarifiable_consumer_continues_with_the_reply_and_the_context(
    scripted_model: ScriptedModel,
) -> None:
    before = EchoTool("before", "B", priority=1)
    clarifiable = ClarifiableConsumer()
    clarifiable.priority = 10
    scripted_model.on_extract(
        Query, lambda text, instruction: {"query": "Aspirin 500" if "500" in text else "?"}
    )
    scripted_model.on_answer("composed")
    orchestrator = orchestrator_for(domain(), before, clarifiable, model=scripted_model)
    root = TaskInfo(task_prompt="q", required_tool_names={"before", "clarifiable"})
    first = await orchestrator.run_round(root)
    assert (first.kind, first.text) == ("clarification", "Which product exactly?")
    assert root.run.pending_clarification is not None
    root.run.pending_clarification.reply = "the 500 mg one"

    second = await orchestrator.run_round(root)

    [(params, clarification, keys)] = clarifiable.continued
    assert params.query == "Aspirin 500"
    assert clarification.reply == "the 500 mg one"
    assert keys == ["1:before"]
    assert second.guaranteed_contexts == ["final for Aspirin 500"]
    assert len(before.texts) == 1


async def test_step7_a_tool_asking_a_question_stops_the_round_and_later_tools_wait(
    scripted_model: ScriptedModel,
) -> None:
    asker, after = AskingTool("asker"), EchoTool("after", "later", priority=500)
    asker.priority = 1
    scripted_model.on_extract(Query, {"query": "x"}).on_answer()
    orchestrator = orchestrator_for(domain(), asker, after, model=scripted_model)
    root = TaskInfo(task_prompt="q", required_tool_names={"asker", "after"})

    assert (await orchestrator.run_round(root)).kind == "clarification"
    assert after.texts == []
    assert root.run.status is TaskStatus.WAITING_FOR_USER
    assert root.run.pending_clarification is not None
    root.run.pending_clarification.reply = "that one"
    assert (await orchestrator.run_round(root)).kind == "answer"
    assert after.texts == ["q"]
    assert len(scripted_model.calls_for(Purpose.PARAMETERS)) == 2  # first run, then the reply


# -- step 8: gatekeeper and deep fallback --------------------------------------------------


class FakeDeepSearch(Coordinator, Consumer):  # type: ignore[misc]
    """A fake deep search coordinator: one required search subtask per missing item."""

    def __init__(self) -> None:
        def decompose(task: TaskInfo) -> None:
            task.sub_tasks = [
                *task.sub_tasks,
                *(
                    subtask(f"{task.task_no}.{n}", item, "finder")
                    for n, item in enumerate(
                        task.run.deep_search.missing, start=len(task.sub_tasks) + 1
                    )
                ),
            ]

        Coordinator.__init__(self, "deep", decompose)
        self.snapshots = []


def deep_search_service(
    *tools: ChatbotTool[Any], model: ScriptedModel, settings: OrchestratorSettings | None = None
) -> ConversationService:
    """A conversation whose domain retrieves with "rag" and deep-searches with "deep" for every
    prompt type."""
    return conversation_for(
        domain(rag_tool="rag", deep_fallback={"*": "deep"}), *tools, model=model, settings=settings
    )


async def test_step8_insufficient_context_runs_the_deep_fallback_on_the_task(
    scripted_model: ScriptedModel,
) -> None:
    rag, finder, deep = (
        EchoTool("rag", "partial"),
        EchoTool("finder", "the missing fact"),
        (FakeDeepSearch()),
    )
    scripted_model.on_suitability({}).on_gatekeeper(
        GatekeeperVerdict(sufficient=False, missing=["the dosage"]), times=1
    ).on_gatekeeper(True).on_answer()
    service = deep_search_service(
        rag,
        finder,
        deep,
        model=scripted_model,
    )

    answer = await service.ask("q")

    assert finder.texts == [f"q{AGENT_COORDINATOR_MARKER}the dosage"]
    assert answer.trace.sub_tasks[0].owner_coordinator_name == "demo.deep"
    assert _tool_names(answer.trace) == [
        ("demo.rag", "rag", "context"),
        ("demo.deep", "deep_fallback", "context"),
    ]
    assert list(deep.snapshots[0]) == ["1.1:finder", "1:rag"]
    gatekeeper = scripted_model.calls_for(Purpose.GATEKEEPER)
    assert [pac.context for pac in gatekeeper[0].inputs["contexts"]] == ["partial"]
    assert len(gatekeeper) == 2  # judged again after the fallback: sufficient, done
    assert "the missing fact" in answer.text


async def test_step8_empty_retrieval_is_insufficient_without_a_gatekeeper_call(
    scripted_model: ScriptedModel,
) -> None:
    rag, finder, deep = EchoTool("rag", ""), EchoTool("finder", "found it"), FakeDeepSearch()
    scripted_model.on_suitability({}).on_gatekeeper(True).on_answer()
    service = deep_search_service(
        rag,
        finder,
        deep,
        model=scripted_model,
    )

    answer = await service.ask("what is x?")

    assert finder.texts == [f"what is x?{AGENT_COORDINATOR_MARKER}what is x?"]
    assert len(scripted_model.calls_for(Purpose.GATEKEEPER)) == 1  # only after the fallback
    assert "found it" in answer.text


async def test_step8_deep_fallback_is_bounded_and_skipped_when_context_suffices(
    scripted_model: ScriptedModel,
) -> None:
    rag, finder, deep = EchoTool("rag", "partial"), EchoTool("finder", ""), FakeDeepSearch()
    scripted_model.on_suitability({}).on_answer("done")
    scripted_model.on_gatekeeper(
        lambda question, contexts: GatekeeperVerdict(
            sufficient=False, missing=[f"item {len(contexts)}"]
        )
    )
    bounded = deep_search_service(
        rag,
        finder,
        deep,
        model=scripted_model,
        settings=OrchestratorSettings(deep_search_max_rounds=2),
    )

    answer = await bounded.ask("q")

    assert [r.reason for r in answer.trace.tools].count("deep_fallback") == 2
    assert len(scripted_model.calls_for(Purpose.GATEKEEPER)) == 2

    satisfied = ScriptedModel().on_suitability({}).on_gatekeeper(True).on_answer("done")
    quiet = FakeDeepSearch()
    service = deep_search_service(
        EchoTool("rag", "all of it"),
        EchoTool("finder"),
        quiet,
        model=satisfied,
    )
    answer = await service.ask("q")
    assert quiet.snapshots == []
    assert [r.reason for r in answer.trace.tools] == ["rag"]


async def test_step8_no_deep_search_when_the_prompt_type_has_no_deep_fallback(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_classify("definition").on_suitability({}).on_answer("done")
    scripted_model.on_gatekeeper(GatekeeperVerdict(sufficient=False, missing=["more"]))
    service = conversation_for(
        domain(
            prompt_types=["definition", "howto"], rag_tool="rag", deep_fallback={"howto": "deep"}
        ),
        EchoTool("rag", "r"),
        EchoTool("finder"),
        FakeDeepSearch(),
        model=scripted_model,
    )

    answer = await service.ask("what is x")

    assert len(scripted_model.calls_for(Purpose.GATEKEEPER)) == 1
    assert [run.reason for run in answer.trace.tools] == ["rag"] and answer.trace.sub_tasks == []
    assert service.orchestrator(None).get_deep_fallback_tool("definition") is None
    assert service.orchestrator(None).get_deep_fallback_tool("howto") is not None


# -- step 9: the answer --------------------------------------------------------------------


async def test_step9_guaranteed_context_reaches_the_answer_verbatim(
    scripted_model: ScriptedModel,
) -> None:
    exact = "Aspirin + Ibuprofen: *avoid*\n   (illustrative data, not medical advice)"
    guaranteed = EchoTool("final", ToolExecutionResult.as_guaranteed_context(exact))
    orchestrator = orchestrator_for(
        domain(),
        guaranteed,
        EchoTool("plain", "extra"),
        model=scripted_model.on_answer("paraphrased"),
    )

    alone = await orchestrator.run_round(TaskInfo(task_prompt="q", required_tool_names={"final"}))
    assert alone.guaranteed_contexts == [exact]
    assert alone.text == exact  # nothing to compose: no model call
    assert scripted_model.calls == []

    mixed = await orchestrator.run_round(
        TaskInfo(task_prompt="q", required_tool_names={"final", "plain"})
    )
    assert mixed.guaranteed_contexts == [exact]
    assert mixed.text == f"{exact}\n\nparaphrased"  # the finished answer leads, verbatim
    [call] = scripted_model.calls_for(Purpose.ANSWER)
    assert [pac.context for pac in call.inputs["contexts"]] == [exact, "extra"]


async def test_step9_usage_counts_every_model_call_of_the_question(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_suitability(["lookup"]).on_extract(Query, {"query": "q"}).on_answer()
    service = conversation_for(domain(), QueryTool("lookup"), model=scripted_model)

    answer = await service.ask("q")

    assert answer.usage.llm_calls == 3 == len(scripted_model.calls)
    assert [call.purpose for call in answer.model_calls] == ["suitability", "parameters", "answer"]


# -- seed 6.4: the cheap neighbour search, then the conditional full search ----------------


def _seed_coordinator() -> Coordinator:
    def decompose(task: TaskInfo) -> None:
        query, words, kind = "find the dosage", task.important_words, task.prompt_type
        cheap = TaskInfo(
            task_no=task.task_no + ".1.n",
            task_prompt=query,
            important_words=words,
            prompt_type=kind,
        )
        cheap.required_tool_names = {"neighbor_search"}
        full = TaskInfo(
            task_no=task.task_no + ".1.s",
            task_prompt=query,
            important_words=words,
            prompt_type=kind,
        )
        full.required_tool_names = {"search"}
        full.conditional = True
        task.sub_tasks = [cheap, full]

    def decide(parent: TaskInfo, nxt: TaskInfo, done: ContextBuffer) -> SubtaskDecision:
        paired_prefix = nxt.task_no.replace(".s", ".n") + ":"
        answered = any(
            key.startswith(paired_prefix) and any(pac.context for pac in values)
            for key, values in done.items()
        )
        return SubtaskDecision.SKIP if answered else SubtaskDecision.RUN

    return Coordinator("deep_search", decompose, decide=decide)


@pytest.mark.parametrize(("neighbor_found", "full_runs"), [("page 12: 500 mg", False), ("", True)])
async def test_seed_cheap_neighbour_search_then_conditional_full_search(
    scripted_model: ScriptedModel, neighbor_found: str, full_runs: bool
) -> None:
    coordinator = _seed_coordinator()
    neighbor, search = EchoTool("neighbor_search", neighbor_found), EchoTool("search", "page 40")
    scripted_model.on_suitability({}).on_answer()
    service = conversation_for(domain(), coordinator, neighbor, search, model=scripted_model)

    answer = await service.ask("what is the dosage")

    [(decided, snapshot)] = coordinator.decisions
    assert decided == "1.1.s"
    assert list(snapshot) == ["1.1.n:neighbor_search"]
    assert bool(search.texts) is full_runs
    expected = SubtaskDecision.RUN if full_runs else SubtaskDecision.SKIP
    assert answer.trace.sub_tasks[1].decision is expected
    assert ("page 40" in answer.text) is full_runs


# -- review: clauses the first version got wrong -------------------------------------------


async def test_step9_the_answer_and_gatekeeper_see_the_users_message_not_the_rewritten_prompt(
    scripted_model: ScriptedModel,
) -> None:
    def to_json(task: TaskInfo) -> None:
        task.task_prompt = json.dumps({"products": ["Aspirin"]})
        task.sub_tasks = [subtask("1.1", "which one?", "asker")]

    splitter = Coordinator("splitter", to_json)
    asker, rag, deep = AskingTool("asker"), EchoTool("rag", "r"), FakeDeepSearch()
    scripted_model.on_extract(Query, {"query": "x"}).on_gatekeeper(True).on_answer("done")
    service = deep_search_service(
        splitter,
        asker,
        rag,
        deep,
        EchoTool("finder"),
        model=scripted_model,
    )
    scripted_model.on_suitability({})

    question = await service.ask("can I take aspirin?")
    answer = await service.ask("the 500 mg one", session_id=question.session_id)

    assert answer.kind == "answer"
    assert answer.trace.task_prompt == '{"products": ["Aspirin"]}'  # the coordinator's rewrite
    [composed] = scripted_model.calls_for(Purpose.ANSWER)
    assert composed.inputs["question"] == "can I take aspirin?"  # survived the round
    [judged] = scripted_model.calls_for(Purpose.GATEKEEPER)
    assert judged.inputs["question"] == "can I take aspirin?"


async def test_step1_restore_after_an_error_keeps_earlier_coordinators_subtasks_stamped(
    scripted_model: ScriptedModel,
) -> None:
    def breaks(task: TaskInfo) -> None:
        task.sub_tasks[0].task_prompt = "vandalised"
        raise RuntimeError("boom")

    first = Coordinator("first", _split(subtask("1.1", "a", "echo")), priority=1)
    bad = Coordinator("bad", breaks, priority=2)
    echo = EchoTool("echo", "ok")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), first, bad, echo, model=scripted_model)

    answer = await service.ask("q")

    [sub] = answer.trace.sub_tasks
    assert sub.task_prompt == "a"  # the failing coordinator's change is undone
    assert sub.owner_coordinator_name == "demo.first"
    assert set(sub.applied_coordinator_names) == {"demo.first", "demo.bad"}
    assert echo.texts == [f"q{AGENT_COORDINATOR_MARKER}a"]


async def test_step2_a_subtask_of_a_subtask_gets_its_parents_execution_text_with_the_marker(
    scripted_model: ScriptedModel,
) -> None:
    nested = subtask("1.1", "sub", "echo")
    nested.sub_tasks = [subtask("1.1.1", "subsub", "echo")]
    splitter = Coordinator("splitter", _split(nested))
    echo = EchoTool("echo", "ok")
    scripted_model.on_suitability({}).on_answer("done")
    service = conversation_for(domain(), splitter, echo, model=scripted_model)

    answer = await service.ask("q")

    marker = AGENT_COORDINATOR_MARKER
    assert echo.texts == [f"q{marker}sub{marker}subsub", f"q{marker}sub"]
    assert answer.trace.sub_tasks[0].sub_tasks[0].owner_coordinator_name == "demo.splitter"
    assert extract_coordinator_original(echo.texts[0]) == f"q{marker}sub"


async def test_step9_guaranteed_context_is_kept_verbatim_even_when_the_model_paraphrases(
    scripted_model: ScriptedModel,
) -> None:
    exact = "Take 500 mg, at most 3 times a day."
    orchestrator = orchestrator_for(
        domain(),
        EchoTool("final", ToolExecutionResult.as_guaranteed_context(exact)),
        EchoTool("plain", "extra"),
        model=scripted_model.on_answer("About 500 milligrams, thrice daily."),
    )

    result = await orchestrator.run_round(
        TaskInfo(task_prompt="q", required_tool_names={"final", "plain"})
    )

    assert result.text == f"{exact}\n\nAbout 500 milligrams, thrice daily."


async def test_step9_a_guaranteed_answer_leads_unless_the_composition_opens_with_it(
    scripted_model: ScriptedModel,
) -> None:
    """Only a composition that opens with the guaranteed answer saves repeating it: one that
    merely contains its text ("No" in "Nothing") may contradict it, and used to drop it."""
    orchestrator = orchestrator_for(
        domain(),
        EchoTool("final", ToolExecutionResult.as_guaranteed_context("No")),
        EchoTool("plain", "extra"),
        model=scripted_model,
    )
    task = TaskInfo(task_prompt="q", required_tool_names={"final", "plain"})

    scripted_model.on_answer("Nothing speaks against it; yes.", times=1)
    contradicting = await orchestrator.run_round(task.model_copy(deep=True))
    scripted_model.on_answer("No\n\nThe label says so.")
    repeating = await orchestrator.run_round(task.model_copy(deep=True))

    assert contradicting.text == "No\n\nNothing speaks against it; yes."
    assert repeating.text == "No\n\nThe label says so."


async def test_step9_a_blank_guaranteed_context_is_no_answer(
    scripted_model: ScriptedModel,
) -> None:
    """A blank guaranteed context used to count as the finished answer: the composition was
    skipped and the caller got an empty text, with no failure."""
    orchestrator = orchestrator_for(
        domain(),
        EchoTool("final", ToolExecutionResult.as_guaranteed_context("  ")),
        model=scripted_model.on_answer("composed"),
    )

    result = await orchestrator.run_round(TaskInfo(task_prompt="q", required_tool_names={"final"}))

    assert (result.text, result.guaranteed_contexts) == ("composed", [])


async def test_step9_subtask_context_feeding_a_guaranteed_answer_is_not_recomposed(
    scripted_model: ScriptedModel,
) -> None:
    """Subtask results were the guaranteed answer's inputs: composing over them again could
    contradict the finished answer, so no answer call is made."""
    exact = "Interaction: major (illustrative data)."
    coordinator = Coordinator(
        "splitter",
        lambda task: task.sub_tasks.append(
            TaskInfo(task_no="1.1", task_prompt="look up", required_tool_names={"plain"})
        ),
    )
    orchestrator = orchestrator_for(
        domain(),
        coordinator,
        EchoTool("plain", "substance: warfarin"),
        EchoTool("final", ToolExecutionResult.as_guaranteed_context(exact)),
        model=scripted_model,
    )

    result = await orchestrator.run_round(TaskInfo(task_prompt="q", required_tool_names={"final"}))

    assert result.text == exact
    assert scripted_model.calls_for(Purpose.ANSWER) == []


async def test_step7_a_plain_context_consumer_asking_a_question_is_a_recorded_error(
    scripted_model: ScriptedModel,
) -> None:
    class AskingConsumer(Consumer):
        def execute_with_prior_context(
            self, params: object, text: str, prior_context: ContextBuffer
        ) -> ToolExecutionResult:
            return ToolExecutionResult.clarifying_question("Which?")

    scripted_model.on_answer("done")
    orchestrator = orchestrator_for(domain(), AskingConsumer("asks"), model=scripted_model)
    task = TaskInfo(task_prompt="q", required_tool_names={"asks"})

    result = await orchestrator.run_round(task)

    assert result.kind == "answer"
    assert task.run.status is TaskStatus.DONE
    assert "ClarifiableContextConsumerTool" in task.run.failures[0]


async def test_concurrent_conversations_on_one_service_share_no_state(
    scripted_model: ScriptedModel,
) -> None:
    import asyncio

    asker, echo = (
        AskingTool("asker"),
        EchoTool("echo", lambda text: ToolExecutionResult.context(f"echo of {text}")),
    )
    scripted_model.on_extract(
        Query, lambda text, instruction: {"query": text.rsplit(" ", 1)[-1]}
    ).on_answer()
    scripted_model.on_suitability(lambda prompt, names: {"asker"} if "ask" in prompt else {"echo"})
    service = conversation_for(domain(), asker, echo, model=scripted_model)

    first, second, plain = await asyncio.gather(
        service.ask("ask about apples"), service.ask("ask about pears"), service.ask("hello")
    )

    assert first.kind == second.kind == "clarification"
    assert first.session_id != second.session_id
    assert plain.kind == "answer" and plain.text == "echo of hello"
    # its own choice, the chosen tool's confirmation and its answer, nobody else's
    assert plain.usage.llm_calls == 3
    replies = await asyncio.gather(
        service.ask("pears", session_id=second.session_id),
        service.ask("apples", session_id=first.session_id),
    )
    assert [reply.text for reply in replies] == ["asker resolved pears", "asker resolved apples"]


async def test_step8_an_overridden_deep_fallback_hook_resumes_in_a_fresh_orchestrator(
    scripted_model: ScriptedModel,
) -> None:
    from toolwire.orchestrator import DomainOrchestrator
    from toolwire.testing import registry_of

    class AskingDeep(Coordinator):
        def execute_with_result(self, params: object, text: str) -> ToolExecutionResult:
            return ToolExecutionResult.clarifying_question("Which edition?")

        def execute_with_clarification(
            self, params: object, text: str, clarification: object
        ) -> ToolExecutionResult:
            return ToolExecutionResult.context("deep answer")

    deep = AskingDeep("deep")
    deep.domain = "demo"  # the hook's own tool, not registered in the domain

    class HookOrchestrator(DomainOrchestrator):
        def get_deep_fallback_tool(self, prompt_type: str) -> AskingDeep:
            return deep

    registry, tools = registry_of("demo", EchoTool("rag", "partial"))
    scripted_model.on_suitability({}).on_gatekeeper(False, times=1).on_gatekeeper(True)
    scripted_model.on_answer()
    spec = domain(rag_tool="rag")
    root = TaskInfo(task_prompt="q")

    first = await HookOrchestrator(spec, registry, tools, scripted_model).run_round(root)
    assert first.kind == "clarification"
    assert root.run.pending_clarification is not None
    root.run.pending_clarification.reply = "the second"
    resumed = await HookOrchestrator(spec, registry, tools, scripted_model).run_round(root)

    assert (resumed.kind, resumed.text) == ("answer", "partial\ndeep answer")
    assert "demo.deep" not in tools
