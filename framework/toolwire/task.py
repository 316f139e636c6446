"""The task tree a plugin author writes against (SPEC §2), and the text a tool is executed with.

A ``TaskInfo`` carries the SPEC's fields, which coordinators read and change, and the
orchestrator's run state (``run``: status, results, clarifications, the trace's records), which
no plugin writes. The session store persists the root task with its run state between rounds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwire.run_state import AgentStatus, TaskRun

MAX_TASK_DEPTH = 32
"""The deepest a task tree may nest (the user's message is depth 0). Subtasks a coordinator
nests deeper are refused: a tree hundreds of levels deep could be stored but not read back (the
conversation lost), or broke the orchestrator's recursive steps. ``orchestrator.max_depth``
(the levels processed) stays within it."""

ROOT_TASK_NO = "1"
"""The number of the task a user's message becomes; its subtasks are "1.1", "1.2", …"""

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
    status: AgentStatus | None
    """The deep search round the tool runs in (None outside a deep search): the model read it
    rendered at the end of the text the parameters were extracted from; a search tool reads the
    pages already consulted from it and keeps its words out of a query."""

    def __new__(
        cls, task: str, original: str | None = None, status: AgentStatus | None = None
    ) -> ExecutionText:
        text = super().__new__(
            cls, f"{original}{AGENT_COORDINATOR_MARKER}{task}" if original else task
        )
        text.task = task
        text.original = original or None
        text.status = status
        return text


SPEC_FIELDS = (
    "task_no",
    "task_prompt",
    "important_words",
    "prompt_type",
    "sub_tasks",
    "required_tool_names",
    "conditional",
    "owner_coordinator_name",
    "applied_coordinator_names",
    "prompt_context",
    "tool_params",
)
"""The fields of SPEC §2, the plugin author's contract (and ``tool_params``, which a coordinator
may fill besides them); ``run`` is the orchestrator's."""


class TaskInfo(BaseModel):
    """A unit of work: the user's message is task ``"1"``; subtasks are ``"1.1"``, ``"1.1.n"``…

    Mutable and serialisable: coordinators change its SPEC §2 fields in place (on a copy the
    orchestrator takes back), and the session store persists it between clarification rounds.
    """

    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    task_no: str = "1"
    task_prompt: str
    important_words: list[str] = Field(default_factory=list)
    prompt_type: str = ""
    sub_tasks: list[TaskInfo] = Field(default_factory=list)
    required_tool_names: set[str] = Field(default_factory=set)
    conditional: bool = False
    owner_coordinator_name: str | None = None
    """Set by the orchestrator on the subtasks a coordinator created, never by the coordinator."""
    applied_coordinator_names: set[str] = Field(default_factory=set)
    prompt_context: str | None = None
    """Set by the orchestrator: the parent's execution text."""
    tool_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Parameters a coordinator already knows for a tool that runs on this task: the tool's
    short or prefixed name → its parameter model as JSON data. That tool's parameters are then
    not extracted by the model (a coordinator that named the products needs no call per lookup
    to name them again); data that fails the tool's model is extracted as usual."""
    run: TaskRun = Field(default_factory=TaskRun)
    """The orchestrator's state of this task across rounds (``toolwire.run_state``): read it,
    never write it. A coordinator's copy has a fresh one (the deep fallback's holds its
    progress), and nothing it puts there is taken back."""

    def execution_text(self) -> ExecutionText:
        """The text a tool receives: prompt context + marker + task prompt (seed 6.5, 6.6)."""
        return ExecutionText(self.task_prompt, self.prompt_context, self.run.agent_status())

    def question(self) -> str:
        """What the user asked: the original message on task "1", else the task prompt."""
        message = self.run.user_message
        return message if message is not None else self.task_prompt

    def walk(self) -> list[TaskInfo]:
        """This task and all its descendants, depth-first in list order."""
        tasks = [self]
        for sub_task in self.sub_tasks:
            tasks.extend(sub_task.walk())
        return tasks

    def levels_below(self) -> int:
        """How many levels of subtasks nest below this task (0: none). Counted without
        recursion, so a tree of any depth a coordinator made can be measured."""
        deepest = 0
        level: list[TaskInfo] = self.sub_tasks
        while level:
            deepest += 1
            level = [child for sub_task in level for child in sub_task.sub_tasks]
        return deepest


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
