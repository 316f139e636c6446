"""Scripted models for the pharma tests (a module, not the conftest, so tests can import it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from toolwire_pharma import InteractionDecomposition, InteractionRequest, SubstanceQuery

from toolwire import App, extract_coordinator_task
from toolwire.testing import ScriptedModel

NOT_GIVEN: Any = object()

AppFactory = Callable[[ScriptedModel], App]
"""The ``pharma_app`` fixture: an App with the pharma plugin alone and the given model."""


def product_asked(text: str) -> str:
    """What a model would extract as a subtask's label: the quoted name in its own task."""
    task = extract_coordinator_task(text.partition("\n\nClarifying question:")[0])
    found = re.search(r'"([^"]+)"', task)
    return found.group(1) if found else task


def story_model(
    *products: str, decomposition: Any = NOT_GIVEN, lookups: list[Any] | None = None
) -> ScriptedModel:
    """A model that reads "can I take A with B?" the way a good model would.

    ``decomposition`` replaces the coordinator's answer (e.g. a ``ModelError``); ``lookups``
    replaces the subtasks' parameter answers, one each, in order.
    """
    model = ScriptedModel().on_classify("interaction")
    if decomposition is NOT_GIVEN:
        decomposition = {"asks_about_combination": True, "products": list(products)}
    model.on_extract(InteractionDecomposition, decomposition)
    if lookups is None:
        model.on_extract(SubstanceQuery, lambda text, _: {"label": product_asked(text)})
    for lookup in lookups or []:
        model.on_extract(SubstanceQuery, lookup, times=1)
    return (
        model.on_suitability(["interaction_analysis"])
        .on_extract(InteractionRequest, {"products": list(products)})
        .on_answer()
    )
