"""What ``ask`` returns: the answer or a clarifying question, the task tree's trace, usage."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from toolwire.conversation import TurnContext
from toolwire.llm.base import CallRecord, Usage
from toolwire.run_state import (
    CoordinatorRunRecord,
    Notice,
    SubtaskDecision,
    TaskRun,
    TaskStatus,
    ToolRunRecord,
)
from toolwire.selection.routing import RoutingRecord
from toolwire.selection.trace import SelectionRecord
from toolwire.task import ROOT_TASK_NO, TaskInfo


class TaskTrace(BaseModel):
    """One task of the tree as the trace shows it."""

    task_no: str
    task_prompt: str
    user_message: str | None = None
    """Task "1": the user's message (``task_prompt`` may be a coordinator's rewrite of it)."""
    status: TaskStatus
    prompt_type: str = ""
    conditional: bool = False
    owner_coordinator_name: str | None = None
    required_tool_names: list[str] = Field(default_factory=list)
    applied_coordinator_names: list[str] = Field(default_factory=list)
    decision: SubtaskDecision | None = None
    """The owner coordinator's decision, for a conditional subtask."""
    coordinators: list[CoordinatorRunRecord] = Field(default_factory=list)
    selection: SelectionRecord | None = None
    """How the task's tools were chosen: candidates with their retrieval scores, the model's
    choice and confirmations (None when required tools ran instead)."""
    selection_reasons: dict[str, str] = Field(default_factory=dict)
    """``SelectionRecord.why`` for every candidate, rendered for readers of the JSON (the web
    page); kept in the trace only, never stored with the session."""
    tools: list[ToolRunRecord] = Field(default_factory=list)
    """Each tool activated, why (required, suitability, rag, deep_fallback) and its outcome."""
    failures: list[str] = Field(default_factory=list)
    """What failed on the task, then its notices' lines."""
    notices: list[Notice] = Field(default_factory=list)
    """What callers are told about how the task was answered, typed (:class:`Notice`)."""
    notes: list[str] = Field(default_factory=list)
    """What the trace tells in words: the conditional decision, the gatekeeper's verdicts and
    the deep search's rounds (rendered from the run state; read the records for data)."""
    sub_tasks: list[TaskTrace] = Field(default_factory=list)

    @classmethod
    def of(cls, task: TaskInfo) -> TaskTrace:
        """The trace of a task tree, rendered from its run state."""
        run = task.run
        return cls(
            task_no=task.task_no,
            task_prompt=task.task_prompt,
            user_message=run.user_message,
            status=run.status,
            prompt_type=task.prompt_type,
            conditional=task.conditional,
            owner_coordinator_name=task.owner_coordinator_name,
            required_tool_names=sorted(task.required_tool_names),
            applied_coordinator_names=sorted(task.applied_coordinator_names),
            decision=run.decision,
            coordinators=[record.model_copy() for record in run.coordinator_runs],
            selection=run.selection.model_copy(deep=True) if run.selection else None,
            selection_reasons=run.selection.reasons() if run.selection else {},
            tools=[tool_run.record.model_copy() for tool_run in run.tool_runs],
            failures=run.reported(),
            notices=list(run.notices),
            notes=notes_of(run),
            sub_tasks=[cls.of(sub_task) for sub_task in task.sub_tasks],
        )


def notes_of(run: TaskRun) -> list[str]:
    """The trace's lines about a task's conditional decision and its deep search, in the order
    they happened."""
    notes = [f"conditional: {run.decision_reason}"] if run.decision is not None else []
    progress = run.deep_search
    for index in range(max(len(progress.verdicts), len(progress.rounds))):
        if index < len(progress.verdicts):  # each verdict, then the round it led to
            verdict = progress.verdicts[index]
            notes.append(
                "gatekeeper: context sufficient"
                if verdict.sufficient
                else f"gatekeeper: context insufficient, missing {verdict.missing}"
            )
        if index < len(progress.rounds):
            deep_round = progress.rounds[index]
            searched = "; ".join(deep_round.missing)
            notes.append(f"deep search round {deep_round.round}: searching for {searched}")
    stopped = progress.stopped
    if stopped is not None:
        notes.append(
            f"deep search stopped: {stopped.rounds} of {stopped.max_rounds} rounds, "
            f"{stopped.calls_made} of {stopped.call_budget} model calls; still missing: "
            + "; ".join(stopped.missing)
        )
    if progress.exhausted:
        notes.append("deep fallback: nothing new to search")
    return notes


def answer_cut_off(with_context: bool) -> Notice:
    """The notice filed on task 1 when the answer reached its completion limit: it names the
    limit to raise (an answer with nothing retrieved has a shorter one)."""
    limit = "answer" if with_context else "answer_without_context"
    limit_key = f"the model profile's completion_limits.{limit}"
    message = f"the answer reached its length limit and was cut off ({limit_key})"
    return Notice(kind="answer_cut_off", task_no=ROOT_TASK_NO, message=message)


class Answer(BaseModel):
    """The reply to one message: an answer, or a clarifying question to reply to.

    Send the next message (a follow-up, or the reply to a clarification) with the same
    ``session_id`` to continue the conversation.
    """

    kind: Literal["answer", "clarification"]
    text: str
    session_id: str | None = None
    """The conversation's id: a message sent with it is the conversation's next turn."""
    turn: int = 1
    """Which turn of the conversation this answers (1: the first message)."""
    context: TurnContext | None = None
    """What the turn took from the turns before it (None on a conversation's first turn)."""
    domain: str
    guaranteed_contexts: list[str] = Field(default_factory=list)
    """Finished answers tools produced, verbatim (seed 6.6)."""
    failures: list[str] = Field(default_factory=list)
    """What failed while answering (``"task 1.2: tool pharma.lookup raised ..."``), then the
    notices' lines."""
    notices: list[Notice] = Field(default_factory=list)
    """What the caller should know about how the answer was made, as typed records (a part of
    the context cut for the model, a compression that failed, the answer cut off at its length
    limit, a clarifying question not asked), every task's in tree order; over HTTP and MCP
    too."""
    trace: TaskTrace
    routing: RoutingRecord | None = None
    """How the message was routed to ``domain`` when the caller named none (several domains
    installed): the domains' retrieval scores and whether retrieval or the model decided."""
    usage: Usage = Field(default_factory=Usage)
    model_calls: list[CallRecord] = Field(default_factory=list)
    """Every model call of this round in order: purpose, model, latency, prompt, completion and
    cached tokens, and the prefix shared with the previous call of the same purpose."""
