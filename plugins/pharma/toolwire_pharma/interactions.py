"""``InteractionAnalysisTool``: the seed 6.8 story, "can I take A with B?".

1. As an ``AgentCoordinator`` it asks the model (``llm.extract`` with ``InteractionDecomposition``,
   the original's ``DECOMPOSITION_SCHEMA.exractToolParam``) whether the message asks about taking
   medicines together. If so, the task's text becomes an ``InteractionQuestion`` as JSON and one
   subtask per product (``"<n>.1"``, ``"<n>.2"``…) requires ``substance_lookup``, which returns
   the product's substances as context, or asks which product an ambiguous name means. The
   subtasks and the parent carry their tools' parameters (``TaskInfo.tool_params``): the
   decomposition named the products, so no model call names them again.
2. Back on the parent task it runs as a context consumer over the subtasks' findings, calls the
   injected ``SubstanceLookupTool`` directly for any product no subtask resolved (seed 6.8), and
   answers with a guaranteed context built on the lookup's data set: the substances two products
   share (a double dose), each interaction and its severity, the source and the disclaimer. When
   a product it had to look up itself is ambiguous it asks, and its clarification round continues
   with the same prior context; each reply applies to the product its question named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations

from pydantic import BaseModel, Field

from toolwire import (
    AgentCoordinator,
    ClarifiableContextConsumerTool,
    Clarification,
    ContextBuffer,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolExecutionResult,
    extract_coordinator_task,
)
from toolwire.llm import LanguageModel
from toolwire_pharma.lookup import RETRY_PREFIX, SubstanceLookupTool
from toolwire_pharma.messages import InteractionQuestion, SubstanceFinding

DECOMPOSITION_INSTRUCTION = (
    "Decide whether the message asks if two or more medicines can be taken together (or how they "
    "interact), and list every medicine product or active substance it names, exactly as written."
)

_SEPARATORS = re.compile(r",|\band\b|\bwith\b|\+|&", re.IGNORECASE)


class InteractionDecomposition(BaseModel):
    """The coordinator's decision on one message."""

    asks_about_combination: bool = Field(
        description="True when the message asks whether medicines can be taken together, "
        "or about an interaction between them"
    )
    products: list[str] = Field(
        default_factory=list,
        description="Every medicine product or active substance named in the message",
    )


class InteractionRequest(BaseModel):
    products: list[str] = Field(
        default_factory=list,
        description="Every medicine product or active substance the question names",
    )


@dataclass(frozen=True)
class _Analysis:
    """What one run resolved: findings in question order, or the question to ask first."""

    findings: list[SubstanceFinding]
    question: str | None = None


