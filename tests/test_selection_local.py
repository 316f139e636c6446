"""Tool selection and domain routing end to end on the embedded model (marked ``local_model``).

Messages from the labelled set's synthetic domains that a careful reader finds unambiguous; the
full measurement is ``bench/eval_selection.py``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolwire import App
from toolwire.llm import create_language_model
from toolwire.settings import LLMSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "selection"))

from labelled import selection_app

pytestmark = pytest.mark.local_model


@pytest.fixture
async def app() -> AsyncIterator[App]:
    model = create_language_model(LLMSettings(), environ={})
    built = selection_app(llm=model)
    yield built
    await built.aclose()
    await model.aclose()


@pytest.mark.parametrize(
    ("domain", "message", "expected"),
    [
        (
            "geometry",
            "What is the area of a triangle with a base of 10 cm and a height of 7 cm?",
            ["geometry.triangle_area"],
        ),
        ("finance", "Write me a short poem about autumn leaves.", []),
    ],
)
async def test_the_embedded_model_selects_the_right_tools(
    app: App, domain: str, message: str, expected: list[str]
) -> None:
    answer = await app.ask(message, domain=domain)

    assert answer.trace.selection is not None
    assert answer.trace.selection.activated == expected
    assert [run.tool_name for run in answer.trace.tools] == expected


async def test_a_message_naming_no_domain_is_routed_to_the_one_it_is_about(app: App) -> None:
    answer = await app.ask("How many euros do I get for 200 US dollars at today's rate?")

    assert answer.domain == "finance"
    assert answer.routing is not None and answer.routing.domain == "finance"
