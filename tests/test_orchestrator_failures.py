"""Every failure of issue 3 item 5: visible in the trace, never crashing the conversation."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
from structlog.testing import capture_logs

from orchestration_kit import (
    Coordinator,
    Decide,
    EchoTool,
    Query,
    QueryTool,
    domain,
    plugin_of,
    subtask,
)
from toolwire import (
    Clarification,
    ModelError,
    SubtaskDecision,
    TaskInfo,
    TaskStatus,
    TimeBudgetSpentError,
    ToolExecutionResult,
    UnknownSessionError,
)
from toolwire.app import App
from toolwire.conversation import waiting
from toolwire.disclosure import disclosed_answer
from toolwire.errors import ConfigError, SessionError, UnknownDomainError
from toolwire.llm import Purpose
from toolwire.orchestrator import ConversationService, DomainOrchestrator
from toolwire.registry import DomainSpec
from toolwire.server.problems import toolwire_error_status
from toolwire.sessions import MemorySessionStore
from toolwire.settings import OrchestratorSettings
from toolwire.testing import (
    ScriptedModel,
    UnscriptedCallError,
    conversation_for,
    orchestrator_for,
    registry_of,
)


async def test_a_tool_that_raises_is_reported_and_the_others_still_run(
    scripted_model: ScriptedModel,
) -> None:
    broken = EchoTool("broken", RuntimeError("database is down"), priority=1)
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["broken", "fine"]).on_answer()
    service = conversation_for(domain(), broken, fine, model=scripted_model)

    answer = await service.ask("q")

    assert answer.kind == "answer"
    assert answer.text.startswith("fine context")
    assert "Some steps failed" in answer.text
    assert answer.failures == ["task 1: tool demo.broken raised RuntimeError: database is down"]
    assert [(r.tool_name, r.outcome) for r in answer.trace.tools] == [
        ("demo.broken", "error"),
        ("demo.fine", "context"),
    ]


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


async def test_a_tool_raising_an_error_without_text_is_a_recorded_failure(
    scripted_model: ScriptedModel,
) -> None:
    """Recording the failure called str() of the error, which raised: the question crashed."""
    broken = EchoTool("broken", UnprintableError(), priority=1)
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["broken", "fine"]).on_answer()
    service = conversation_for(domain(), broken, fine, model=scripted_model)

    answer = await service.ask("q")

    assert answer.text.startswith("fine context")
    assert answer.failures == [
        "task 1: tool demo.broken raised UnprintableError: (its message cannot be shown: str() "
        "of it raised)"
    ]


async def test_a_tool_returning_something_else_than_a_result_is_a_recorded_error(
    scripted_model: ScriptedModel,
) -> None:
    sloppy = EchoTool("sloppy", lambda text: "just a string")  # type: ignore[arg-type,return-value]
    scripted_model.on_answer("nothing")
    orchestrator = orchestrator_for(domain(), sloppy, model=scripted_model)
    task = TaskInfo(task_prompt="q", required_tool_names={"sloppy"})

    result = await orchestrator.run_round(task)

    assert result.kind == "answer"
    assert "returned str; tools must return a ToolExecutionResult" in task.run.failures[0]


@pytest.mark.parametrize("question", ["", " \n"])
async def test_a_tool_asking_an_empty_question_is_a_recorded_failure(
    scripted_model: ScriptedModel, question: str
) -> None:
    """An empty clarifying question used to be asked: the user saw nothing to reply to."""
    mute = EchoTool("mute", ToolExecutionResult.clarifying_question(question), priority=1)
    fine = EchoTool("fine", "fine context", priority=2)
    scripted_model.on_suitability(["mute", "fine"]).on_answer()
    service = conversation_for(domain(), mute, fine, model=scripted_model)

    answer = await service.ask("q")

    assert answer.kind == "answer" and answer.text.startswith("fine context")
    assert answer.failures == [
        "task 1: tool demo.mute asked an empty clarifying question (the user would wait for a "
        "reply to nothing)"
    ]


async def test_a_failing_model_call_is_retried_a_bounded_number_of_times_then_recorded(
    scripted_model: ScriptedModel,
) -> None:
    fine = EchoTool("fine", "ok")
    scripted_model.on_suitability(ModelError("suitability", "timeout")).on_answer("composed")
    service = conversation_for(
        domain(), fine, model=scripted_model, settings=OrchestratorSettings(model_attempts=3)
    )

    answer = await service.ask("q")

    assert len(scripted_model.calls_for(Purpose.SUITABILITY)) == 3
    assert answer.kind == "answer" and answer.text.startswith("composed")
    assert answer.failures == [
        "task 1: confirm: a confirmation failed: model call for 'suitability' failed: timeout "
        "(after 3 attempt(s))"
    ]
    assert fine.texts == []


async def test_a_model_call_that_fails_once_succeeds_on_the_retry(
    scripted_model: ScriptedModel,
) -> None:
    fine = EchoTool("fine", "ok")
    scripted_model.on_suitability(ModelError("suitability", "reset"), times=1)
    scripted_model.on_suitability(["fine"]).on_answer()
    service = conversation_for(
        domain(), fine, model=scripted_model, settings=OrchestratorSettings(model_attempts=2)
    )

    answer = await service.ask("q")

    assert answer.failures == []
    assert answer.text == "ok"


async def test_a_spent_time_budget_is_not_retried(scripted_model: ScriptedModel) -> None:
    fine = EchoTool("fine", "ok")
    spent = TimeBudgetSpentError("suitability", "the question's time budget of 1 s is spent")
    scripted_model.on_suitability(spent).on_answer("composed")
    service = conversation_for(
        domain(), fine, model=scripted_model, settings=OrchestratorSettings(model_attempts=3)
    )

    answer = await service.ask("q")

    assert len(scripted_model.calls_for(Purpose.SUITABILITY)) == 1
    assert "time budget of 1 s is spent" in answer.failures[0]


async def test_invalid_model_output_for_parameters_is_recorded_and_the_tool_skipped(
    scripted_model: ScriptedModel,
) -> None:
    lookup, other = QueryTool("lookup"), EchoTool("other", "other context")
    scripted_model.on_suitability(["lookup", "other"]).on_extract(Query, None).on_answer()
    service = conversation_for(domain(), lookup, other, model=scripted_model)

    answer = await service.ask("q")

    assert len(scripted_model.calls_for(Purpose.PARAMETERS)) == 1  # default: 1 attempt
    assert lookup.calls == []
    assert answer.trace.tools[0].outcome == "error"
    assert "parameters could not be extracted" in answer.trace.tools[0].detail
    assert "the model returned invalid output" in answer.failures[0]
    assert answer.text.startswith("other context")


async def test_incomplete_suitability_output_counts_as_invalid(
    scripted_model: ScriptedModel,
) -> None:
    class Partial(ScriptedModel):
        async def suitability(self, task_prompt, questions, **options):  # type: ignore[no-untyped-def]
            await super().suitability(task_prompt, questions, **options)
            return {}

    model = Partial().on_suitability([]).on_answer("a")
    service = conversation_for(domain(), EchoTool("one"), model=model)

    answer = await service.ask("q")

    assert len(model.calls_for(Purpose.SUITABILITY)) == 1
    assert "invalid output" in answer.failures[0]


async def test_a_failing_answer_composition_is_a_model_error_for_the_caller(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_suitability([]).on_answer(ModelError("answer", "server unreachable"))
    service = conversation_for(domain(), EchoTool("one"), model=scripted_model)

    with pytest.raises(ModelError, match="server unreachable"):
        await service.ask("q")


async def test_prompt_types_that_change_nothing_cost_no_classification(
    scripted_model: ScriptedModel,
) -> None:
    """Without a deep fallback the prompt type changes nothing toolwire runs: no call."""
    scripted_model.on_classify(ModelError("classification", "down"))  # type: ignore[arg-type]
    scripted_model.on_suitability([]).on_answer("a")
    service = conversation_for(
        domain(prompt_types=["a", "b"]), EchoTool("one"), model=scripted_model
    )

    answer = await service.ask("q")

    assert Purpose.CLASSIFICATION not in scripted_model.purposes
    assert answer.trace.prompt_type == "" and answer.failures == []


class ClassifyingFirst(DomainOrchestrator):
    """A domain whose tools read ``prompt_type``: task "1" is classified before anything runs."""

    def classifies_first(self) -> bool:
        return True


async def test_a_failing_classification_leaves_the_prompt_type_empty(
    scripted_model: ScriptedModel,
) -> None:
    scripted_model.on_classify(ModelError("classification", "down"))  # type: ignore[arg-type]
    spec = domain(prompt_types=["a", "b"])
    registry, tools = registry_of(spec.name, EchoTool("one"))
    orchestrator = ClassifyingFirst(spec, registry, tools, scripted_model)

    task = await orchestrator.new_task("q")

    assert scripted_model.purposes == [Purpose.CLASSIFICATION]
    assert task.prompt_type == ""
    assert "prompt type classification failed" in task.run.failures[0]


async def test_a_coordinator_that_raises_or_returns_another_task_is_undone(
    scripted_model: ScriptedModel,
) -> None:
    class Replacer(Coordinator):
        def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
            return TaskInfo(task_prompt="a different task")

    class AsyncBreaker(Coordinator):
        async def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:  # type: ignore[override]
            task.task_prompt = "half-changed"
            raise ValueError("async boom")

    scripted_model.on_suitability([]).on_answer("a")
    service = conversation_for(
        domain(),
        Replacer("replacer", priority=1),
        AsyncBreaker("breaker", priority=2),
        model=scripted_model,
    )

    answer = await service.ask("q")

    assert answer.trace.task_prompt == "q"
    assert [(r.coordinator_name, r.outcome) for r in answer.trace.coordinators] == [
        ("demo.replacer", "error"),
        ("demo.breaker", "error"),
    ]
    assert "must return the TaskInfo instance it received" in answer.failures[0]
    assert "ValueError: async boom" in answer.failures[1]


def _a_model_in_tool_params(task: TaskInfo) -> None:
    cast(dict[str, object], task.tool_params)["lookup"] = Query(query="x")  # not its data


def _a_number_in_required_tool_names(task: TaskInfo) -> None:
    cast(set[object], task.required_tool_names).add(5)


@pytest.mark.parametrize("edit", [_a_model_in_tool_params, _a_number_in_required_tool_names])
async def test_a_coordinator_writing_invalid_fields_in_place_is_undone_and_recorded(
    scripted_model: ScriptedModel, edit: Callable[[TaskInfo], None]
) -> None:
    """An edit in place is not validated as an assignment is: before, taking it into the tree
    raised ValidationError outside the coordinator's failure handling and ended the question."""

    def decompose(task: TaskInfo) -> None:
        task.task_prompt = "rewritten"  # valid, but undone with the rest of its run
        edit(task)

    scripted_model.on_suitability(["echo"]).on_answer()
    orchestrator = orchestrator_for(
        domain(),
        Coordinator("careless", decompose, priority=1),
        Coordinator("careful", lambda task: task.important_words.append("kept"), priority=2),
        EchoTool("echo", "echoed"),
        model=scripted_model,
    )
    task = TaskInfo(task_prompt="q")

    result = await orchestrator.run_round(task)

    assert result.kind == "answer" and result.text.startswith("echoed")
    assert (task.task_prompt, task.tool_params, task.required_tool_names) == ("q", {}, set())
    assert task.important_words == ["kept"]  # the chain went on
    assert [(r.coordinator_name, r.outcome) for r in task.run.coordinator_runs] == [
        ("demo.careless", "error"),
        ("demo.careful", "decomposed"),
    ]
    assert result.failures[0].startswith(
        "task 1: coordinator demo.careless raised ValidationError: 1 validation error for TaskInfo"
    )


