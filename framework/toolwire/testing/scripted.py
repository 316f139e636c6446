"""A language model driven by a script keyed on the *purpose* of each call.

A test says what the model answers for suitability, for one parameter model, for the gatekeeper
and for the answer; it never parses prompts. ``on_suitability`` scripts the model's judgement of
which tools suit a task, and every tool-selection call answers from it (yes/no questions, and
the choice among candidates) unless ``on_choose`` scripts the choice itself, so a test need not
know which selection steps the orchestrator runs. Every call is
recorded (purpose and inputs) for assertions and as a ``CallRecord`` so ``Answer.usage`` counts
it. A call the script does not cover raises :class:`UnscriptedCallError`, naming the purpose and
the inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from toolwire.context_buffer import PromptAndContext
from toolwire.events import (
    AnswerDelta,
    ModelCallFinished,
    ModelCallStarted,
    emit,
    observed,
    opened,
)
from toolwire.llm.base import (
    CallRecord,
    FunctionChoice,
    GatekeeperVerdict,
    Option,
    PageRelevance,
    PageToJudge,
    Purpose,
    SuitabilityQuestion,
    record_call,
)
from toolwire.llm.prompts import PAGE_ALONE_RELEVANCE, page_alone_text
from toolwire.llm.status_bar import current_status_bar

M = TypeVar("M", bound=BaseModel)

SuitabilityScript = Mapping[str, bool] | Iterable[str]
"""Tool name → yes/no, or the names that answer yes (a bare string is one name); short and
prefixed names both match."""
SuitabilityResponder = Callable[[str, list[str]], SuitabilityScript]
ChoiceScript = Iterable[str] | Mapping[str, dict[str, Any] | None]
"""The option names the model names (a bare string is one name; short and prefixed names both
match; may be empty), or name → the arguments of its call (read by a choice by function call)."""
ChoiceResponder = Callable[[str, list[str]], ChoiceScript]
RouteResponder = Callable[[str, list[str]], "str | None"]
ExtractResponder = Callable[[str, str], Any]
ContextResponder = Callable[[str, list[PromptAndContext]], Any]

SCRIPTED_MODEL_NAME = "scripted"
_WORDS = re.compile(r"\s*\S+|\s+")
"""A streamed answer's pieces: each word with the white space before it."""


class UnscriptedCallError(BaseException):
    """The code under test made a model call that the test did not script.

    Derives from ``BaseException`` (as pytest's own outcome exceptions do) so that handlers
    which record a failing tool and carry on cannot swallow it: the test fails loudly.
    """


@dataclass(frozen=True)
class ScriptedCall:
    """One call the scripted model received."""

    purpose: Purpose
    inputs: dict[str, Any]


@dataclass
class _Rule:
    response: Any
    remaining: int | None

    def take(self) -> Any:
        if self.remaining is not None:
            self.remaining -= 1
        return self.response

    @property
    def available(self) -> bool:
        return self.remaining is None or self.remaining > 0


@dataclass
class _Rules:
    rules: list[_Rule] = field(default_factory=list)

    def add(self, response: Any, times: int | None) -> None:
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1 (got {times})")
        self.rules.append(_Rule(response, times))

    def next(self) -> _Rule | None:
        return next((rule for rule in self.rules if rule.available), None)


NOTHING_RETRIEVED_ANSWER = "Nothing was found for this question."
""":func:`join_contexts`' answer when no context was retrieved (an empty answer is a model
failure, which the caller gets as a ``ModelError``)."""


def join_contexts(question: str, contexts: list[PromptAndContext]) -> str:
    """A ready-made answer script: the contexts' texts, one per line (``on_answer()``'s default),
    or :data:`NOTHING_RETRIEVED_ANSWER` when there are none."""
    return "\n".join(pac.context for pac in contexts if pac.context) or NOTHING_RETRIEVED_ANSWER


def _names_script(script: Any) -> Any:
    """A bare string as one name (iterating it would give its letters), any other iterable of
    names as a tuple (a generator would be used up by the first call); the rest unchanged."""
    if isinstance(script, str):
        return (script,)
    if isinstance(script, Iterable) and not isinstance(script, Mapping):
        return tuple(script)
    return script


