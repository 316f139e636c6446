"""What the orchestrator keeps on a task across rounds: its run state (``TaskInfo.run``).

The orchestrator owns all of it: where the task stands, what its tools produced, the clarifying
questions asked on it, the runs of its tools (their control state apart from their trace record),
the coordinators' chances, how its tools were chosen, its deep search. Plugins never write it:
coordinators work on copies without it (the deep fallback gets its own progress), tools get
their text, parameters and a buffer snapshot. The answer's trace is rendered from it
(``toolwire.orchestrator.answer.TaskTrace``) and the session store persists it with the task.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.selection.trace import SelectionRecord


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


class Clarification(BaseModel):
    """A clarifying question a tool asked, and the user's reply once it arrives."""

    tool_name: str
    question: str
    execution_text: str
    """The text the tool was executed with when it asked."""
    reply: str | None = None
    earlier: list[Clarification] = Field(default_factory=list)
    """The task's questions and replies before this one, oldest first (of any of its tools): a
    tool that asks again sees what the user already told it. Filled when the clarification is
    handed to the tool; the task keeps every round in ``TaskRun.clarifications``."""


# -- the deep search -----------------------------------------------------------------------


class DeepSearchItem(BaseModel):
    """One missing item a deep search round searches for: the cheap neighbour search first (if
    the domain has one), then the full search, conditional on the cheap one finding nothing."""

    item: str
    number: int
    """The subtasks are numbered ``"<task_no>.<number>.n"`` and ``".s"``."""
    neighbor_task_no: str | None
    search_task_no: str


class AgentStatus(BaseModel):
    """Where a long loop stands (SPEC §5's agent status), as data: one deep search round.

    The model reads it as the status block at the end of the text parameters are extracted from
    (``toolwire.llm.prompts.agent_status_block``); tools read it as ``ExecutionText.status``.
    """

    round: int
    max_rounds: int
    calls_made: int
    """Model calls the question had made when the round started."""
    call_budget: int
    missing: list[str]
    """What this round searches for."""
    consulted: list[PageRef] = Field(default_factory=list)
    """Pages the task's results came from before the round (the neighbour search's seeds)."""
    searches: list[DeepSearchItem] = Field(default_factory=list)
    """Every item the deep search has searched for so far, this round's last."""


class GatekeeperRecord(BaseModel):
    """One verdict of the context gatekeeper on a task's buffer (SPEC §3 step 8)."""

    sufficient: bool
    missing: list[str] = Field(default_factory=list)


class DeepSearchStop(BaseModel):
    """Why the deep fallback started no further round: its round or model-call budget."""

    rounds: int
    max_rounds: int
    calls_made: int
    call_budget: int
    missing: list[str]
    """What was still missing."""


class DeepSearchProgress(BaseModel):
    """A task's deep search (SPEC §3 step 8), as typed fields.

    The orchestrator writes the gatekeeper's verdicts, what the latest one found ``missing`` and
    the pages ``consulted`` so far, then hands the task to the deep fallback coordinator, which
    adds its round (or why it stopped); the orchestrator takes only this part back from it.
    """

    verdicts: list[GatekeeperRecord] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    consulted: list[PageRef] = Field(default_factory=list)
    rounds: list[AgentStatus] = Field(default_factory=list)
    stopped: DeepSearchStop | None = None
    exhausted: bool = False
    """A later round of the fallback found nothing new to search."""


# -- tool runs ------------------------------------------------------------------------------

ActivationReason = Literal["required", "suitability", "rag", "deep_fallback"]
ToolOutcome = Literal[
    "pending", "context", "guaranteed", "clarification", "terminal", "error", "skipped"
]


class ToolRunRecord(BaseModel):
    """One tool activation on one task, as the trace shows it."""

    tool_name: str
    reason: ActivationReason
    outcome: ToolOutcome = "pending"
    detail: str = ""
    params: dict[str, Any] | None = None
    """The parameters it ran with, in their JSON form (its latest run's, after a clarifying
    question); None when it never got to run (its parameters could not be found)."""


class ToolRunState(StrEnum):
    """Where an activated tool stands, for the orchestrator."""

    PENDING = "pending"
    """Activated; runs in this round or, after a clarification, in a later one."""
    WAITING = "waiting"
    """It asked the user a question: it runs again with the reply."""
    CLOSED = "closed"
    """It ran, failed or was skipped: never again."""


class ToolRun(BaseModel):
    """One activated tool on one task: its control state, and the record the trace shows."""

    record: ToolRunRecord
    state: ToolRunState = ToolRunState.PENDING
    params: dict[str, Any] | None = None
    """The extracted parameters (JSON form), kept so a resumed round does not extract them
    again."""

    @classmethod
    def activated(cls, tool_name: str, reason: ActivationReason) -> ToolRun:
        return cls(record=ToolRunRecord(tool_name=tool_name, reason=reason))

    @property
    def tool_name(self) -> str:
        return self.record.tool_name

    @property
    def reason(self) -> ActivationReason:
        return self.record.reason

    def ran_with(self, params: BaseModel) -> None:
        """It runs with ``params``: the trace shows them."""
        self.record = self.record.model_copy(update={"params": params.model_dump(mode="json")})

    def close(self, outcome: ToolOutcome, detail: str) -> None:
        """It ran (``context``, ``guaranteed``, ``terminal``), failed (``error``) or was
        ``skipped``."""
        self.state = ToolRunState.CLOSED
        self.record = self.record.model_copy(update={"outcome": outcome, "detail": detail})

    def wait(self, detail: str) -> None:
        """It asked the user a question."""
        self.state = ToolRunState.WAITING
        self.record = self.record.model_copy(update={"outcome": "clarification", "detail": detail})


