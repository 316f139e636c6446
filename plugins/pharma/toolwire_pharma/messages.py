"""What the pharma tools hand each other through the orchestrator, as JSON.

``InteractionQuestion`` is the parent task's text once ``InteractionAnalysisTool`` decomposed it:
subtasks receive it as their prompt context and read it back with
``extract_coordinator_original`` (seed 6.6). ``SubstanceFinding`` is what ``SubstanceLookupTool``
returns as context on a subtask, so the parent reads the buffer without parsing prose.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, Field, ValidationError


class _Message(BaseModel):
    @classmethod
    def parse(cls, text: str) -> Self | None:
        """The message if ``text`` is one serialised, else None (e.g. the user's own words)."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None


class InteractionQuestion(_Message):
    """The user's question and the products it names, as the coordinator decided them."""

    question: str
    products: list[str]


class SubstanceFinding(_Message):
    """One label looked up: the product it names and its active substances, or nothing."""

    label: str
    """The name as the user wrote it."""
    product: str | None = None
    """The product (or substance) the label resolved to; None when it is not in the data set."""
    substances: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    """Close product names, when the label resolved to nothing."""
    source: str

    def describe(self) -> str:
        """``Advil (ibuprofen)``; a bare substance label shows as itself."""
        if self.product is None:
            return f'"{self.label}"'
        if self.substances == [self.product]:
            return self.product
        return f"{self.product} ({', '.join(self.substances)})"
