"""The seed 6.8 pair: ``InteractionAnalysisTool`` calls ``SubstanceLookupTool`` directly.

``SubstanceLookupTool`` is not orchestrator-activated: it is reachable only by injection, as a
plain, deterministic service. ``InteractionAnalysisTool`` receives the singleton through its
constructor (autowired by the parameter's type) and calls ``resolve_substance_groups`` at the
point of its own algorithm where it needs it; no orchestration happens in between.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from pydantic import BaseModel, Field

from toolwire import (
    AgentCoordinator,
    ChatbotTool,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolExecutionResult,
)
from toolwire_pharma.data import BUNDLED_DATA, Interaction, MedicineData


class SubstanceQuery(BaseModel):
    label: str = Field(description="A medicine product name or an active substance name")


class SubstanceLookupSettings(BaseModel):
    data_file: Path | None = None
    """A JSON product data set in the bundled file's format; None: the bundled illustrative one."""


class SubstanceLookupTool(ChatbotTool[SubstanceQuery]):
    """Resolves a product name to the active-substance groups of the products it may name."""

    settings_model = SubstanceLookupSettings

    def __init__(self, settings: SubstanceLookupSettings) -> None:
        data = MedicineData.read(settings.data_file or BUNDLED_DATA)
        self._products = data.products
        self._substances = data.substance_names()

    def executable_instruction(self) -> str:
        return "substance_lookup: always false - called directly by other pharma tools"

    def resolve_substance_groups(self, label: str) -> list[list[str]]:
        """One group per product the label may name (exact name, else name prefix).

        ``"Aspirin"`` names one product; ``"asp"`` names both Aspirin and Aspirin C, so two
        groups. A label that is itself a substance resolves to that substance alone; an unknown
        label resolves to no group.
        """
        wanted = label.strip().casefold()
        if not wanted:
            return []
        exact = [p for p in self._products if p.name.casefold() == wanted]
        matches = exact or [p for p in self._products if p.name.casefold().startswith(wanted)]
        if matches:
            return [sorted(product.substances) for product in matches]
        if wanted in self._substances:
            return [[wanted]]
        return []

    def execute_with_result(self, params: SubstanceQuery, text: str) -> ToolExecutionResult:
        groups = self.resolve_substance_groups(params.label)
        if not groups:
            return ToolExecutionResult.context("")
        described = "; ".join(", ".join(group) for group in groups)
        return ToolExecutionResult.context(f"{params.label}: {described}")


class InteractionRequest(BaseModel):
    products: list[str] = Field(
        description="Every medicine product or active substance the question mentions"
    )


class InteractionAnalysisTool(OrchestratorActivatedTool[InteractionRequest], AgentCoordinator):
    """Checks the products of a question against known interactions of their substances."""

    def __init__(self, substance_lookup: SubstanceLookupTool) -> None:
        self._lookup = substance_lookup
        self._interactions = MedicineData.read().interactions

    def executable_instruction(self) -> str:
        return (
            "Does the question ask whether two or more medicines or active substances can be "
            "taken together, or about interactions between them?"
        )

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        """The analysis runs as one step for now: the task is returned unchanged."""
        return task

    def execute_with_result(self, params: InteractionRequest, text: str) -> ToolExecutionResult:
        lines: list[str] = []
        substances_of: dict[str, set[str]] = {}
        for label in params.products:
            groups = self._lookup.resolve_substance_groups(label)
            if not groups:
                lines.append(f"{label}: not in the product data set")
                continue
            substances_of[label] = {substance for group in groups for substance in group}
            lines.append(f"{label}: " + "; ".join(", ".join(group) for group in groups))
        found = [
            f"{first} + {second}: {interaction.severity} - {interaction.effect}"
            for first, second in combinations(substances_of, 2)
            for interaction in self._between(substances_of[first], substances_of[second])
        ]
        if len(substances_of) >= 2:
            lines += found or ["no known interaction between these in the data set"]
        return ToolExecutionResult.context("\n".join(lines))

    def _between(self, first: set[str], second: set[str]) -> list[Interaction]:
        return [
            interaction
            for interaction in self._interactions
            if (interaction.substances[0] in first and interaction.substances[1] in second)
            or (interaction.substances[1] in first and interaction.substances[0] in second)
        ]
