"""The bundled medicine data set: products with their active substances, and known interactions."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

BUNDLED_DATA = Path(__file__).with_name("medicines.json")


class Product(BaseModel):
    name: str
    substances: list[str] = Field(min_length=1)


class Interaction(BaseModel):
    substances: tuple[str, str]
    severity: str
    effect: str


class MedicineData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    products: list[Product]
    interactions: list[Interaction] = Field(default_factory=list)

    @classmethod
    def read(cls, path: Path = BUNDLED_DATA) -> MedicineData:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))

    def substance_names(self) -> set[str]:
        return {substance for product in self.products for substance in product.substances}