def _raise(parent: TaskInfo, nxt: TaskInfo, done: object) -> SubtaskDecision:
    raise RuntimeError("cannot decide")


def _garbage(parent: TaskInfo, nxt: TaskInfo, done: object) -> SubtaskDecision:
    return "perhaps"  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("decide", "failure"),
    [
        (_raise, "conditional decision of coordinator demo.c raised RuntimeError: cannot decide"),
        (
            _garbage,
            "conditional decision of coordinator demo.c raised ValueError: 'perhaps' is not a "
            "valid SubtaskDecision",
        ),
    ],
    ids=["raises", "returns-garbage"],
)
async def test_a_conditional_decision_that_raises_or_is_garbage_runs_the_subtask(
    scripted_model: ScriptedModel, decide: Decide, failure: str
) -> None:
    def split(task: TaskInfo) -> None:
        task.sub_tasks = [subtask("1.1", "maybe", "maybe", conditional=True)]

    maybe = EchoTool("maybe", "ran")
    scripted_model.on_suitability([]).on_answer()
    service = conversation_for(
        domain(), Coordinator("c", split, decide=decide), maybe, model=scripted_model
    )

    answer = await service.ask("q")

    maybe_task = answer.trace.sub_tasks[0]
    assert maybe.texts and maybe_task.decision is SubtaskDecision.RUN
    assert maybe_task.status is TaskStatus.DONE
    assert maybe_task.failures == [failure]  # a failure of the subtask, as a coordinator's is
    assert answer.failures == [f"task 1.1: {failure}"]
    assert maybe_task.notes == ["conditional: the decision failed: run"]  # no exception text