class InteractionAnalysisTool(
    OrchestratorActivatedTool[InteractionRequest],
    ClarifiableContextConsumerTool[InteractionRequest],
    AgentCoordinator,
):
    """Decomposes "can I take A with B?" into lookups, then answers from their findings."""

    def __init__(self, substance_lookup: SubstanceLookupTool, llm: LanguageModel) -> None:
        self._lookup = substance_lookup
        self._llm = llm

    def executable_instruction(self) -> str:
        return (
            "Does the question ask whether two or more medicines or active substances can be "
            "taken together, or about an interaction between them?"
        )

    # -- coordinator (seed 6.1, 6.4, 6.6) ---------------------------------------------------

    async def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        decision = await self._llm.extract(
            InteractionDecomposition, task.task_prompt, instruction=DECOMPOSITION_INSTRUCTION
        )
        if decision is None or not decision.asks_about_combination:
            return task
        products = named_in(task.task_prompt, decision.products)
        if len(products) < 2:
            return task
        task.task_prompt = InteractionQuestion(
            question=task.task_prompt, products=products
        ).model_dump_json()
        lookups = [
            TaskInfo(
                task_no=f"{task.task_no}.{number}",
                task_prompt=f'Which active substances does the medicine "{product}" contain?',
                important_words=[product],
                prompt_type=task.prompt_type,
                required_tool_names={self._lookup.qualified_name},
                tool_params={self._lookup.qualified_name: {"label": product}},
            )
            for number, product in enumerate(products, start=1)
        ]
        task.sub_tasks = [*task.sub_tasks, *lookups]
        # Once the lookups are closed, this analysis is what must run on the parent (seed 6.7:
        # commonly the coordinator itself). Requiring it (seed 6.4) makes that certain; the
        # suitability test would see only the JSON task prompt above.
        task.required_tool_names = {*task.required_tool_names, self.qualified_name}
        # the products are named already: neither the lookups nor this analysis extract them
        task.tool_params = {**task.tool_params, self.qualified_name: {"products": products}}
        return task

    # -- context consumer on the parent task (seed 6.7, 6.8) --------------------------------

    def execute_with_prior_context(
        self, params: InteractionRequest, text: str, prior_context: ContextBuffer
    ) -> ToolExecutionResult:
        return self._answer(params, text, prior_context, clarification=None)

    def execute_with_clarification_and_prior_context(
        self,
        params: InteractionRequest,
        text: str,
        clarification: Clarification,
        prior_context: ContextBuffer,
    ) -> ToolExecutionResult:
        return self._answer(params, text, prior_context, clarification)

    def _answer(
        self,
        params: InteractionRequest,
        text: str,
        prior_context: ContextBuffer,
        clarification: Clarification | None,
    ) -> ToolExecutionResult:
        reply = None if clarification is None else clarification.reply or ""
        labels = self._labels(params, text, reply)
        if len(labels) < 2:
            if reply is None:
                named = f" I found only {labels[0]!r}." if labels else ""
                return ToolExecutionResult.clarifying_question(
                    f"Which medicines do you want to check together?{named}"
                )
            return ToolExecutionResult.as_guaranteed_context(
                "I need the names of at least two medicines to check an interaction. "
                + self._lookup.data.attribution()
            )
        replies = {} if clarification is None else replies_by_label(clarification)
        analysis = self._resolve(labels, self._findings(prior_context), replies)
        if analysis.question is not None:
            return ToolExecutionResult.clarifying_question(analysis.question)
        return ToolExecutionResult.as_guaranteed_context(self.report(analysis.findings))

    def _labels(self, params: InteractionRequest, text: str, reply: str | None) -> list[str]:
        """The coordinator's products when the text is its JSON; else the extracted ones that
        the text (or the user's reply) really names, plus medicine names the reply adds."""
        question = InteractionQuestion.parse(extract_coordinator_task(text))
        if question is not None:
            return question.products
        labels = named_in(f"{text}\n{reply or ''}", params.products)
        if reply and len(labels) < 2:
            extra = [part.strip() for part in _SEPARATORS.split(reply) if part.strip()]
            labels = _unique([*labels, *(p for p in extra if self._lookup.resolve_products(p))])
        return labels

    def _findings(self, prior_context: ContextBuffer) -> dict[str, SubstanceFinding]:
        """The subtasks' lookups in the buffer, by label."""
        found: dict[str, SubstanceFinding] = {}
        for results in prior_context.values():
            for result in results:
                if result.tool_name != self._lookup.name:
                    continue
                finding = SubstanceFinding.parse(result.context)
                if finding is not None:
                    found[finding.label.casefold()] = finding
        return found

    def _resolve(
        self, labels: list[str], looked_up: dict[str, SubstanceFinding], replies: dict[str, str]
    ) -> _Analysis:
        """The findings of ``labels``: the subtasks' (``looked_up``), else a direct lookup that
        narrows an ambiguous label by the user's reply to the question about that label."""
        findings: list[SubstanceFinding] = []
        for label in labels:
            finding = looked_up.get(label.casefold())
            if finding is None:  # no subtask resolved it: a plain method call (seed 6.8)
                reply = replies.get(label.casefold())
                products = self._lookup.pick(label, reply)
                if len(products) > 1:
                    question = self._lookup.which_product_question(label, products)
                    if reply is not None:
                        question = RETRY_PREFIX + question
                    return _Analysis(findings, question)
                finding = self._lookup.finding(label, products)
            findings.append(finding)
        return _Analysis(findings)

    def report(self, findings: list[SubstanceFinding]) -> str:
        """The guaranteed answer: for each pair the substances both contain and the
        interactions with severity, then the unknown names, the source and the disclaimer."""
        data = self._lookup.data
        known = [finding for finding in findings if finding.product is not None]
        lines: list[str] = []
        for first, second in combinations(known, 2):
            pair = f"{first.describe()} + {second.describe()}"
            shared = [substance for substance in first.substances if substance in second.substances]
            if shared:
                names = " and ".join(shared)
                lines.append(
                    f"{pair}: both contain {names}; taking both doubles the dose of {names}."
                )
            interactions = data.interactions_between(set(first.substances), set(second.substances))
            if not interactions and not shared:
                lines.append(
                    f"{pair}: no interaction is listed in this data set (it is small: that "
                    "does not mean the combination is safe)."
                )
            for interaction in interactions:
                a, b = interaction.substances
                lines.append(
                    f"{pair}: {interaction.severity} interaction ({a} + {b}). {interaction.effect}"
                )
        for finding in findings:
            if finding.product is None:
                hint = (
                    f" (did you mean {' or '.join(finding.suggestions)}?)"
                    if finding.suggestions
                    else ""
                )
                lines.append(
                    f"{finding.describe()} is not in the data set{hint}, so its interactions "
                    "cannot be checked here."
                )
        lines.append(data.attribution())
        return "\n".join(lines)


def replies_by_label(clarification: Clarification) -> dict[str, str]:
    """The user's replies to this task's which-product questions, by the case-folded label each
    question asked about (a later reply replaces an earlier one); other questions are left out."""
    replies: dict[str, str] = {}
    for asked in [*clarification.earlier, clarification]:
        label = SubstanceLookupTool.asked_label(asked.question)
        if label is not None and asked.reply is not None:
            replies[label.casefold()] = asked.reply
    return replies


def named_in(text: str, names: list[str]) -> list[str]:
    """The names that ``text`` really contains (case-insensitive), without repeats: a model may
    invent or repeat names."""
    folded = text.casefold()
    return _unique([name.strip() for name in names if name.strip().casefold() in folded])


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    unique: list[str] = []
    for name in names:
        if name and name.casefold() not in seen:
            seen.add(name.casefold())
            unique.append(name)
    return unique
