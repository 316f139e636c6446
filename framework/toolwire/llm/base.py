"""The purpose-level model interface the orchestrator, coordinators and search tools call.

The orchestrator never builds prompts: it asks for a *purpose* (which tools suit this task, fill
this parameter model, is this context enough, compose the answer). The OpenAI-compatible gateway
turns each purpose into cache-friendly chat messages; ``toolwire.testing.ScriptedModel`` answers
each purpose from a script. Every call is recorded into the collector of the current question.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field

from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.domain_instructions import instructions_block

M = TypeVar("M", bound=BaseModel)


class Purpose(StrEnum):
    """Why a model call is made; the trace, logs and the scripted model key on it."""

    CLASSIFICATION = "classification"
    SUITABILITY = "suitability"
    CHOICE = "choice"
    """Name the tools that should handle a task, among a few candidates."""
    ROUTING = "routing"
    """Name the domain a message belongs to."""
    PARAMETERS = "parameters"
    DECOMPOSITION = "decomposition"
    GATEKEEPER = "gatekeeper"
    RELEVANCE = "relevance"
    ANSWER = "answer"
    COMPRESSION = "compression"


class SuitabilityQuestion(BaseModel):
    """One candidate tool's yes/no question, in registry order."""

    tool_name: str
    question: str
    source: str | None = None
    """Where the question comes from when that is outside the trusted configuration (the tool's
    ``external_source``, an MCP server): the prompt shows it as external content of that source."""


class Option(BaseModel):
    """One thing the model may name in a constrained choice: a candidate tool or a domain."""

    name: str
    """What the model answers with (the output is constrained to the options' names)."""
    question: str
    """When to choose it: a tool's yes/no suitability question, a domain's description."""
    description: str = ""
    """What it does, in a sentence (may be empty)."""
    parameters: dict[str, Any] | None = None
    """A tool's arguments as JSON schema, offered when the choice is a function call."""
    source: str | None = None
    """Where the description, question and parameter descriptions come from when that is outside
    the trusted configuration (the tool's ``external_source``, an MCP server): the prompt shows
    them as external content of that source. None: as written."""


class FunctionChoice(BaseModel):
    """An option the model called as a function, and the arguments it wrote."""

    name: str
    arguments: dict[str, Any] | None = None
    """None: the call had no arguments that could be read as a JSON object."""


class GatekeeperVerdict(BaseModel):
    """Whether retrieved context answers the question precisely, and what is missing if not."""

    sufficient: bool
    missing: list[str] = Field(default_factory=list)


class PageRelevance(BaseModel):
    """The model's verdict on one page."""

    relevant: bool = Field(description="true if the page helps answer the question")


class PageToJudge(BaseModel):
    """A retrieved page whose relevance the model judges."""

    ref: PageRef
    text: str
    """The page as a search tool hands it on (``Page.render()``: its reference header, title and
    text); pages a search keeps are joined with a blank line between them."""


@dataclass(frozen=True)
class RetrievalPlace:
    """Where a tool's retrieved context will stand in the prompts of the gatekeeper and the
    answer: after the task and the context retrieved before it, as its own tagged context.

    Relevance checks lay out their pages in that place, so that the gatekeeper and the answer
    find everything up to the pages kept in the server's cache.
    """

    question: str
    """The task the gatekeeper and the answer are asked about (``TaskInfo.question()``)."""
    earlier: tuple[PromptAndContext, ...]
    """The contexts retrieved before, in the order the answer reads them."""
    tool_name: str
    task_no: str
    judged_after: bool = False
    """A context gatekeeper judges this context once the tool has run (SPEC §3.8: it is the
    domain's RAG tool, and a deep fallback exists for the task), reading what a relevance check
    would read: a search then hands on its best passages and leaves the judgement to it."""


class CallRecord(BaseModel):
    """Figures of one model call, as the server reported them."""

    purpose: str
    model: str
    """The model that answered, as the reply names it ("" when no reply came)."""
    requested_model: str = ""
    """The model the request named (``llm.model``, or the server's first when none is set; ""
    when the call failed before the model was known)."""
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    shared_prefix_chars: int = 0
    """Length of the messages' byte-identical prefix shared with the model's previous call."""
    ok: bool = True
    error: str | None = None
    truncated: bool = False
    """The reply stopped at the call's completion limit (the model profile's
    ``completion_limits``)."""
    finish_reason: str | None = None
    """Why the model stopped, as the server said (``stop``, ``length``, ``tool_calls``, …; None
    when no reply came or the server did not say)."""


