"""What a selection leaves in the trace: its candidates and one generic record per step.

A step says what it decided about each tool it looked at in a few words (its *verdicts*); the
trace, ``--trace``, the ``tools_chosen`` event and the web page render :meth:`SelectionRecord.why`
from them, so a new step needs no field of its own here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field


class RetrievedTool(BaseModel):
    """A candidate tool of a selection, with its retrieval score (BM25; 0: no word in common)."""

    tool_name: str
    score: float


class StepRecord(BaseModel):
    """What one selection step did."""

    step: str
    """The step's registered name (``orchestrator.selection.steps``)."""
    verdicts: dict[str, str] = Field(default_factory=dict)
    """Tool → what the step decided about it ("named by the choice", "refused on its question")."""
    note: str | None = None
    """What the step found about the task as a whole (a candidate count, a reading of the task)."""
    failure: str | None = None
    """A model call of the step that failed, and what was done instead."""


class SelectionRecord(BaseModel):
    """How the tools of a task were chosen (SPEC §3 step 5), as the trace shows it."""

    candidates: list[RetrievedTool] = Field(default_factory=list)
    """The tools put to the model: the retrieved top k (best first), or every selectable tool
    of the domain when it has no more than k."""
    retrieved: bool = False
    """Whether retrieval narrowed the domain's tools to ``candidates``."""
    steps: list[StepRecord] = Field(default_factory=list)
    """The steps that ran, in order, each with what it decided."""
    answers: dict[str, bool] = Field(default_factory=dict)
    """Yes/no answers to the tools' own questions, by tool."""
    ignored: list[str] = Field(default_factory=list)
    """Names the model gave that were not among the tools put to it (left out)."""
    activated: list[str] = Field(default_factory=list)
    left_out: dict[str, str] = Field(default_factory=dict)
    """Tools left out of selection because their suitability question or description raised:
    name → what it raised."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failure(self) -> str | None:
        """The steps' failures, joined (None: every call answered)."""
        failures = [f"{step.step}: {step.failure}" for step in self.steps if step.failure]
        return "; ".join(failures) or None

    def step(self, name: str) -> StepRecord | None:
        """The record of the step named ``name`` (None: it did not run)."""
        return next((step for step in self.steps if step.step == name), None)

    def why(self, tool_name: str) -> str:
        """Why a candidate was or was not activated, in words: the steps' verdicts in order."""
        verdicts = [step.verdicts[tool_name] for step in self.steps if tool_name in step.verdicts]
        return "; ".join(verdicts) or "not chosen among the candidates"

    def reasons(self) -> dict[str, str]:
        """:meth:`why` for every candidate (the trace carries it for the web page)."""
        return {candidate.tool_name: self.why(candidate.tool_name) for candidate in self.candidates}

    def describe(self) -> str:
        """The steps that ran and their notes, in one line ("retrieve → choose → confirm")."""
        parts = [step.step + (f" ({step.note})" if step.note else "") for step in self.steps]
        return " → ".join(parts)