async def test_a_failed_conditional_decision_shows_callers_an_error_id_not_its_text(
    scripted_model: ScriptedModel,
) -> None:
    secret = "db password=hunter2 at orders.internal refused"

    def leak(parent: TaskInfo, nxt: TaskInfo, done: object) -> SubtaskDecision:
        raise ConnectionError(secret)

    def split(task: TaskInfo) -> None:
        task.sub_tasks = [subtask("1.1", "maybe", "maybe", conditional=True)]

    scripted_model.on_suitability([]).on_answer("The answer.")
    service = conversation_for(
        domain(), Coordinator("c", split, decide=leak), EchoTool("maybe", "ran"),
        model=scripted_model,
    )  # fmt: skip

    answer = await service.ask("q")
    with capture_logs() as events:
        public = disclosed_answer(answer)

    maybe_task = answer.trace.sub_tasks[0]
    assert maybe_task.failures == [
        f"conditional decision of coordinator demo.c raised ConnectionError: {secret}"
    ]
    assert "orders.internal" not in " ".join(maybe_task.notes) + answer.text
    assert "1 problem(s); see the trace" in answer.text
    shown = public.model_dump_json()
    assert "orders.internal" not in shown and "hunter2" not in shown
    (withheld,) = [event for event in events if event["event"] == "error_withheld"]
    assert withheld["detail"] == maybe_task.failures[0]
    assert public.trace.sub_tasks[0].failures == [
        f"a step failed (error id {withheld['error_id']})"
    ]
    assert public.failures == [f"task 1.1: a step failed (error id {withheld['error_id']})"]