# -- coordinators and selection ------------------------------------------------------------


class CoordinatorRunRecord(BaseModel):
    """One coordinator's chance to decompose a task, as the trace shows it."""

    coordinator_name: str
    outcome: Literal["decomposed", "unchanged", "error"]
    detail: str = ""


# -- notices ------------------------------------------------------------------------------

NoticeKind = Literal["context_cut", "compression_failed", "answer_cut_off", "clarification_limit"]


class Notice(BaseModel):
    """Something every caller should know about how an answer was made, as a typed record.

    ``context_cut``: a retrieved part was cut for the model's prompts (``llm.max_part_tokens``);
    ``compression_failed``: parts went to the model uncompressed; ``answer_cut_off``: the answer
    reached its length limit; ``clarification_limit``: a tool's clarifying question was not
    asked, the message having asked ``orchestrator.max_clarification_rounds`` questions
    (the answer is made from what the tools found). ``message`` is toolwire's own words (tool
    names, counts, the setting to change, and a question a tool wrote for the user), so HTTP
    and MCP callers see it as it is; ``detail``, when there is one, may hold what a server or a
    document said (why a model call failed, the page that was cut) and is withheld from them
    like a failed tool's error (``detail`` then reads ``error id …``,
    :mod:`toolwire.disclosure`).
    """

    model_config = ConfigDict(frozen=True)

    kind: NoticeKind
    task_no: str
    """The task it happened on."""
    message: str
    detail: str | None = None

    def describe(self) -> str:
        """Its line among the task's ``failures``."""
        return self.message if self.detail is None else f"{self.message} ({self.detail})"


# -- the run state --------------------------------------------------------------------------


class TaskRun(BaseModel):
    """Everything the orchestrator keeps on one task across rounds (see the module doc)."""

    model_config = ConfigDict(validate_assignment=True)

    status: TaskStatus = TaskStatus.PENDING
    user_message: str | None = None
    """Task "1" only: the user's message as sent. Coordinators may extend or rewrite
    ``task_prompt`` (into JSON, say); the answer is still composed for this question."""
    results: list[PromptAndContext] = Field(default_factory=list)
    clarifications: list[Clarification] = Field(default_factory=list)
    """Every clarifying question asked on the task, oldest first, with the user's reply once it
    arrived: later rounds extract parameters from all of them, and a tool that asks again gets
    the earlier ones (``Clarification.earlier``)."""
    tool_runs: list[ToolRun] = Field(default_factory=list)
    coordinator_runs: list[CoordinatorRunRecord] = Field(default_factory=list)
    selection: SelectionRecord | None = None
    """How the task's tools were chosen (None: required tools, or not selected yet)."""
    decision: SubtaskDecision | None = None
    """The owner coordinator's decision on this conditional subtask, once taken ..."""
    decision_reason: str = ""
    """... and why (the owner decided, its decision failed, it has no owner); what a failed
    decision raised is in ``failures``."""
    deep_search: DeepSearchProgress = Field(default_factory=DeepSearchProgress)
    search_round: AgentStatus | None = None
    """On a deep search's search: the round it belongs to."""
    failures: list[str] = Field(default_factory=list)
    """What went wrong on this task (a tool, a coordinator or a conditional decision raised, a
    model call failed, the depth limit was reached); the answer reports them."""
    notices: list[Notice] = Field(default_factory=list)
    """What callers are told about how the task was answered (each once); the answer lists
    them after ``failures`` (:meth:`reported`)."""

    def reported(self) -> list[str]:
        """What the answer lists for the task: its failures, then its notices' lines."""
        return [*self.failures, *(notice.describe() for notice in self.notices)]

    def notify(self, notice: Notice) -> None:
        """File a notice on the task, once (a part cut for the gatekeeper and again for the
        answer is one notice)."""
        if notice not in self.notices:
            self.notices.append(notice)

    @property
    def pending_clarification(self) -> Clarification | None:
        """The question the task waits for the user to answer (its reply, once given, is set on
        it and the next round resumes the task)."""
        if self.status is TaskStatus.WAITING_FOR_USER and self.clarifications:
            return self.clarifications[-1]
        return None

    def agent_status(self) -> AgentStatus | None:
        """The deep search round this task's tools run in: a search's own round, or the latest
        round of the deep search on this task (None: no deep search)."""
        if self.search_round is not None:
            return self.search_round
        return self.deep_search.rounds[-1] if self.deep_search.rounds else None
