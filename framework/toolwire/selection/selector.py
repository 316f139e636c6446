"""Which of a domain's tools suit a task: retrieve, choose, confirm (SPEC §3 step 5).

Three modes (``orchestrator.selection.mode``), measured side by side in
``bench/eval_selection.py``:

* ``choose`` (default): the domain's tool index (BM25, built once) retrieves the ``top_k`` tools
  that best match the task prompt; one call, constrained to their names, names the ones that fit
  (none, one or several); the chosen tools are then confirmed with their own yes/no questions
  (``confirm``: in one call, one call each, one call each with every tool after the first
  confirmed one asked as a further request, in one call whose answer carries a single chosen
  tool's parameters, or not at all); a lone confirmed tool whose text lacks the request's first
  word is then put against that bare action (``action_check``). Its cost does not grow with
  the number of tools in the domain. Small models name the one best option well and refuse
  well, but rarely answer "none" to a choice; this mode asks each of them only what it is good
  at. With ``choice: function_call`` the choice is a native function call: the candidates
  offered as functions, the ones called are chosen.
* ``batched``: every tool's yes/no question in one structured call.
* ``per_tool``: one yes/no call per tool.

The selector sees only the task prompt, never its prompt context (SPEC §3 step 5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, partial
from typing import Any

import structlog
from pydantic import BaseModel

from toolwire.errors import PLUGIN_FAILURES, ModelError, describe
from toolwire.llm.attempts import call_model
from toolwire.llm.base import FunctionChoice, LanguageModel, Purpose
from toolwire.run_state import RetrievedTool, SelectionRecord
from toolwire.selection.actions import action_option, leading_action
from toolwire.selection.catalogue import SelectableTool, tool_index
from toolwire.selection.lexical import LexicalIndex
from toolwire.selection.requests import several_requests_pattern
from toolwire.settings import SelectionSettings
from toolwire.tools import ChatbotTool

log = structlog.get_logger(__name__)


SIBLINGS = 2
"""How many of the best match's closest siblings join the candidates (when they did not match)."""


@dataclass
class Selection:
    """A selection's record (the trace's) and what it found beyond it."""

    record: SelectionRecord
    parameters: dict[str, BaseModel] = field(default_factory=dict)
    """Parameters extracted in a tool's confirmation (``confirm: with_parameters``), by name:
    that tool needs no extraction of its own."""