async def test_the_depth_limit_is_recorded_and_the_rest_goes_on(
    scripted_model: ScriptedModel,
) -> None:
    chain = subtask("1.1", "one", "echo")
    chain.sub_tasks = [subtask("1.1.1", "two", "echo")]
    chain.sub_tasks[0].sub_tasks = [subtask("1.1.1.1", "three", "echo")]

    def split(task: TaskInfo) -> None:
        task.sub_tasks = [chain.model_copy(deep=True)]

    echo = EchoTool("echo", "e")
    scripted_model.on_suitability([]).on_answer()
    service = conversation_for(
        domain(),
        Coordinator("c", split),
        echo,
        model=scripted_model,
        settings=OrchestratorSettings(max_depth=2),
    )

    answer = await service.ask("q")

    two = answer.trace.sub_tasks[0].sub_tasks[0]
    assert two.status is TaskStatus.DONE
    assert two.sub_tasks[0].status is TaskStatus.FAILED
    assert len(echo.texts) == 2
    assert answer.failures == ["task 1.1.1.1: subtask 1.1.1.1 not processed: depth limit 2 reached"]


async def test_an_unknown_required_tool_name_is_an_error_naming_the_candidates(
    scripted_model: ScriptedModel,
) -> None:
    lookup = EchoTool("lookup", "found")
    scripted_model.on_answer()
    orchestrator = orchestrator_for(domain(), lookup, model=scripted_model)
    task = TaskInfo(task_prompt="q", required_tool_names={"lookpu", "lookup"})

    result = await orchestrator.run_round(task)

    assert result.text.startswith("found")
    [failure] = task.run.failures
    assert "required tool 'lookpu' cannot be activated" in failure
    assert "did you mean" in failure and "demo.lookup" in failure
    refused = task.run.tool_runs[0]
    assert refused.tool_name == "lookpu" and refused.record.outcome == "error"


