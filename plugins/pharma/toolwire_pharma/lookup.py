"""``SubstanceLookupTool``: a product name → the active-substance groups of the products it names.

Not orchestrator-activated (seed 6.4, 6.8): it runs only on subtasks that a coordinator designates
with ``required_tool_names``, or by a direct method call from a tool it is injected into. Its
methods are plain, deterministic functions of the bundled data set.
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel, Field

from toolwire import (
    ChatbotTool,
    Clarification,
    ToolExecutionResult,
    extract_coordinator_original,
    extract_coordinator_task,
)
from toolwire_pharma.data import DataSettings, MedicineData, Product, folded
from toolwire_pharma.messages import InteractionQuestion, SubstanceFinding

MIN_PREFIX = 3
"""A label this long or longer also matches product names it begins (``"Excedr"``)."""

RETRY_PREFIX = "I could not tell which one you meant. "
"""Starts the question asked again when a reply did not identify one product."""

_WORD = re.compile(r"[a-z0-9]+")
_ORDINALS = {
    "first": 0, "1st": 0, "1": 0,
    "second": 1, "2nd": 1, "2": 1,
    "third": 2, "3rd": 2, "3": 2,
    "fourth": 3, "4th": 3, "4": 3,
}  # fmt: skip
"""Positions a reply may name: one ordinal word anywhere in it, a digit only as the whole reply."""
_FILLER = frozenset({"the", "one", "number", "no", "option", "please", "i", "mean", "it", "s"})
"""Words that may surround a digit in a reply that is still just the digit."""


class SubstanceQuery(BaseModel):
    label: str = Field(description="The medicine product or active substance name to look up")


class SubstanceLookupTool(ChatbotTool[SubstanceQuery]):
    """Resolves product names against the data set; asks which product when a name is ambiguous."""

    settings_model = DataSettings

    def __init__(self, settings: DataSettings) -> None:
        self.data = MedicineData.read(settings.data_file)
        self._substances = self.data.substance_names()

    def executable_instruction(self) -> str:
        return (
            "substance_lookup: always false - runs only on coordinator-designated tasks or by "
            "direct call; the parameter is the one medicine name the task asks about"
        )

    # -- the direct-call API (seed 6.8) -----------------------------------------------------

    def resolve_products(self, label: str) -> list[Product]:
        """The products a label may name: its exact product name, else every product of that
        brand, else the substance itself, else the products whose name begins with it."""
        wanted = folded(label)
        if not wanted:
            return []
        exact = [p for p in self.data.products if p.name.casefold() == wanted]
        if exact:
            return exact
        brand = [p for p in self.data.products if p.brand.casefold() == wanted]
        if brand:
            return brand
        if wanted in self._substances:
            return [Product(name=wanted, substances=[wanted])]
        if len(wanted) < MIN_PREFIX:
            return []
        return [p for p in self.data.products if p.name.casefold().startswith(wanted)]

    def resolve_substance_groups(self, label: str) -> list[list[str]]:
        """One sorted substance group per product the label may name; [] when it names none.

        ``"Advil"`` gives ``[["ibuprofen"]]``; the brand ``"Excedrin"`` names two products, so
        two groups.
        """
        return [sorted(product.substances) for product in self.resolve_products(label)]

    def pick(self, label: str, reply: str | None = None) -> list[Product]:
        """The label's products, narrowed to the one the user's ``reply`` chose when it was
        ambiguous and the reply identifies one: by its name, else by words only that product
        has (``"the PM one"``), else by its position: one ordinal word (``"I'll take the
        second"``), or a bare number when the reply is just that (``"2"``)."""
        candidates = self.resolve_products(label)
        if len(candidates) < 2 or not reply:
            return candidates
        chosen = self.resolve_products(reply)
        if len(chosen) == 1 and chosen[0] in candidates:
            return chosen
        words = _WORD.findall(reply.casefold())
        own = [_product_words(candidate) for candidate in candidates]
        shared = set.intersection(*own)
        scores = [len(set(words) & (mine - shared)) for mine in own]
        best = max(scores)
        if best > 0 and scores.count(best) == 1:
            return [candidates[scores.index(best)]]
        named = {_ORDINALS[word] for word in words if word in _ORDINALS and not word.isdigit()}
        digits = [_ORDINALS[word] for word in words if word in _ORDINALS and word.isdigit()]
        others = [word for word in words if word not in _ORDINALS and word not in _FILLER]
        if len(named) == 1 and not digits:  # "I'll take the second"
            position = named.pop()
        elif not named and len(digits) == 1 and not others:  # "2", not "I take 1 at night"
            position = digits[0]
        else:
            return candidates
        return [candidates[position]] if position < len(candidates) else candidates

    def which_product_question(self, label: str, candidates: list[Product]) -> str:
        """The clarifying question for an ambiguous label, numbering the candidates."""
        options = "; ".join(
            f"{number}) {product.name} ({', '.join(product.substances)})"
            for number, product in enumerate(candidates, start=1)
        )
        return (
            f'"{label}" names {len(candidates)} products in the data set: {options}. '
            "Which one do you mean?"
        )

    @staticmethod
    def asked_label(question: str) -> str | None:
        """The label a :meth:`which_product_question` was about (None for another question)."""
        question = question.removeprefix(RETRY_PREFIX)
        if not question.startswith('"'):
            return None
        label, quote, _ = question[1:].partition('"')
        return label if quote else None

    def finding(self, label: str, products: list[Product]) -> SubstanceFinding:
        """What a lookup found for ``label`` (``products``: none, or the one it resolved to)."""
        if not products:
            return SubstanceFinding(
                label=label, suggestions=self.suggestions(label), source=self.data.source
            )
        product = products[0]
        return SubstanceFinding(
            label=label,
            product=product.name,
            substances=list(product.substances),
            source=self.data.source,
        )

    def suggestions(self, label: str) -> list[str]:
        names = [product.name for product in self.data.products] + sorted(self._substances)
        return difflib.get_close_matches(label, names, n=3, cutoff=0.6)

    # -- orchestrator-run on a coordinator-designated subtask ---------------------------------

    def execute_with_result(self, params: SubstanceQuery, text: str) -> ToolExecutionResult:
        label = self.label_of(params, text)
        return self._found(label, self.pick(label))

    def execute_with_clarification(
        self, params: SubstanceQuery, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        label = self.label_of(params, text)
        products = self.pick(label, clarification.reply)
        if len(products) > 1:
            products = self.pick(label, params.label)  # the model may have named the product
        return self._found(label, products, retry=True)

    def label_of(self, params: SubstanceQuery, text: str) -> str:
        """The label to look up: on a coordinator-designated subtask, the product of the parent's
        ``InteractionQuestion`` that the subtask names (read back as JSON, seed 6.6); otherwise,
        or when that fails, the extracted parameter."""
        if self.is_coordinator_requested(text):
            question = InteractionQuestion.parse(extract_coordinator_original(text))
            task = extract_coordinator_task(text).casefold()
            named = [p for p in question.products if p.casefold() in task] if question else []
            if named:
                return max(named, key=len)
        return params.label.strip()

    def _found(
        self, label: str, products: list[Product], *, retry: bool = False
    ) -> ToolExecutionResult:
        if len(products) > 1:
            question = self.which_product_question(label, products)
            if retry:
                question = RETRY_PREFIX + question
            return ToolExecutionResult.clarifying_question(question)
        return ToolExecutionResult.context(self.finding(label, products).model_dump_json())


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _product_words(product: Product) -> set[str]:
    return _words(product.name) | _words(" ".join(product.substances))
