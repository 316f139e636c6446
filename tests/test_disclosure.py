"""disclosed_answer: every place of an answer that can hold internal error text, both forms."""

from __future__ import annotations

import re

from structlog.testing import capture_logs

from toolwire.conversation import TurnContext
from toolwire.disclosure import Disclosure, disclosed_answer, disclosed_event
from toolwire.events import (
    AnswerDelta,
    CoordinatorFinished,
    ModelCallFinished,
    Routed,
    ToolFinished,
    ToolsChosen,
)
from toolwire.llm.base import CallRecord
from toolwire.orchestrator import Answer, TaskTrace
from toolwire.run_state import CoordinatorRunRecord, TaskStatus, ToolRunRecord
from toolwire.selection.routing import RoutingRecord
from toolwire.selection.trace import SelectionRecord, StepRecord

DSN_ERROR = "tool shop.stock raised OperationalError: postgresql://app:hunter2@db/x unreachable"
COORDINATOR_ERROR = "KeyError: 'password=hunter2'"
MODEL_ERROR = "HTTP 401: Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUv"


def answer_with_failures() -> Answer:
    sub_task = TaskTrace(
        task_no="1.1",
        task_prompt="stock of kettles",
        status=TaskStatus.DONE,
        tools=[
            ToolRunRecord(tool_name="shop.stock", reason="required", outcome="error",
                          detail=DSN_ERROR),
            ToolRunRecord(tool_name="shop.price", reason="required", outcome="context",
                          detail="Kettles cost 20 EUR (token=abc is part of the result)"),
        ],
        failures=[DSN_ERROR],
        notes=["gatekeeper: context insufficient, missing ['the password=hunter2 of the shop']"],
    )  # fmt: skip
    root = TaskTrace(
        task_no="1",
        task_prompt="kettles?",
        status=TaskStatus.DONE,
        coordinators=[
            CoordinatorRunRecord(coordinator_name="shop.plan", outcome="error",
                                 detail=COORDINATOR_ERROR),
        ],
        failures=[f"coordinator shop.plan raised {COORDINATOR_ERROR}", DSN_ERROR],
        sub_tasks=[sub_task],
    )  # fmt: skip
    return Answer(
        kind="answer",
        text="Kettles cost 20 EUR (token=abc is part of the result)",
        domain="shop",
        failures=[
            f"task 1: coordinator shop.plan raised {COORDINATOR_ERROR}",
            f"task 1: {DSN_ERROR}",
            f"task 1.1: {DSN_ERROR}",
        ],
        trace=root,
        model_calls=[
            CallRecord(purpose="suitability", model="m", ok=False, error=MODEL_ERROR),
            CallRecord(purpose="answer", model="m"),
        ],
    )


def test_callers_get_reasons_and_ids_and_the_log_gets_the_text() -> None:
    answer = answer_with_failures()

    with capture_logs() as events:
        public = disclosed_answer(answer)

    text = public.model_dump_json()
    for secret in ("hunter2", "OperationalError", "KeyError", "sk-proj", "Incorrect API key"):
        assert secret not in text
    ids = {event["error_id"]: event for event in events if event["event"] == "error_withheld"}
    assert len(ids) == 4  # the same text in two tasks and two places shares one id
    dsn_id = next(i for i, e in ids.items() if e["detail"] == DSN_ERROR)
    assert public.failures == [
        f"task 1: a step failed (error id {_id_of(public.failures[0])})",
        f"task 1: a step failed (error id {dsn_id})",
        f"task 1.1: tool shop.stock failed (error id {dsn_id})",
    ]
    stock, price = public.trace.sub_tasks[0].tools
    assert stock.detail == f"failed (error id {dsn_id})"
    assert price.detail == answer.trace.sub_tasks[0].tools[1].detail  # a result, not an error
    assert public.text == answer.text  # the answer itself passes unchanged
    coordinator_id = _id_of(public.trace.coordinators[0].detail)
    assert ids[coordinator_id]["detail"] == COORDINATOR_ERROR
    assert ids[coordinator_id]["coordinator"] == "shop.plan"
    # notes carry no error text; what the model wrote into one is masked like any text
    assert public.trace.sub_tasks[0].notes == [
        "gatekeeper: context insufficient, missing ['the password=*** of the shop']"
    ]
    assert ids[_id_of(public.model_calls[0].error or "")]["purpose"] == "suitability"
    assert public.model_calls[1] == answer.model_calls[1]