def _resolve(response: Any, *args: Any) -> Any:
    if isinstance(response, BaseException):
        raise response
    if callable(response) and not isinstance(response, type):
        response = response(*args)
        if isinstance(response, BaseException):
            raise response
    return response


class ScriptedModel:
    """A :class:`~toolwire.llm.LanguageModel` answering from a script, for tests.

    Each ``on_*`` method adds a rule; rules of one kind are used in the order they were added,
    a rule with ``times=n`` only ``n`` times, a rule without ``times`` for ever. A response may be
    a value, a callable receiving the call's inputs, or an exception instance to raise (for
    example ``ModelError(...)`` to simulate a failing model).
    """

    def __init__(self) -> None:
        self.calls: list[ScriptedCall] = []
        self.closed = False
        self._suitability = _Rules()
        self._choice = _Rules()
        self._routing = _Rules()
        self._extract: dict[tuple[type[BaseModel], Purpose | None], _Rules] = {}
        self._classification = _Rules()
        self._gatekeeper = _Rules()
        self._answer = _Rules()

    # -- scripting -------------------------------------------------------------------------

    def on_suitability(
        self, response: SuitabilityScript | SuitabilityResponder, *, times: int | None = None
    ) -> ScriptedModel:
        """Suitability answers: a mapping, the names that say yes, or ``f(prompt, names)``.

        Tools the response does not mention answer no. A bare string is one name.
        """
        self._suitability.add(_names_script(response), times)
        return self

    def on_choose(
        self, response: ChoiceScript | ChoiceResponder, *, times: int | None = None
    ) -> ScriptedModel:
        """The tools named in a choice among candidates (a constrained choice, or the functions
        called, :meth:`choose_functions`): the names, a mapping of name to the call's arguments,
        or ``f(prompt, option_names)``. Without it, choices answer from :meth:`on_suitability`.

        A bare string is one name; names outside the options are returned as they are (the
        orchestrator must ignore them).
        """
        self._choice.add(_names_script(response), times)
        return self

    def on_route(
        self, response: str | RouteResponder | None, *, times: int | None = None
    ) -> ScriptedModel:
        """The domain a message is routed to (None: no domain fits), or
        ``f(message, domain_names)``."""
        self._routing.add(response, times)
        return self

    def on_extract(
        self,
        schema: type[BaseModel],
        response: Any,
        *,
        purpose: Purpose | None = None,
        times: int | None = None,
    ) -> ScriptedModel:
        """What ``extract(schema, ...)`` returns: an instance, a dict validated into ``schema``,
        None (invalid output), or ``f(text, instruction)`` returning one of those.

        With ``purpose`` the rule answers only calls of that purpose (and wins over a rule
        without one).
        """
        self._extract.setdefault((schema, purpose), _Rules()).add(response, times)
        return self

    def on_classify(
        self,
        prompt_type: str | Callable[[str, list[str]], str],
        important_words: Sequence[str] = (),
        *,
        times: int | None = None,
    ) -> ScriptedModel:
        """The prompt type (and important words) of the user's message; ``prompt_type`` may be
        ``f(text, allowed_types)``."""
        self._classification.add((prompt_type, list(important_words)), times)
        return self

    def on_gatekeeper(
        self, response: GatekeeperVerdict | bool | ContextResponder, *, times: int | None = None
    ) -> ScriptedModel:
        """The context gatekeeper's verdict: a verdict, a bool, or ``f(question, contexts)``."""
        self._gatekeeper.add(response, times)
        return self

    def on_answer(
        self, response: str | ContextResponder = join_contexts, *, times: int | None = None
    ) -> ScriptedModel:
        """The composed answer: a text or ``f(question, contexts)``; by default the contexts
        joined line by line."""
        self._answer.add(response, times)
        return self

    # -- assertions ------------------------------------------------------------------------

    def calls_for(self, *purposes: Purpose) -> list[ScriptedCall]:
        """The recorded calls of these purposes, in order."""
        return [call for call in self.calls if call.purpose in purposes]

    @property
    def purposes(self) -> list[Purpose]:
        """The purpose of every call, in order."""
        return [call.purpose for call in self.calls]

    # -- the LanguageModel protocol --------------------------------------------------------

    async def suitability(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        names = [question.tool_name for question in questions]
        rule = self._begin(
            Purpose.SUITABILITY,
            self._suitability,
            task_prompt=task_prompt,
            tool_names=names,
            questions=[question.question for question in questions],
        )
        chosen = self._suitable_names(rule, task_prompt, names)
        return {name: _named(name, chosen) for name in names}

    async def choose(
        self,
        task_prompt: str,
        options: Sequence[Option],
        *,
        purpose: Purpose = Purpose.CHOICE,
        several: bool = True,
    ) -> list[str]:
        names = [option.name for option in options]
        inputs: dict[str, Any] = {"task_prompt": task_prompt, "options": names, "several": several}
        if purpose is Purpose.ROUTING:
            rule = self._begin(purpose, self._routing, **inputs)
            domain = _resolve(rule.take(), task_prompt, names)
            return [] if domain is None else [str(domain)]
        return [call.name for call in self._chosen(purpose, task_prompt, names, inputs)]

    async def choose_functions(
        self, task_prompt: str, options: Sequence[Option]
    ) -> list[FunctionChoice]:
        """Answered by the choice rules (:meth:`on_choose`): the names, or a mapping of name to
        the arguments the call carries (``None``: none that could be read)."""
        names = [option.name for option in options]
        inputs: dict[str, Any] = {"task_prompt": task_prompt, "options": names, "calls": True}
        return self._chosen(Purpose.CHOICE, task_prompt, names, inputs)

    def _chosen(
        self, purpose: Purpose, task_prompt: str, names: list[str], inputs: dict[str, Any]
    ) -> list[FunctionChoice]:
        """A choice from the choice rules, else from the suitability rules."""
        if self._choice.next() is not None or self._suitability.next() is None:
            rule = self._begin(purpose, self._choice, **inputs)
            script = _names_script(_resolve(rule.take(), task_prompt, names))
            if isinstance(script, Mapping):
                return [
                    FunctionChoice(name=str(name), arguments=arguments)
                    for name, arguments in script.items()
                ]
            return [FunctionChoice(name=str(name)) for name in cast(Iterable[str], script)]
        rule = self._begin(purpose, self._suitability, **inputs)
        chosen = self._suitable_names(rule, task_prompt, names)
        return [FunctionChoice(name=name) for name in names if _named(name, chosen)]

    def _suitable_names(self, rule: _Rule, task_prompt: str, names: list[str]) -> set[str]:
        script = _names_script(_resolve(rule.take(), task_prompt, names))
        if isinstance(script, Mapping):
            return {str(name) for name, yes in script.items() if yes}
        return {str(name) for name in cast(Iterable[str], script)}

    async def extract(
        self,
        schema: type[M],
        text: str,
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> M | None:
        inputs: dict[str, Any] = {
            "schema": schema.__name__,
            "text": text,
            "instruction": instruction,
            "status": current_status_bar(),
        }
        if purpose is Purpose.CLASSIFICATION and self._classification.next() is not None:
            rule = self._begin(purpose, self._classification, **inputs)
            prompt_type, words = rule.take()
            allowed = _allowed_prompt_types(schema)
            chosen = _resolve(prompt_type, text, allowed)
            return schema.model_validate({"prompt_type": chosen, "important_words": words})
        rule = self._begin(purpose, self._extract_rules(schema, purpose), **inputs)
        return _validated(schema, _resolve(rule.take(), text, instruction))

    def _extract_rules(self, schema: type[BaseModel], purpose: Purpose) -> _Rules:
        """The rules for ``schema`` and ``purpose``, else those for ``schema`` alone."""
        rules = self._extract.get((schema, purpose))
        if rules is None or rules.next() is None:
            rules = self._extract.get((schema, None))
        return rules or _Rules()

    async def judge_pages(self, question: str, pages: Sequence[PageToJudge]) -> list[bool | None]:
        """Every page in one recorded relevance call, as the real model judges them; each page's
        verdict comes from the ``on_extract(PageRelevance, ...)`` rules in page order, and a
        responder gets the page, tagged, then ``"\n\nQuestion: "`` and the question."""
        if not pages:
            return []
        labels = [page.ref.label for page in pages]
        self._begin(Purpose.RELEVANCE, self._relevance_rules(), question=question, pages=labels)
        verdicts: list[bool | None] = []
        for page in pages:
            rule = self._relevance_rules().next()
            if rule is None:
                raise UnscriptedCallError(
                    f"ScriptedModel has no relevance verdict left for {page.ref.label}; script "
                    f"it with {_hint(Purpose.RELEVANCE)}"
                )
            text = page_alone_text(question, page)
            verdict = _validated(PageRelevance, _resolve(rule.take(), text, PAGE_ALONE_RELEVANCE))
            verdicts.append(None if verdict is None else verdict.relevant)
        return verdicts

    def _relevance_rules(self) -> _Rules:
        return self._extract_rules(PageRelevance, Purpose.RELEVANCE)

    async def judge_context(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> GatekeeperVerdict:
        rule = self._begin(
            Purpose.GATEKEEPER,
            self._gatekeeper,
            question=question,
            contexts=list(contexts),
            status=current_status_bar(),
        )
        verdict = _resolve(rule.take(), question, list(contexts))
        if isinstance(verdict, bool):
            return GatekeeperVerdict(sufficient=verdict)
        return cast(GatekeeperVerdict, verdict)

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        """The scripted answer; someone watching the question sees it word by word."""
        rule = self._begin(Purpose.ANSWER, self._answer, question=question, contexts=list(contexts))
        text = str(_resolve(rule.take(), question, list(contexts)))
        if observed():
            for piece in _WORDS.findall(text):
                emit(AnswerDelta(text=piece))
        return text

    async def aclose(self) -> None:
        self.closed = True

    # -- internals -------------------------------------------------------------------------

    def _begin(
        self, purpose: Purpose, rules: _Rules, **inputs: Any
    ) -> _Rule:
        self.calls.append(ScriptedCall(purpose, inputs))
        rule = rules.next()
        if rule is None:
            shown = ", ".join(f"{key}={value!r}" for key, value in inputs.items())
            _record(
                CallRecord(
                    purpose=purpose.value,
                    model="",  # no reply
                    requested_model=SCRIPTED_MODEL_NAME,
                    ok=False,
                    error="unscripted",
                )
            )
            raise UnscriptedCallError(
                f"ScriptedModel received an unscripted {purpose.value!r} call ({shown}); "
                f"script it with {_hint(purpose)}"
            )
        _record(
            CallRecord(
                purpose=purpose.value,
                model=SCRIPTED_MODEL_NAME,
                requested_model=SCRIPTED_MODEL_NAME,
            )
        )
        return rule


def _record(record: CallRecord) -> None:
    """Count the call in the question's usage and show it to whoever watches the question."""
    record_call(record)
    with opened(ModelCallStarted(purpose=record.purpose, model=record.requested_model)) as step:
        emit(ModelCallFinished(step=step, record=record.model_copy()))


def _validated(schema: type[M], value: Any) -> M | None:
    if value is None or isinstance(value, schema):
        return value
    return schema.model_validate(value)


def _named(name: str, chosen: set[str]) -> bool:
    """Whether a script's names include ``name``; short and prefixed names both match."""
    if name in chosen or name.rpartition(".")[2] in chosen:
        return True
    return "." not in name and any(other.rpartition(".")[2] == name for other in chosen)


def _hint(purpose: Purpose) -> str:
    return {
        Purpose.SUITABILITY: "model.on_suitability(...)",
        Purpose.CHOICE: "model.on_choose(...) or model.on_suitability(...)",
        Purpose.ROUTING: "model.on_route(...)",
        Purpose.CLASSIFICATION: "model.on_classify(...)",
        Purpose.GATEKEEPER: "model.on_gatekeeper(...)",
        Purpose.ANSWER: "model.on_answer(...)",
    }.get(purpose, "model.on_extract(Schema, ...) (or times=... ran out)")


def _allowed_prompt_types(schema: type[BaseModel]) -> list[str]:
    annotation = schema.model_fields["prompt_type"].annotation
    return [str(arg) for arg in getattr(annotation, "__args__", ())]
