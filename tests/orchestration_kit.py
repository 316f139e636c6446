"""Small configurable tools for the orchestrator's tests (not a test module)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

import toolwire
from toolwire import (
    AgentCoordinator,
    ChatbotTool,
    ClarifiableContextConsumerTool,
    Clarification,
    ContextBuffer,
    ContextConsumerTool,
    OrchestratorActivatedTool,
    SubtaskDecision,
    TaskInfo,
    ToolExecutionResult,
)
from toolwire.hookspecs import RegisterDomain, RegisterTool
from toolwire.orchestrator import Answer
from toolwire.registry import DomainSpec
from toolwire.run_state import SelectionRecord
from toolwire.testing.fake_openai import FakeReply, FakeRequest


class NoParams(BaseModel):
    pass


class Query(BaseModel):
    query: str


Reply = ToolExecutionResult | Callable[[str], ToolExecutionResult] | Exception


def _reply(reply: Reply, text: str) -> ToolExecutionResult:
    if isinstance(reply, Exception):
        raise reply
    if isinstance(reply, ToolExecutionResult):
        return reply
    return reply(text)


class EchoTool(OrchestratorActivatedTool[NoParams]):
    """Returns a fixed reply and records every execution text it was given."""

    def __init__(
        self,
        name: str,
        reply: Reply | str = "",
        *,
        priority: int = 100,
        about: str = "",
        question: str = "",
    ) -> None:
        """``about`` and ``question``: its description and yes/no question, for the tool index
        (by default the class docstring's and one naming the tool)."""
        self.name = name
        self.priority = priority
        self.reply = ToolExecutionResult.context(reply) if isinstance(reply, str) else reply
        self.texts: list[str] = []
        self.log: list[str] | None = None
        self.about = about
        self.question = question

    def description(self) -> str:
        return self.about or super().description()

    def executable_instruction(self) -> str:
        return self.question or f"{self.name}: does the question need {self.name}?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        self.texts.append(text)
        if self.log is not None:
            self.log.append(self.name)
        return _reply(self.reply, text)


class QueryTool(OrchestratorActivatedTool[Query]):
    """Needs parameters: returns ``"<name>:<query>"``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[Query, str]] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: is a lookup needed?"

    def execute_with_result(self, params: Query, text: str) -> ToolExecutionResult:
        self.calls.append((params, text))
        return ToolExecutionResult.context(f"{self.name}:{params.query}")


class AskingTool(OrchestratorActivatedTool[Query]):
    """Asks a clarifying question first; answers with the reply after the user gave it."""

    def __init__(self, name: str, question: str = "Which one?") -> None:
        self.name = name
        self.question = question
        self.runs: list[str] = []
        self.clarifications: list[tuple[Query, Clarification]] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: always false"

    def execute_with_result(self, params: Query, text: str) -> ToolExecutionResult:
        self.runs.append(text)
        return ToolExecutionResult.clarifying_question(self.question)

    def execute_with_clarification(
        self, params: Query, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        self.clarifications.append((params, clarification))
        return ToolExecutionResult.context(f"{self.name} resolved {params.query}")


class Consumer(ContextConsumerTool[NoParams]):
    """A context consumer: records the snapshots it got and answers with the keys it saw."""

    def __init__(self, name: str = "consumer", *, priority: int = 100) -> None:
        self.name = name
        self.priority = priority
        self.snapshots: list[ContextBuffer] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: always false"

    def execute_with_prior_context(
        self, params: NoParams, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        self.snapshots.append({key: list(values) for key, values in prior_context.items()})
        prior_context.clear()  # a snapshot: changing it must not change the orchestrator's state
        return ToolExecutionResult.context(f"{self.name} saw {len(self.snapshots[-1])} keys")


class ActivatedConsumer(Consumer, OrchestratorActivatedTool[NoParams]):
    pass


class ClarifiableConsumer(ClarifiableContextConsumerTool[Query], OrchestratorActivatedTool[Query]):
    """Asks first; continues with the reply and a fresh snapshot of the buffer."""

    def __init__(self, name: str = "clarifiable") -> None:
        self.name = name
        self.continued: list[tuple[Query, Clarification, list[str]]] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: always false"

    def execute_with_prior_context(
        self, params: Query, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        return ToolExecutionResult.clarifying_question("Which product exactly?")

    def execute_with_clarification_and_prior_context(
        self,
        params: Query,
        text: str,
        clarification: Clarification,
        prior_context: ContextBuffer,
    ) -> ToolExecutionResult:
        self.continued.append((params, clarification, sorted(prior_context)))
        return ToolExecutionResult.as_guaranteed_context(f"final for {params.query}")


Decompose = Callable[[TaskInfo], None]
Decide = Callable[[TaskInfo, TaskInfo, ContextBuffer], SubtaskDecision]


class Coordinator(OrchestratorActivatedTool[NoParams], AgentCoordinator):
    """A coordinator whose decomposition and decision are plain functions given by the test."""

    def __init__(
        self,
        name: str,
        decompose: Decompose | None = None,
        *,
        priority: int = 100,
        decide: Decide | None = None,
        reply: str = "",
    ) -> None:
        self.name = name
        self.priority = priority
        self._decompose = decompose or (lambda task: None)
        self._decide = decide
        self.reply = reply
        self.seen: list[dict[str, Any]] = []
        self.decisions: list[tuple[str, ContextBuffer]] = []

    def executable_instruction(self) -> str:
        return f"{self.name}: always false - runs only on coordinator-designated tasks"

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        self.seen.append(task.model_dump())
        self._decompose(task)
        return task

    def decide_conditional_subtask(
        self, parent: TaskInfo, next_subtask: TaskInfo, completed_so_far: ContextBuffer
    ) -> SubtaskDecision:
        self.decisions.append((next_subtask.task_no, completed_so_far))
        if self._decide is None:
            return SubtaskDecision.RUN
        return self._decide(parent, next_subtask, completed_so_far)

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(self.reply)


def subtask(task_no: str, prompt: str, *required: str, conditional: bool = False) -> TaskInfo:
    return TaskInfo(
        task_no=task_no,
        task_prompt=prompt,
        required_tool_names=set(required),
        conditional=conditional,
    )


def domain(**kwargs: Any) -> DomainSpec:
    return DomainSpec(name="demo", **kwargs)


def plugin_of(spec: DomainSpec, *tool_classes: type[ChatbotTool[Any]]) -> object:
    """A plugin object registering one domain and its tool classes, for tests through ``App``."""

    class DomainPlugin:
        @toolwire.hookimpl
        def register_domains(self, register: RegisterDomain) -> None:
            register(spec)

        @toolwire.hookimpl
        def register_tools(self, register: RegisterTool) -> None:
            for tool_class in tool_classes:
                register(tool_class, domain=spec.name)

    return DomainPlugin()


# -- reading a selection ------------------------------------------------------------------------


def selection_of(answer: Answer) -> SelectionRecord:
    """The root task's selection record (it must have one)."""
    assert answer.trace.selection is not None
    return answer.trace.selection


def dosage_server_reply(request: FakeRequest) -> FakeReply:
    """A fake OpenAI server's reply for a domain whose one tool takes a ``Query``: every option
    chosen, every tool's question answered yes, the follow-up rewrite "What is the dose of
    ibuprofen?", the query "ibuprofen", and the answer "Ibuprofen: 400 mg."."""
    fields = (request.output_schema or {}).get("properties", {})
    if "choice" in fields:
        return FakeReply(text=json.dumps({"choice": fields["choice"]["items"]["enum"]}))
    if "answer" in fields:
        return FakeReply(text='{"answer": "yes"}')
    if "task" in fields:
        return FakeReply(text='{"task": "What is the dose of ibuprofen?"}')
    if fields:
        return FakeReply(text='{"query": "ibuprofen"}')
    return FakeReply(text="Ibuprofen: 400 mg.")