@dataclass(frozen=True)
class ToolSelector:
    """One domain's selectable tools, their index and the configured mode; built once."""

    tools: tuple[SelectableTool, ...]
    index: LexicalIndex
    settings: SelectionSettings
    left_out: Mapping[str, str]
    """Tools whose ``executable_instruction()`` or ``description()`` raised at build: name →
    what it raised. Every selection reports them on the task."""
    _siblings: dict[str, tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """A tool's closest siblings, found on first use: the tools whose text best matches its
    own name, description and question."""

    @classmethod
    def build(
        cls,
        tools: Sequence[tuple[str, ChatbotTool[Any], Sequence[str]]],
        settings: SelectionSettings,
    ) -> ToolSelector:
        """From ``(prefixed name, tool, examples)`` in registry order."""
        entries: list[SelectableTool] = []
        left_out: dict[str, str] = {}
        for name, tool, examples in tools:
            try:
                entries.append(SelectableTool.of(name, tool, examples))
            except PLUGIN_FAILURES as error:  # a plugin's bug must not break the whole domain
                left_out[name] = describe(error)
                log.warning("tool_left_out_of_selection", tool=name, error=left_out[name])
        return cls(tuple(entries), tool_index(entries), settings, left_out)

    async def select(
        self,
        task_prompt: str,
        llm: LanguageModel,
        attempts: int,
        *,
        parameters_from_task: bool = True,
    ) -> Selection:
        """The selection for one task prompt: candidates, the model's answers, what runs.

        ``parameters_from_task``: the tools' parameters are extracted from the task prompt alone
        (no prompt context, no status block), so ``confirm: with_parameters`` may extract them
        in the confirmation; otherwise that setting asks each chosen tool's question alone.
        """
        mode = self.settings.mode
        selection = Selection(SelectionRecord(mode=mode, left_out=dict(self.left_out)))
        record = selection.record
        candidates = self._candidates(task_prompt, record)
        if not candidates:
            return selection
        try:
            if mode == "choose":
                await self._choose(
                    task_prompt, candidates, selection, llm, attempts, parameters_from_task
                )
                await self._check_actions(task_prompt, selection, llm, attempts)
            else:
                batched = mode == "batched"
                await self._ask(task_prompt, candidates, record, llm, attempts, batched=batched)
        except SelectionFailed as failure:
            record.failure = str(failure)
        log.info(
            "tools_selected",
            mode=mode,
            candidates=len(candidates),
            chosen=record.chosen,
            activated=record.activated,
        )
        return selection

    @cached_property
    def _by_name(self) -> dict[str, SelectableTool]:
        return {tool.qualified_name: tool for tool in self.tools}

    def siblings_of(self, tool: SelectableTool) -> tuple[str, ...]:
        """The qualified names of the tools most like ``tool`` (its closest siblings)."""
        name = tool.qualified_name
        if name not in self._siblings:
            text = f"{tool.short_name.replace('_', ' ')} {tool.description} {tool.question}"
            hits = self.index.search(text, limit=SIBLINGS + 1)
            self._siblings[name] = tuple(hit.key for hit in hits if hit.key != name)[:SIBLINGS]
        return self._siblings[name]

    def _candidates(self, task_prompt: str, record: SelectionRecord) -> list[SelectableTool]:
        """``choose``: the BM25 matches, best first, then the best match's closest siblings that
        did not match, ``top_k`` in all; every tool of a domain of no more than ``top_k``,
        its matches first (a small model leans to the first options). The other modes ask
        every tool, in registry order.

        A match is evidence for a tool, but none against its siblings: "50,000 yen in Swiss
        francs" matches an exchange-rate tool's example and no word of the currency-conversion
        tool. Siblings are what the model must tell apart, so they are put to it together."""
        top_k = self.settings.top_k
        hits = self.index.search(task_prompt, limit=top_k)
        scores = {hit.key: hit.score for hit in hits}
        matched = [self._by_name[hit.key] for hit in hits]
        if self.settings.mode != "choose":
            chosen = list(self.tools)
        elif len(self.tools) <= top_k:
            chosen = matched + [tool for tool in self.tools if tool.qualified_name not in scores]
        else:
            siblings = [name for tool in matched[:1] for name in self.siblings_of(tool)]
            names = [*scores, *(name for name in siblings if name not in scores)]
            chosen = [self._by_name[name] for name in names[:top_k]]
            record.retrieved = True
        record.candidates = [
            RetrievedTool(
                tool_name=tool.qualified_name, score=round(scores.get(tool.qualified_name, 0.0), 3)
            )
            for tool in chosen
        ]
        return chosen

    async def _ask(
        self,
        task_prompt: str,
        candidates: Sequence[SelectableTool],
        record: SelectionRecord,
        llm: LanguageModel,
        attempts: int,
        *,
        batched: bool,
        handled: SelectableTool | None = None,
    ) -> None:
        """Each candidate's yes/no question (``per_tool``, ``batched`` and confirmations);
        ``handled``: asked as a further request besides that confirmed tool's."""
        questions = [tool.suitability_question() for tool in candidates]
        names = {question.tool_name for question in questions}
        options: dict[str, Any] = {"batched": batched}
        if handled is not None:  # only then: a model written before ``handled`` still works
            options["handled"] = handled.suitability_question()
        try:
            answers = await call_model(
                Purpose.SUITABILITY.value,
                attempts,
                lambda: llm.suitability(task_prompt, questions, **options),
                is_valid=lambda result: names <= set(result),
            )
        except ModelError as error:
            raise SelectionFailed(
                f"suitability test failed, no tool activated by it: {error}"
            ) from error
        record.answers.update(
            {tool.qualified_name: bool(answers[tool.qualified_name]) for tool in candidates}
        )
        if handled is not None:
            record.besides.update({name: handled.qualified_name for name in names})
        record.activated = [name for name, yes in record.answers.items() if yes]

    async def _confirm_in_turn(
        self,
        task_prompt: str,
        chosen: Sequence[SelectableTool],
        record: SelectionRecord,
        llm: LanguageModel,
        attempts: int,
        several: bool,
    ) -> None:
        """``confirm: also``: the chosen tools' own questions in the order named, until one is
        confirmed; each later one that is alike the confirmed tool (either is among the other's
        closest siblings) is then asked whether the task also asks it, as a separate request, and
        any other its own question. Asked on its own, a sibling of the right tool is confirmed as
        readily as a second request; asked besides it, it is mostly refused. A tool unlike the
        confirmed one is no sibling to refuse, and the further-request question refused real
        second requests of that kind ("Trains from Munich to Prague …, and a hotel"); its own
        question accepts them (docs/models.md). ``several``: the task reads as several requests,
        so every later one is asked its own question (a sibling may be a request of its own)."""
        for index, tool in enumerate(chosen):
            await self._ask(task_prompt, [tool], record, llm, attempts, batched=False)
            if not record.answers[tool.qualified_name]:
                continue
            alike: list[SelectableTool] = []
            unlike: list[SelectableTool] = []
            for other in chosen[index + 1 :]:
                (alike if not several and self._alike(tool, other) else unlike).append(other)
            if alike:
                await self._ask(
                    task_prompt, alike, record, llm, attempts, batched=False, handled=tool
                )
            if unlike:
                await self._ask(task_prompt, unlike, record, llm, attempts, batched=False)
            return

    def _alike(self, one: SelectableTool, other: SelectableTool) -> bool:
        """Whether either tool is among the other's closest siblings."""
        return other.qualified_name in self.siblings_of(one) or (
            one.qualified_name in self.siblings_of(other)
        )

    async def _choose(
        self,
        task_prompt: str,
        candidates: Sequence[SelectableTool],
        selection: Selection,
        llm: LanguageModel,
        attempts: int,
        parameters_from_task: bool,
    ) -> None:
        """Name the fitting candidates in one call, then confirm them. A single candidate is the
        choice already: only its own question is asked (the same decision in one call less).
        So is a best match whose words are decisive (:meth:`_words_decide`); refused, the model
        chooses among all the candidates, and its answer stands."""
        record = selection.record
        confirm = self.settings.confirm
        model_chose = len(candidates) > 1 or confirm == "off"
        record.several_requests = confirm == "also" and self._reads_as_several(task_prompt)
        if model_chose and confirm != "off" and self._words_decide(task_prompt, record):
            lead = candidates[0]
            record.decided_by_words = lead.qualified_name
            await self._confirm(
                task_prompt, [lead], selection, llm, attempts, parameters_from_task, False
            )
            if record.activated:
                await self._second_request(task_prompt, candidates, record, llm, attempts)
                return
        calls: list[FunctionChoice] = []
        chosen = list(candidates)
        if model_chose:
            calls = await self._named(task_prompt, candidates, record, llm, attempts)
            chosen = _tools_called(calls, candidates)
        record.chosen = [tool.qualified_name for tool in chosen]
        # a tool its words pointed at was refused already: its answer stands
        unanswered = [tool for tool in chosen if tool.qualified_name not in record.answers]
        if not unanswered:
            return
        if confirm == "off":
            record.activated = list(record.chosen)
        else:
            await self._confirm(
                task_prompt, unanswered, selection, llm, attempts, parameters_from_task, model_chose
            )
        await self._second_request(task_prompt, candidates, record, llm, attempts)
        if self.settings.parameters_from_choice and parameters_from_task:
            self._take_arguments(calls, chosen, selection)

    def _words_decide(self, task_prompt: str, record: SelectionRecord) -> bool:
        """Whether the best-matching candidate's words are decisive: it scores ``decisive_ratio``
        times the runner-up, and shares ``decisive_words`` different words of the task, more
        than any other candidate shares. Its own question then comes before any choice
        (docs/models.md, "Decisive words")."""
        ratio = self.settings.decisive_ratio
        scores = [candidate.score for candidate in record.candidates]
        if ratio is None or not scores or scores[0] <= 0:
            return False
        if scores[0] < ratio * (scores[1] if len(scores) > 1 else 0.0):
            return False
        names = [candidate.tool_name for candidate in record.candidates]
        # every candidate: a word half a small domain shares scores next to nothing, but counts
        best, *others = self.index.shared_terms(task_prompt, *names)
        return best >= self.settings.decisive_words and all(best > other for other in others)

    async def _confirm(
        self,
        task_prompt: str,
        chosen: Sequence[SelectableTool],
        selection: Selection,
        llm: LanguageModel,
        attempts: int,
        parameters_from_task: bool,
        model_chose: bool,
    ) -> None:
        """The chosen tools' yes/no questions, as ``confirm`` says. When a confirmation fails, the
        tools the model chose run unconfirmed (a lone candidate, which no model chose, does not)."""
        record = selection.record
        confirm = self.settings.confirm
        try:
            carries = confirm == "with_parameters" and parameters_from_task and len(chosen) == 1
            if carries and chosen[0].tool.params_model.model_fields:
                await self._confirm_with_parameters(
                    task_prompt, chosen[0], selection, llm, attempts
                )
            elif confirm == "also":
                several = record.several_requests
                await self._confirm_in_turn(task_prompt, chosen, record, llm, attempts, several)
            else:  # one chosen tool: its own yes/no call; several: one call unless per_tool
                batched = confirm != "per_tool" and len(chosen) > 1
                await self._ask(task_prompt, chosen, record, llm, attempts, batched=batched)
        except SelectionFailed as failure:
            if not model_chose:
                raise
            # The model's choice stands: a failed confirmation must not lose the tools it named.
            names = [tool.qualified_name for tool in chosen]
            record.activated = [name for name in names if record.answers.get(name) is not False]
            raise SelectionFailed(
                f"confirmation failed, the chosen tools run unconfirmed: {failure.__cause__}"
            ) from failure

    async def _check_actions(
        self, task_prompt: str, selection: Selection, llm: LanguageModel, attempts: int
    ) -> None:
        """``action_check``: a single activated tool whose text lacks the task's leading action
        (:func:`~toolwire.selection.actions.leading_action`) put against that action alone in a
        choice of two; dropped unless the model names it. A task read as several requests, or
        with several tools activated, is not checked (its first word is one request's action);
        nor is a tool with ``confirm: off`` (the choice decides). A failed call keeps the tool."""
        record = selection.record
        checks = self.settings.action_check and self.settings.confirm != "off"
        action = leading_action(task_prompt) if checks else None
        if action is None or len(record.activated) != 1 or self._reads_as_several(task_prompt):
            return
        [name] = record.activated
        if self.index.shared_terms(action, name)[0]:
            return
        tool = self._by_name[name]
        options = [tool.option(), action_option(action, {tool.short_name})]
        try:
            named = await call_model(
                Purpose.CHOICE.value,
                attempts,
                partial(llm.choose, task_prompt, options, several=False),
            )
        except ModelError as error:
            raise SelectionFailed(
                f"action check failed, the activated tool runs unchecked: {error}"
            ) from error
        record.action = action
        offered = {option.name for option in options}
        record.ignored.extend(other for other in named if other not in offered)
        kept = tool.short_name in named
        record.action_checks[name] = kept
        if not kept:
            record.activated = []
            selection.parameters.pop(name, None)

    @cached_property
    def _several_requests(self) -> re.Pattern[str] | None:
        return several_requests_pattern(self.settings.several_requests)

    def _reads_as_several(self, task_prompt: str) -> bool:
        pattern = self._several_requests
        return pattern is not None and pattern.search(task_prompt) is not None

    async def _second_request(
        self,
        task_prompt: str,
        candidates: Sequence[SelectableTool],
        record: SelectionRecord,
        llm: LanguageModel,
        attempts: int,
    ) -> None:
        """A task read as several requests of which one tool was confirmed (otherwise nothing):
        a second choice among the candidates not asked yet, and the first one it names asked its
        own question (a single one left is asked without a choice). The model names one tool for
        such a task far more often than two; asked again without the tools it has answered for,
        it names the second request's. If a call fails, the confirmed tool runs alone and the
        failure is recorded."""
        if not record.several_requests or len(record.activated) != 1:
            return
        rest = [tool for tool in candidates if tool.qualified_name not in record.answers]
        if not rest:
            return
        try:
            if len(rest) == 1:
                named = rest
            else:
                calls = await self._named(task_prompt, rest, record, llm, attempts)
                named = _tools_called(calls, rest)
            record.second_choice = [tool.qualified_name for tool in named]
            if named:
                await self._ask(task_prompt, named[:1], record, llm, attempts, batched=False)
        except SelectionFailed as failure:
            raise SelectionFailed(
                f"second choice failed, the confirmed tool runs alone: {failure.__cause__}"
            ) from failure

    async def _confirm_with_parameters(
        self,
        task_prompt: str,
        tool: SelectableTool,
        selection: Selection,
        llm: LanguageModel,
        attempts: int,
    ) -> None:
        """The one chosen tool's question, in a call whose answer carries its parameters."""
        record = selection.record
        try:
            confirmed, parameters = await call_model(
                Purpose.PARAMETERS.value,
                attempts,
                lambda: llm.confirm_with_parameters(
                    task_prompt, tool.suitability_question(), tool.tool.params_model
                ),
            )
        except ModelError as error:
            raise SelectionFailed(str(error)) from error
        record.answers[tool.qualified_name] = confirmed
        record.activated = [tool.qualified_name] if confirmed else []
        if parameters is not None:
            selection.parameters[tool.qualified_name] = parameters

    async def _named(
        self,
        task_prompt: str,
        candidates: Sequence[SelectableTool],
        record: SelectionRecord,
        llm: LanguageModel,
        attempts: int,
    ) -> list[FunctionChoice]:
        """The candidates the model names, in its order, each once (with the arguments of its
        first call, for a choice by function call); names that are none are ignored."""
        options = [tool.option() for tool in candidates]

        # a language model written before ``choose_functions`` gets the constrained choice
        by_calling = self.settings.choice == "function_call" and _chooses_functions(llm)

        async def ask() -> list[FunctionChoice]:
            if by_calling:
                return await llm.choose_functions(task_prompt, options)
            return [FunctionChoice(name=name) for name in await llm.choose(task_prompt, options)]

        try:
            calls = await call_model(Purpose.CHOICE.value, attempts, ask)
        except ModelError as error:
            message = f"tool choice failed, no tool activated by it: {error}"
            raise SelectionFailed(message) from error
        names = {tool.short_name for tool in candidates}
        record.ignored.extend(call.name for call in calls if call.name not in names)
        first_calls: dict[str, FunctionChoice] = {}
        for call in calls:
            if call.name in names:
                first_calls.setdefault(call.name, call)
        return list(first_calls.values())

    @staticmethod
    def _take_arguments(
        calls: Sequence[FunctionChoice],
        chosen: Sequence[SelectableTool],
        selection: Selection,
    ) -> None:
        """``parameters_from_choice``: each activated tool whose call carried arguments valid
        for its parameter model keeps them (it needs no extraction). The others are extracted
        as usual: no arguments, a name its parameters do not have (the model made it up), or
        values the model rejects. The call saw the tool's description and parameter schema, not
        its ``parameter_instruction()``."""
        arguments = {call.name: call.arguments for call in calls}
        for tool in chosen:
            given = arguments.get(tool.short_name)
            name = tool.qualified_name
            if given is None or name not in selection.record.activated:
                continue
            if name in selection.parameters:  # carried by its confirmation already
                continue
            unknown = set(given) - tool.parameter_names
            if unknown or (tool.parameter_names and not given):
                log.info("choice_arguments_not_used", tool=name, unknown=sorted(unknown))
                continue
            try:
                selection.parameters[name] = tool.tool.params_model.model_validate(given)
            except PLUGIN_FAILURES as error:  # invalid, or a plugin's validator raised
                log.info("choice_arguments_not_used", tool=name, error=describe(error))


def _tools_called(
    calls: Sequence[FunctionChoice], options: Sequence[SelectableTool]
) -> list[SelectableTool]:
    """The options ``calls`` name (each a name :meth:`ToolSelector._named` kept), in order."""
    by_short_name = {tool.short_name: tool for tool in options}
    return [by_short_name[call.name] for call in calls]


def _chooses_functions(llm: LanguageModel) -> bool:
    """Whether ``llm`` has ``choose_functions`` (one written before it has not)."""
    if callable(getattr(llm, "choose_functions", None)):
        return True
    _warn_without_choose_functions(type(llm))
    return False


@cache
def _warn_without_choose_functions(kind: type) -> None:
    """Once per class of language model."""
    log.warning(
        "language_model_without_choose_functions", model=kind.__name__, instead="constrained"
    )


class SelectionFailed(Exception):
    """A selection step's model call failed (recorded as the selection's ``failure``)."""
