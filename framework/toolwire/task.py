"""The task tree and what tools produce on it (SPEC §2).

``TaskInfo`` *is* the conversation state: the orchestrator keeps results, status and a pending
clarification on the task itself, and the session store persists the root task between rounds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AGENT_COORDINATOR_MARKER = "\n\n[[toolwire:coordinator-task]]\n\n"
"""Separates a subtask's prompt context (its parent's text) from its own coordinator-set task."""

_MARKER_TOKEN = AGENT_COORDINATOR_MARKER.strip()


def escape_marker(text: str) -> str:
    """Text from outside (a user's message or reply) that cannot carry the coordinator marker:
    each ``[[toolwire:coordinator-task]]`` in it loses its outer brackets, until none is left."""
    while _MARKER_TOKEN in text:
        text = text.replace(_MARKER_TOKEN, _MARKER_TOKEN[1:-1])
    return text


class ExecutionText(str):
    """The text a tool is executed with (seed 6.5, 6.6), knowing who wrote which part.

    It is a ``str``, and reads as ``original + AGENT_COORDINATOR_MARKER + task`` (or ``task``
    alone). The orchestrator makes it from the task: ``original`` is the parent's text (the
    task's ``prompt_context``), None on a task nobody designated (the user's own message);
    ``task`` is the task prompt. :func:`is_coordinator_requested` and the ``extract_coordinator_*``
    helpers read these parts instead of searching the text, so text a user wrote never passes for
    a coordinator's task, whatever it contains. Make one in a tool's unit test to hand it the
    text the orchestrator would.
    """

    original: str | None
    task: str

    def __new__(cls, task: str, original: str | None = None) -> ExecutionText:
        text = super().__new__(
            cls, f"{original}{AGENT_COORDINATOR_MARKER}{task}" if original else task
        )
        text.task = task
        text.original = original or None
        return text


class SubtaskDecision(StrEnum):
    """A coordinator's decision on a conditional subtask (seed 6.4)."""

    RUN = "run"
    SKIP = "skip"


class TaskStatus(StrEnum):
    """Where a task stands; closed tasks are never run again on a resumed round."""

    PENDING = "pending"
    WAITING_FOR_USER = "waiting_for_user"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"

    @property
    def is_closed(self) -> bool:
        return self in {TaskStatus.DONE, TaskStatus.SKIPPED, TaskStatus.FAILED}


class PromptAndContext(BaseModel):
    """What one tool run produced: the text it was given and the context it returned."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    context: str
    tool_name: str
    task_no: str
    guaranteed: bool = False

    @property
    def completion_key(self) -> str:
        return completion_key(self.task_no, self.tool_name)


ContextBuffer = dict[str, list[PromptAndContext]]
"""Completion key ``"<task_no>:<tool name>"`` → what that tool produced on that task."""


def completion_key(task_no: str, tool_name: str) -> str:
    """The context buffer key of one tool's results on one task (seed 6.4)."""
    return f"{task_no}:{tool_name}"


class Clarification(BaseModel):
    """A clarifying question a tool asked, and the user's reply once it arrives."""

    tool_name: str
    question: str
    execution_text: str
    """The text the tool was executed with when it asked."""
    reply: str | None = None
    earlier: list[Clarification] = Field(default_factory=list)
    """The task's questions and replies before this one, oldest first (of any of its tools): a
    tool that asks again sees what the user already told it. The orchestrator fills it when it
    hands the clarification to the tool; the task keeps them in ``TaskInfo.clarifications``."""


class ToolRunRecord(BaseModel):
    """One tool activation on one task, as the trace shows it.

    Recorded as ``pending`` when the tool is activated and updated when it has run, so a resumed
    round knows which activated tools still have to run.
    """

    tool_name: str
    reason: Literal["required", "suitability", "rag", "deep_fallback"]
    outcome: Literal[
        "pending", "context", "guaranteed", "clarification", "terminal", "error", "skipped"
    ] = "context"
    detail: str = ""
    params: dict[str, Any] | None = None
    """The extracted parameters (JSON form), kept so a resumed round does not extract them again."""


class RetrievedTool(BaseModel):
    """A candidate tool of a selection, with its retrieval score (BM25; 0: no word in common)."""

    tool_name: str
    score: float


class SelectionRecord(BaseModel):
    """How the tools of a task were chosen (SPEC §3 step 5), as the trace shows it."""

    mode: Literal["choose", "batched", "per_tool"]
    candidates: list[RetrievedTool] = Field(default_factory=list)
    """The tools put to the model: the retrieved top k (best first), or every selectable tool
    of the domain when it has no more than k."""
    retrieved: bool = False
    """Whether retrieval narrowed the domain's tools to ``candidates``."""
    chosen: list[str] | None = None
    """``choose`` mode: the candidates the model named, in its order (None: no choice made)."""
    ignored: list[str] = Field(default_factory=list)
    """Names the model gave that are not candidates (left out)."""
    answers: dict[str, bool] = Field(default_factory=dict)
    """Yes/no answers to the tools' own questions: every candidate's in ``per_tool`` and
    ``batched`` mode, the chosen tools' confirmations in ``choose`` mode."""
    activated: list[str] = Field(default_factory=list)
    failure: str | None = None
    """A model call that failed, and what was done instead."""
    left_out: dict[str, str] = Field(default_factory=dict)
    """Tools left out of selection because their suitability question or description raised:
    name → what it raised."""

    def why(self, tool_name: str) -> str:
        """Why a candidate was or was not activated, in words."""
        if self.mode != "choose":
            answer = self.answers.get(tool_name)
            verdict = "no answer" if answer is None else ("yes" if answer else "no")
            return f"its question answered {verdict}"
        if self.chosen is None or tool_name not in self.chosen:
            return "not chosen among the candidates"
        if tool_name not in self.answers:
            return "chosen (not confirmed)"
        return (
            "chosen and confirmed" if self.answers[tool_name] else "chosen, refused on its question"
        )


