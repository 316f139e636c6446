"""The bundled medicine data set: products and their active substances, known interactions of
substance pairs, dosage notes. Its ``source`` and ``disclaimer`` travel into every answer."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

BUNDLED_DATA = Path(__file__).with_name("medicines.json")


class Product(BaseModel):
    """A product as sold; several products may share a brand (``Excedrin``)."""

    name: str
    brand: str = ""
    substances: list[str] = Field(min_length=1)


class Interaction(BaseModel):
    substances: tuple[str, str]
    severity: str
    effect: str

    def between(self, first: set[str], second: set[str]) -> bool:
        """Whether one substance is in ``first`` and the other in ``second``."""
        one, other = self.substances
        return (one in first and other in second) or (other in first and one in second)


class MedicineData(BaseModel):
    """The whole data set; read once per tool at build time."""

    source: str
    """Where the data comes from, stated in every answer built on it."""
    disclaimer: str
    products: list[Product]
    interactions: list[Interaction] = Field(default_factory=list)
    dosage_notes: dict[str, str] = Field(default_factory=dict)

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
    """YAML ``settings`` of every pharma tool: which data set it reads."""

    data_file: Path | None = None
    """A JSON data set in the bundled file's format; None: the bundled illustrative one."""
