"""``DosageInfoTool``: the usual dose of a product's substances, from the data set's notes.

Orchestrator-activated by its suitability question; finds the product through the injected
``SubstanceLookupTool`` (a direct call, seed 6.8), reads the lookup's data set, and asks which
product an ambiguous name means. It never gives a child's dose (the domain's first safety rule):
a question about a child gets the refer-to-a-pharmacist-or-doctor answer instead.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from toolwire import Clarification, OrchestratorActivatedTool, ToolExecutionResult
from toolwire_pharma.lookup import RETRY_PREFIX, SubstanceLookupTool

NO_NOTE = "no dosage note in the data set"

CHILD_DOSE = (
    "I can't give a dose for a child: a child's dose must come from a pharmacist or a doctor."
)
"""The whole answer to a dose question about a child under 12 (``SAFETY_RULES`` rule 1)."""

_CHILD_WORDS = re.compile(
    r"\b(?:child|children|kids?|bab(?:y|ies)|toddlers?|infants?|newborns?)\b", re.IGNORECASE
)
_AGE = re.compile(r"\b(\d+)[\s-]*(?:years?|yrs?)[\s-]*old\b", re.IGNORECASE)
_MONTHS_OLD = re.compile(r"\b\d+[\s-]*months?[\s-]*old\b", re.IGNORECASE)


class DosageQuery(BaseModel):
    product: str = Field(description="The medicine product or active substance asked about")


def about_a_child(text: str) -> bool:
    """Whether ``text`` speaks of a child: a word for one, or an age under 12 (``"4-year-old"``,
    ``"6 months old"``). Read from the text, not extracted by the model: a refusal must not
    depend on a small model noticing the child."""
    ages = [int(age) for age in _AGE.findall(text)]
    return bool(
        _CHILD_WORDS.search(text) or _MONTHS_OLD.search(text) or any(age < 12 for age in ages)
    )


class DosageInfoTool(OrchestratorActivatedTool[DosageQuery]):
    """Answers "how much X can I take?" with the data set's dosage notes (a guaranteed answer)."""

    def __init__(self, substance_lookup: SubstanceLookupTool) -> None:
        self._lookup = substance_lookup

    def executable_instruction(self) -> str:
        return "Does the question ask how much of a medicine to take, or how often (its dose)?"

    def execute_with_result(self, params: DosageQuery, text: str) -> ToolExecutionResult:
        if about_a_child(text):
            return self._child_dose()
        return self._answer(params.product, reply=None)

    def execute_with_clarification(
        self, params: DosageQuery, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        if about_a_child(f"{text}\n{clarification.reply or ''}"):
            return self._child_dose()
        # Our question quoted the ambiguous label; the reply picks one of its products.
        label = self._lookup.asked_label(clarification.question) or params.product
        return self._answer(label, reply=clarification.reply or "")

    def _child_dose(self) -> ToolExecutionResult:
        return ToolExecutionResult.as_guaranteed_context(
            f"{CHILD_DOSE} {self._lookup.data.attribution()}"
        )

    def _answer(self, label: str, reply: str | None) -> ToolExecutionResult:
        data = self._lookup.data
        products = self._lookup.pick(label, reply)
        if len(products) > 1:
            question = self._lookup.which_product_question(label, products)
            if reply is not None:
                question = RETRY_PREFIX + question
            return ToolExecutionResult.clarifying_question(question)
        if not products:
            finding = self._lookup.finding(label, products)
            hint = (
                f" Did you mean {' or '.join(finding.suggestions)}?" if finding.suggestions else ""
            )
            return ToolExecutionResult.as_guaranteed_context(
                f'"{label}" is not in the data set, so I have no dosage note for it.{hint} '
                + data.attribution()
            )
        product = products[0]
        notes = [
            f"{substance}: {data.dosage_notes.get(substance, NO_NOTE)}"
            for substance in product.substances
        ]
        return ToolExecutionResult.as_guaranteed_context(
            f"Usual dosage for {product.name}: "
            + "; ".join(notes)
            + ". "
            + "Follow the product's label or your prescriber. "
            + data.attribution()
        )