async def test_an_unscripted_model_call_inside_a_tool_is_not_swallowed(
    scripted_model: ScriptedModel,
) -> None:
    class Greedy(EchoTool):
        def __init__(self, model: ScriptedModel) -> None:
            super().__init__("greedy")
            self.model = model

        async def execute_with_result(self, params, text):  # type: ignore[no-untyped-def,override]
            await self.model.judge_context(text, [])
            return ToolExecutionResult.context("never")

    orchestrator = orchestrator_for(domain(), Greedy(scripted_model), model=scripted_model)

    with pytest.raises(UnscriptedCallError, match="unscripted 'gatekeeper' call"):
        await orchestrator.run_round(TaskInfo(task_prompt="q", required_tool_names={"greedy"}))


def two_domain_service(model: ScriptedModel) -> ConversationService:
    registry, tools = registry_of("a", EchoTool("x"))
    return ConversationService(
        registry=registry,
        domains={"a": DomainSpec(name="a"), "b": DomainSpec(name="b")},
        tools=tools,
        llm=model,
        store=MemorySessionStore(),
    )


async def test_conversation_errors_are_clear(scripted_model: ScriptedModel) -> None:
    service = two_domain_service(scripted_model)

    scripted_model.on_route(None)  # the message fits neither domain
    with pytest.raises(UnknownDomainError, match="no default domain is configured"):
        await service.ask("q")
    with pytest.raises(UnknownDomainError, match="unknown domain 'c'; installed domains: a, b"):
        await service.ask("q", domain="c")
    with pytest.raises(UnknownSessionError, match="no conversation is stored"):
        await service.ask("reply", session_id="made-up")

    stored = await service.store.create("a", waiting(TaskInfo(task_prompt="q")))
    with pytest.raises(SessionError, match="belongs to domain 'a', not 'b'"):
        await service.ask("reply", domain="b", session_id=stored.session_id)
    with pytest.raises(SessionError, match="holds no task waiting for a reply"):
        await service.ask("reply", session_id=stored.session_id)


async def test_a_stored_conversation_with_two_waiting_questions_is_called_inconsistent(
    scripted_model: ScriptedModel,
) -> None:
    """It said "holds no task waiting for a reply (2 waiting)"; a round stops at its first
    question, so only a damaged stored tree has two."""
    service = two_domain_service(scripted_model)
    root = TaskInfo(
        task_prompt="q", sub_tasks=[TaskInfo(task_prompt="s"), TaskInfo(task_prompt="t")]
    )
    for sub in root.sub_tasks:
        sub.run.status = TaskStatus.WAITING_FOR_USER
        sub.run.clarifications.append(
            Clarification(tool_name="x", question="?", execution_text="s")
        )
    stored = await service.store.create("a", waiting(root))

    with pytest.raises(SessionError) as raised:
        await service.ask("reply", session_id=stored.session_id)

    assert str(raised.value) == (
        f"the stored conversation of session {stored.session_id!r} is inconsistent: 2 tasks wait "
        "for a reply, but a reply can answer only one; start a new conversation without a "
        "session id"
    )
    assert toolwire_error_status(raised.value)[:2] == (400, "session_error")


def test_misspelt_domain_tool_names_fail_when_the_orchestrator_is_built(
    scripted_model: ScriptedModel,
) -> None:
    for spec, key in (
        (domain(rag_tool="rga"), "rag_tool"),
        (domain(deep_fallback={"*": "deeep"}), r"deep_fallback\.\*"),
        (domain(excluded_tools=["nope"]), r"excluded_tools\[0\]"),
    ):
        with pytest.raises(ConfigError, match=f"domain 'demo': {key}: unknown tool"):
            orchestrator_for(spec, EchoTool("rag"), EchoTool("deep"), model=scripted_model)


