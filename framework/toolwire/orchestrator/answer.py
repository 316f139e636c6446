"""What ``ask`` returns: the answer or a clarifying question, the task tree's trace, usage."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from toolwire.llm.base import CallRecord, Usage
from toolwire.selection.routing import RoutingRecord
from toolwire.task import (
    CoordinatorRunRecord,
    SelectionRecord,
    SubtaskDecision,
    TaskInfo,
    TaskStatus,
    ToolRunRecord,
)


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
    tools: list[ToolRunRecord] = Field(default_factory=list)
    """Each tool activated, why (required, suitability, rag, deep_fallback) and its outcome."""
    failures: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    sub_tasks: list[TaskTrace] = Field(default_factory=list)

    @classmethod
    def of(cls, task: TaskInfo) -> TaskTrace:
        return cls(
            task_no=task.task_no,
            task_prompt=task.task_prompt,
            user_message=task.user_message,
            status=task.status,
            prompt_type=task.prompt_type,
            conditional=task.conditional,
            owner_coordinator_name=task.owner_coordinator_name,
            required_tool_names=sorted(task.required_tool_names),
            applied_coordinator_names=sorted(task.applied_coordinator_names),
            decision=task.decision,
            coordinators=[run.model_copy() for run in task.coordinator_runs],
            selection=task.selection.model_copy(deep=True) if task.selection else None,
            tools=[run.model_copy() for run in task.tool_runs],
            failures=list(task.failures),
            notes=list(task.notes),
            sub_tasks=[cls.of(sub_task) for sub_task in task.sub_tasks],
        )


class Answer(BaseModel):
    """The reply to one message: an answer, or a clarifying question to reply to.

    For a clarification, send the user's reply with the same ``session_id``.
    """

    kind: Literal["answer", "clarification"]
    text: str
    session_id: str | None = None
    """Set while the conversation waits for a reply (``kind == "clarification"``)."""
    domain: str
    guaranteed_contexts: list[str] = Field(default_factory=list)
    """Finished answers tools produced, verbatim (seed 6.6)."""
    failures: list[str] = Field(default_factory=list)
    """What failed while answering (``"task 1.2: tool pharma.lookup raised ..."``)."""
    trace: TaskTrace
    routing: RoutingRecord | None = None
    """How the message was routed to ``domain`` when the caller named none (several domains
    installed): the domains' retrieval scores and whether retrieval or the model decided."""
    usage: Usage = Field(default_factory=Usage)
    model_calls: list[CallRecord] = Field(default_factory=list)
    """Every model call of this round in order: purpose, model, latency, prompt, completion and
    cached tokens, and the prefix shared with the previous call of the same purpose."""