class CoordinatorRunRecord(BaseModel):
    """One coordinator's chance to decompose a task, as the trace shows it."""

    coordinator_name: str
    outcome: Literal["decomposed", "unchanged", "error"]
    detail: str = ""


class TaskInfo(BaseModel):
    """A unit of work: the user's message is task ``"1"``; subtasks are ``"1.1"``, ``"1.1.n"``…

    Mutable and serialisable: coordinators change it in place, the orchestrator keeps its state on
    it, and the session store persists it between clarification rounds.
    """

    model_config = ConfigDict(validate_assignment=True)

    task_no: str = "1"
    task_prompt: str
    important_words: list[str] = Field(default_factory=list)
    prompt_type: str = ""
    sub_tasks: list[TaskInfo] = Field(default_factory=list)
    required_tool_names: set[str] = Field(default_factory=set)
    conditional: bool = False
    owner_coordinator_name: str | None = None
    applied_coordinator_names: set[str] = Field(default_factory=set)
    prompt_context: str | None = None
    user_message: str | None = None
    """Task "1" only: the user's message as sent. Coordinators may extend or rewrite
    ``task_prompt`` (into JSON, say); the answer is still composed for this question."""

    # State the orchestrator keeps on the task across rounds.
    status: TaskStatus = TaskStatus.PENDING
    results: list[PromptAndContext] = Field(default_factory=list)
    pending_clarification: Clarification | None = None
    clarifications: list[Clarification] = Field(default_factory=list)
    """Every clarifying question asked on this task and answered, oldest first: later rounds
    extract parameters from all of them and the tool gets them as ``Clarification.earlier``."""
    tool_runs: list[ToolRunRecord] = Field(default_factory=list)
    coordinator_runs: list[CoordinatorRunRecord] = Field(default_factory=list)
    selection: SelectionRecord | None = None
    """How the task's tools were chosen (None: required tools, or not selected yet)."""
    decision: SubtaskDecision | None = None
    """The owner coordinator's decision on this conditional subtask, once taken."""
    gatekeeper_missing: list[str] = Field(default_factory=list)
    """What the context gatekeeper found missing, set just before the deep fallback tool runs."""
    failures: list[str] = Field(default_factory=list)
    """What went wrong on this task (a tool or coordinator raised, a model call failed, the depth
    limit was reached); the answer reports them."""
    notes: list[str] = Field(default_factory=list)
    """Human-readable trace lines: coordinator failures, conditional decisions, depth limit."""

    def execution_text(self) -> ExecutionText:
        """The text a tool receives: prompt context + marker + task prompt (seed 6.5, 6.6)."""
        return ExecutionText(self.task_prompt, self.prompt_context)

    def question(self) -> str:
        """What the user asked: the original message on task "1", else the task prompt."""
        return self.user_message if self.user_message is not None else self.task_prompt

    def walk(self) -> list[TaskInfo]:
        """This task and all its descendants, depth-first in list order."""
        tasks = [self]
        for sub_task in self.sub_tasks:
            tasks.extend(sub_task.walk())
        return tasks


def is_coordinator_requested(text: str) -> bool:
    """Whether an execution text carries a coordinator-designated task (seed 6.6).

    For the orchestrator's :class:`ExecutionText`: whether a coordinator designated the task (it
    has a parent's text), never what the text contains. A plain string (one a plugin's test or
    code put together) is searched for the marker; user text cannot carry one, since the
    orchestrator escapes it (:func:`escape_marker`).
    """
    if isinstance(text, ExecutionText):
        return text.original is not None
    return AGENT_COORDINATOR_MARKER in text


def extract_coordinator_task(text: str) -> str:
    """The coordinator-designated task of an execution text; the text itself without a marker."""
    if isinstance(text, ExecutionText):
        return text.task
    return text.rpartition(AGENT_COORDINATOR_MARKER)[2]


def extract_coordinator_original(text: str) -> str:
    """The parent task's text (the user's original message) of an execution text.

    Without a marker the text is the user's own message and is returned unchanged. When a
    coordinator gave its parent task serialised JSON, this returns that JSON verbatim.
    """
    if isinstance(text, ExecutionText):
        return text if text.original is None else text.original
    original, marker, _ = text.rpartition(AGENT_COORDINATOR_MARKER)
    return original if marker else text
