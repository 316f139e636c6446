"""End to end on the embedded local model: the ``toolwire ask --domain pharma`` path.

Starts llama.cpp with the bundled 0.5B model in a subprocess CLI run (tens of seconds on two
cores). The assertions hold whichever way the small model decomposes: the answer must carry the
guaranteed interaction text, its severity, the source and the disclaimer, verbatim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def _runs(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool run of an answer's task tree."""
    return [*trace["tools"], *(run for sub in trace["sub_tasks"] for run in _runs(sub))]


@pytest.mark.local_model
def test_a_follow_up_on_the_embedded_model(tmp_path: Path) -> None:
    """Two turns of one conversation on the real path: the second continues the first (its id,
    turn 2, reading turn 1), its rewrite resolves "the same" to a dose question about the new
    product, and the dosage tool runs for that product, not the old one."""
    first = ask_embedded_model(
        "What is the usual dose of Nurofen?", domain="pharma", plugins="pharma", cwd=tmp_path
    )
    second = ask_embedded_model(
        "And the same for Coumadin?",
        domain="pharma",
        plugins="pharma",
        cwd=tmp_path,
        session=first["session_id"],
    )
    assert second["session_id"] == first["session_id"] and second["turn"] == 2
    assert second["context"]["turns_read"] == [1]
    standalone = second["context"]["standalone"]
    assert standalone is not None and "Coumadin" in standalone and "dose" in standalone.lower()
    # and asks nothing the user did not: the rewrite once appended its instruction's example
    # "And for children?", and the answer was the refusal of a child's dose
    assert "child" not in standalone.lower() and "child" not in second["text"].lower()
    dosage = [run for run in _runs(second["trace"]) if run["tool_name"] == "pharma.dosage_info"]
    assert [run["params"]["product"] for run in dosage] == ["Coumadin"]
    assert second["kind"] == "answer" and second["text"]
