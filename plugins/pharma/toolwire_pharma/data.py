"""The bundled medicine data set: products and their active substances, known interactions of
substance pairs, dosage notes. Its ``source`` and ``disclaimer`` travel into every answer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field

BUNDLED_DATA = Path(__file__).with_name("medicines.json")


def folded(name: str) -> str:
    """A substance name as the tools compare it: ``" Warfarin "`` → ``"warfarin"``."""
    return " ".join(name.split()).casefold()


Substance = Annotated[str, AfterValidator(folded)]
"""A substance name, case-folded when the data set is read, so a file may write ``Warfarin``."""


class Product(BaseModel):
    """A product as sold; several products may share a brand (``Excedrin``)."""

    name: str
    brand: str = ""
    substances: list[Substance] = Field(min_length=1)


class Interaction(BaseModel):
    substances: tuple[Substance, Substance]
    severity: str
    effect: str

    def between(self, first: set[str], second: set[str]) -> bool:
        """Whether one substance is in ``first`` and the other in ``second``."""
        one, other = self.substances
        return (one in first and other in second) or (other in first and one in second)


class MedicineData(BaseModel):
    """The whole data set, read once by ``SubstanceLookupTool``; the other tools use its copy."""

    source: str
    """Where the data comes from, stated in every answer built on it."""
    disclaimer: str
    products: list[Product]
    interactions: list[Interaction] = Field(default_factory=list)
    dosage_notes: dict[Substance, str] = Field(default_factory=dict)

    @classmethod
    def read(cls, path: Path | None = None) -> MedicineData:
        return cls.model_validate_json((path or BUNDLED_DATA).read_text(encoding="utf-8"))

    def substance_names(self) -> set[str]:
        return {substance for product in self.products for substance in product.substances}

    def interactions_between(self, first: set[str], second: set[str]) -> list[Interaction]:
        return [
            interaction for interaction in self.interactions if interaction.between(first, second)
        ]

    def attribution(self) -> str:
        """The line every answer ends with: the source and the disclaimer."""
        return f"Source: {self.source}. {self.disclaimer}"


class DataSettings(BaseModel):
    """YAML ``settings`` of ``substance_lookup``: which data set the domain reads (the other
    tools read the injected lookup's ``data``)."""

    data_file: Path | None = None
    """A JSON data set in the bundled file's format; None: the bundled illustrative one."""
