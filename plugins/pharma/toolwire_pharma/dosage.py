"""``DosageInfoTool``: the usual dose of a product's substances, from the data set's notes.

Orchestrator-activated by its suitability question; finds the product through the injected
``SubstanceLookupTool`` (a direct call, seed 6.8) and asks which product an ambiguous name means.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire import Clarification, OrchestratorActivatedTool, ToolExecutionResult
from toolwire_pharma.data import DataSettings, MedicineData
from toolwire_pharma.lookup import RETRY_PREFIX, SubstanceLookupTool

NO_NOTE = "no dosage note in the data set"


class DosageQuery(BaseModel):
    product: str = Field(description="The medicine product or active substance asked about")


class DosageInfoTool(OrchestratorActivatedTool[DosageQuery]):
    """Answers "how much X can I take?" with the data set's dosage notes (a guaranteed answer)."""

    settings_model = DataSettings

    def __init__(self, substance_lookup: SubstanceLookupTool, settings: DataSettings) -> None:
        self._lookup = substance_lookup
        self._data = MedicineData.read(settings.data_file)

    def executable_instruction(self) -> str:
        return "Does the question ask how much of a medicine to take, or how often (its dose)?"

    def execute_with_result(self, params: DosageQuery, text: str) -> ToolExecutionResult:
        return self._answer(params.product, reply=None)

    def execute_with_clarification(
        self, params: DosageQuery, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        # Our question quoted the ambiguous label; the reply picks one of its products.
        label = self._lookup.asked_label(clarification.question) or params.product
        return self._answer(label, reply=clarification.reply or "")

    def _answer(self, label: str, reply: str | None) -> ToolExecutionResult:
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
                + self._data.attribution()
            )
        product = products[0]
        notes = [
            f"{substance}: {self._data.dosage_notes.get(substance, NO_NOTE)}"
            for substance in product.substances
        ]
        return ToolExecutionResult.as_guaranteed_context(
            f"Usual dosage for {product.name}: "
            + "; ".join(notes)
            + ". "
            + "Follow the product's label or your prescriber. "
            + self._data.attribution()
        )