class _Search(EchoTool):
    name = "search"

    def __init__(self) -> None:
        super().__init__("search", "found")


class _Deep(Coordinator):
    name = "deep"

    def __init__(self) -> None:
        super().__init__("deep")


@pytest.mark.parametrize(
    ("spec", "disabled", "problem"),
    [
        (DomainSpec(name="shop", rag_tool="search"), "search", "rag_tool 'search'"),
        (
            DomainSpec(name="shop", rag_tool="search", deep_fallback={"*": "deep"}),
            "deep",
            "deep_fallback.* 'deep'",
        ),
    ],
)
def test_a_domain_reference_to_a_disabled_tool_fails_when_the_app_is_built(
    toolwire_app_factory: Callable[..., App],
    scripted_model: ScriptedModel,
    spec: DomainSpec,
    disabled: str,
    problem: str,
) -> None:
    config = f"tools:\n  - {{name: {disabled}, domain: shop, enabled: false}}\n"

    with pytest.raises(ConfigError) as raised:
        toolwire_app_factory(
            plugins=[plugin_of(spec, _Search, _Deep)], config=config, llm=scripted_model
        )

    assert f"domain 'shop': {problem} names tool 'shop.{disabled}', which is disabled" in str(
        raised.value
    )
    # excluding a disabled tool is harmless
    excluded = spec.model_copy(
        update={"rag_tool": None, "deep_fallback": {}, "excluded_tools": [disabled]}
    )
    app = toolwire_app_factory(
        plugins=[plugin_of(excluded, _Search, _Deep)], config=config, llm=scripted_model
    )
    assert app.domains["shop"].excluded_tools == [disabled]


def test_the_orchestrator_applies_the_same_domain_reference_check_as_the_build(
    scripted_model: ScriptedModel,
) -> None:
    registry, tools = registry_of("demo", EchoTool("rag"))
    del tools["demo.rag"]  # registered but not built: disabled

    disabled = "rag_tool 'rag' names tool 'demo.rag', which is disabled"
    with pytest.raises(ConfigError, match=disabled):
        DomainOrchestrator(domain(rag_tool="rag"), registry, tools, scripted_model)


async def test_a_stored_task_naming_a_tool_disabled_since_is_a_recorded_failure(
    scripted_model: ScriptedModel,
) -> None:
    from toolwire.run_state import TaskRun, ToolRun

    scripted_model.on_answer("done")
    orchestrator = orchestrator_for(domain(), EchoTool("kept", "k"), model=scripted_model)
    gone = ToolRun.activated("demo.gone", "suitability")
    gone.params = {}
    root = TaskInfo(
        task_prompt="q",
        run=TaskRun(tool_runs=[gone, ToolRun.activated("demo.kept", "suitability")]),
    )

    result = await orchestrator.run_round(root)

    assert result.kind == "answer"
    assert [run.record.outcome for run in root.run.tool_runs] == ["error", "context"]
    assert "'demo.gone' activated on task 1 is no longer available" in result.failures[0]


async def test_a_failing_gatekeeper_is_recorded_and_the_deep_fallback_not_run(
    scripted_model: ScriptedModel,
) -> None:
    deep = Coordinator("deep")
    scripted_model.on_suitability({}).on_gatekeeper(ModelError("gatekeeper", "timeout"))
    scripted_model.on_answer("composed")
    service = conversation_for(
        domain(rag_tool="rag", deep_fallback={"*": "deep"}),
        EchoTool("rag", "partial"),
        deep,
        model=scripted_model,
    )

    answer = await service.ask("q")

    assert answer.kind == "answer" and answer.text.startswith("composed")
    assert len(scripted_model.calls_for(Purpose.GATEKEEPER)) == 1  # default: 1 attempt
    assert len(deep.seen) == 1  # only its turn in the coordinator chain, no fallback round
    assert [(run.tool_name, run.reason) for run in answer.trace.tools] == [("demo.rag", "rag")]
    assert answer.failures == [
        "task 1: context gatekeeper failed, no deep fallback: model call for 'gatekeeper' "
        "failed: timeout (after 1 attempt(s))"
    ]