def test_a_later_turns_context_notes_show_toolwires_words_and_withhold_the_error() -> None:
    """``Answer.context.notes`` say why a follow-up rewrite or a compression of earlier turns
    was not used, with the model server's error after the colon: over HTTP and MCP that error
    was shown whole (an API key the server echoed)."""
    context = TurnContext(
        turns_read=[3, 4],
        summaries_read=["1-2"],
        notes=[
            f"the follow-up rewrite failed: model call for 'decomposition' failed: {MODEL_ERROR}",
            f"earlier turns 1-2 not compressed: {MODEL_ERROR}",
        ],
    )
    answer = answer_with_failures().model_copy(update={"turn": 5, "context": context})

    with capture_logs() as events:
        public = disclosed_answer(answer)
    verbose = disclosed_answer(answer, verbose=True)

    assert public.context is not None and verbose.context is not None
    rewrite, compression = public.context.notes
    assert rewrite == f"the follow-up rewrite failed (error id {_id_of(rewrite)})"
    assert compression == f"earlier turns 1-2 not compressed (error id {_id_of(compression)})"
    withheld = {e["error_id"]: e["detail"] for e in events if e["event"] == "error_withheld"}
    assert withheld[_id_of(compression)] == MODEL_ERROR
    assert "sk-proj" not in public.model_dump_json()
    assert (public.context.turns_read, public.context.summaries_read) == ([3, 4], ["1-2"])
    assert verbose.context.notes[1] == (
        "earlier turns 1-2 not compressed: HTTP 401: Incorrect API key provided: ***"
    )


def test_the_verbose_form_shows_the_text_with_secrets_masked() -> None:
    with capture_logs() as events:
        verbose = disclosed_answer(answer_with_failures(), verbose=True)

    assert events == []
    assert verbose.failures[2] == (
        "task 1.1: tool shop.stock raised OperationalError: postgresql://app:***@db/x unreachable"
    )
    assert verbose.model_calls[0].error == "HTTP 401: Incorrect API key provided: ***"
    assert verbose.trace.coordinators[0].detail == "KeyError: 'password=***'"


def _id_of(text: str) -> str:
    found = re.search(r"error id ([0-9a-f]{12})", text)
    assert found is not None, text
    return found[1]


def test_the_tool_selection_record_is_disclosed_the_same_way() -> None:
    step_failure = f"a confirmation failed: model call for 'suitability' failed: {MODEL_ERROR}"
    selection = SelectionRecord(
        steps=[StepRecord(step="confirm", failure=step_failure)],
        left_out={"shop.stock": "RuntimeError: password=hunter2"},
    )
    assert selection.failure == f"confirm: {step_failure}"
    trace = TaskTrace(
        task_no="1",
        task_prompt="kettles?",
        status=TaskStatus.DONE,
        selection=selection,
        failures=[selection.failure],
    )
    answer = Answer(kind="answer", text="?", domain="shop", trace=trace,
                    failures=[f"task 1: {selection.failure}"])  # fmt: skip

    with capture_logs():
        public = disclosed_answer(answer)

    assert public.trace.selection is not None
    [step] = public.trace.selection.steps
    failure_id = _id_of(step.failure or "")
    assert public.trace.selection.failure == (
        f"confirm: tool selection failed (error id {failure_id})"
    )
    assert public.failures == [f"task 1: tool selection failed (error id {failure_id})"]
    assert public.trace.selection.left_out["shop.stock"].startswith("failed (error id ")
    assert "hunter2" not in public.model_dump_json() and "sk-proj" not in public.model_dump_json()


def test_streamed_events_withhold_the_same_texts_under_the_same_ids_as_the_answer() -> None:
    disclosure = Disclosure(verbose=False)
    routing = RoutingRecord(decided_by="failure", domain=None, failure=f"routing: {MODEL_ERROR}")
    events = [
        ToolFinished(
            task_no="1.1",
            record=ToolRunRecord(
                tool_name="shop.stock", reason="required", outcome="error", detail=DSN_ERROR
            ),
        ),
        CoordinatorFinished(
            task_no="1",
            record=CoordinatorRunRecord(
                coordinator_name="shop.plan", outcome="error", detail=COORDINATOR_ERROR
            ),
        ),
        ToolsChosen(
            task_no="1",
            selection=SelectionRecord(
                steps=[StepRecord(step="choose", failure=MODEL_ERROR)],
                left_out={"shop.x": COORDINATOR_ERROR},
            ),
            tools=[
                ToolRunRecord(tool_name="x", reason="required", outcome="error", detail=DSN_ERROR)
            ],
        ),
        ModelCallFinished(
            record=CallRecord(purpose="choice", model="m", ok=False, error=MODEL_ERROR)
        ),
        Routed(routing=routing),
        AnswerDelta(text="token=abc is part of the answer"),
    ]

    with capture_logs():
        shown = [disclosed_event(event, disclosure) for event in events]
        answer = disclosed_answer(answer_with_failures(), disclosure=disclosure)

    dumped = " ".join(event.model_dump_json() for event in shown)
    assert "hunter2" not in dumped and "sk-proj" not in dumped
    assert shown[-1] == events[-1]  # the answer's text is the answer: unchanged
    tool_detail = shown[0].record.detail  # type: ignore[attr-defined]
    assert re.fullmatch(r"failed \(error id [0-9a-f]{12}\)", tool_detail)
    assert answer.trace.sub_tasks[0].tools[0].detail == tool_detail
    assert shown[2].tools[0].detail == tool_detail  # type: ignore[attr-defined]
    assert "error id" in (shown[4].routing.failure or "")  # type: ignore[attr-defined]