class Usage(BaseModel):
    """Model usage of one question (``Answer.usage``)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    @classmethod
    def of(cls, calls: Sequence[CallRecord]) -> Usage:
        return cls(
            llm_calls=len(calls),
            prompt_tokens=sum(call.prompt_tokens for call in calls),
            completion_tokens=sum(call.completion_tokens for call in calls),
            cached_prompt_tokens=sum(call.cached_prompt_tokens for call in calls),
        )


_current_calls: ContextVar[list[CallRecord] | None] = ContextVar("toolwire_llm_calls", default=None)
_domain_text: ContextVar[str] = ContextVar("toolwire_domain_prompt", default="")
_retrieval_place: ContextVar[RetrievalPlace | None] = ContextVar(
    "toolwire_retrieval_place", default=None
)
_parameters_source: ContextVar[str | None] = ContextVar("toolwire_parameters_source", default=None)


@contextmanager
def domain_prompt(text: str, instructions: str = "") -> Iterator[None]:
    """Inside the block, every model call's fixed prefix ends with the domain's fixed ``text``
    and then its ``instructions`` (:mod:`toolwire.domain_instructions`).

    The orchestrator opens it for each question of a domain, so the domain's description and
    instructions are part of the prefix that all calls of the question (coordinators' and tools'
    included) share, after toolwire's own rules.
    """
    fixed = " ".join(text.split())
    block = instructions_block(instructions)
    if block:
        fixed = f"{fixed}\n\n{block}" if fixed else block
    token = _domain_text.set(fixed)
    try:
        yield
    finally:
        _domain_text.reset(token)


def current_domain_prompt() -> str:
    """The domain text of the question being answered ("" outside one)."""
    return _domain_text.get()


@contextmanager
def retrieval_place(place: RetrievalPlace) -> Iterator[None]:
    """Inside the block, relevance checks lay out their pages where ``place`` says the tool's
    context will stand; the orchestrator opens it around each tool it runs."""
    token = _retrieval_place.set(place)
    try:
        yield
    finally:
        _retrieval_place.reset(token)


def current_retrieval_place() -> RetrievalPlace | None:
    """The place of the running tool's context (None outside the orchestrator)."""
    return _retrieval_place.get()


@contextmanager
def parameters_source(source: str | None) -> Iterator[None]:
    """Inside the block, a parameter extraction's schema comes from ``source`` (the tool's
    ``external_source``: an MCP server's input schema): its field descriptions are shown as
    external content of that source. The orchestrator opens it around a tool's extraction; None
    changes nothing."""
    token = _parameters_source.set(source)
    try:
        yield
    finally:
        _parameters_source.reset(token)


def current_parameters_source() -> str | None:
    """The source of the parameter schema being extracted (None outside
    :func:`parameters_source`, or for a tool of the trusted configuration)."""
    return _parameters_source.get()


@contextmanager
def collect_calls() -> Iterator[list[CallRecord]]:
    """Collect the records of every model call made inside the block (per task, not global)."""
    calls: list[CallRecord] = []
    token = _current_calls.set(calls)
    try:
        yield calls
    finally:
        _current_calls.reset(token)


def current_calls() -> list[CallRecord]:
    """A copy of the records collected so far by the open collector (empty when none is open).

    Long loops (the deep search) read it for their status block: calls made out of the budget.
    """
    calls = _current_calls.get()
    return list(calls) if calls is not None else []


def record_call(record: CallRecord) -> None:
    """Add a call's figures to the current question's collector, if one is open."""
    calls = _current_calls.get()
    if calls is not None:
        calls.append(record)


@runtime_checkable
class LanguageModel(Protocol):
    """What toolwire asks of a language model, one method per purpose family."""

    async def suitability(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        """Answer each tool's yes/no question for the task prompt, one call per question; keys
        are ``tool_name``s."""
        ...

    async def choose(
        self,
        task_prompt: str,
        options: Sequence[Option],
        *,
        purpose: Purpose = Purpose.CHOICE,
        several: bool = True,
    ) -> list[str]:
        """Name the options that fit the task (none, one, or with ``several`` more than one).

        One call whose output is constrained to the options' names.
        """
        ...

    async def choose_functions(
        self, task_prompt: str, options: Sequence[Option]
    ) -> list[FunctionChoice]:
        """The options the model calls when they are offered as functions (the provider's
        native tool calling, each with its ``parameters``), in the order called, with the
        arguments it wrote. One call (``Purpose.CHOICE``); the ``call`` and ``arguments``
        selection steps'.
        """
        ...

    async def extract(
        self,
        schema: type[M],
        text: str,
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> M | None:
        """Fill ``schema`` from ``text`` (structured output, validated, one corrective retry).

        Returns None when the model's output still fails validation; raises ``ModelError`` when
        the model cannot be reached. Coordinators use this as the original's
        ``DECOMPOSITION_SCHEMA.exractToolParam(...)``.
        """
        ...

    async def judge_pages(self, question: str, pages: Sequence[PageToJudge]) -> list[bool | None]:
        """Which retrieved pages help answer ``question``: a verdict per page, in order; None
        where the model's verdict failed validation. Raises ``ModelError`` when the model cannot
        be reached (an outage is not "nothing relevant").

        How the pages are put to the model is the implementation's choice (one call for all of
        them, where they will stand, in :class:`~toolwire.llm.ChatModel`).
        """
        ...

    async def judge_context(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> GatekeeperVerdict:
        """The context gatekeeper: does the retrieved context answer the question precisely?"""
        ...

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        """Compose the answer from the buffer's contexts (external content, tagged by source)."""
        ...

    async def aclose(self) -> None:
        """Release connections and any process the model owns."""
        ...


@runtime_checkable
class PrefixWarming(Protocol):
    """A model that can have its server read a prompt ahead of the call that will send it
    (:class:`~toolwire.llm.ChatModel`, as its profile's ``prefix_warming`` allows). Optional:
    the conversation service warms only a model that has it."""

    @property
    def warms_prefixes(self) -> bool:
        """Whether :meth:`prefill` sends anything (the profile's ``prefix_warming``)."""
        ...

    async def prefill(
        self,
        schema: type[BaseModel],
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> bool:
        """Send :meth:`LanguageModel.extract`'s prompt for ``schema`` up to its text, for the
        server's prompt cache alone (nothing is parsed); True when it was sent and answered.

        A call made meanwhile cancels it rather than wait for it."""
        ...
