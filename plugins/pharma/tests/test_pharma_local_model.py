"""End to end on the embedded local model: the ``toolwire ask --domain pharma`` path.

Starts llama.cpp with the bundled 0.5B model in a subprocess CLI run (tens of seconds on two
cores). The assertions hold whichever way the small model decomposes: the answer must carry the
guaranteed interaction text, its severity, the source and the disclaimer, verbatim.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from toolwire_pharma import MedicineData

from toolwire.testing import ask_embedded_model


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Can I take ibuprofen together with warfarin?",
            "major interaction (warfarin + ibuprofen). NSAIDs add to warfarin's anticoagulant",
        ),
    ],
)
def test_ask_on_the_embedded_model(tmp_path: Path, question: str, expected: str) -> None:
    answer = ask_embedded_model(question, domain="pharma", plugins="pharma", cwd=tmp_path)
    assert answer["kind"] == "answer"
    [guaranteed] = answer["guaranteed_contexts"]
    assert expected in guaranteed
    assert guaranteed.endswith(MedicineData.read().attribution())
    assert guaranteed in answer["text"]
    analysis = [run for run in answer["trace"]["tools"] if run["tool_name"].endswith("analysis")]
    assert [run["outcome"] for run in analysis] == ["guaranteed"]
