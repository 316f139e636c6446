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


@pytest.mark.local_model
@pytest.mark.xfail(
    strict=True,
    reason="measured 2026-12-03: the embedded 1.5B model copies 'Can I take it together with "
    "Coumadin?' unchanged in the follow-up rewrite (issue 32: the rewrite prompt needs work)",
)
def test_a_follow_up_on_the_embedded_model(tmp_path: Path) -> None:
    """Two turns of one conversation: "it" in the second is the product of the first, so the
    interaction analysis runs on both products (its guaranteed answer names them)."""
    first = ask_embedded_model(
        "What is the usual dose of Nurofen?", domain="pharma", plugins="pharma", cwd=tmp_path
    )
    second = ask_embedded_model(
        "Can I take it together with Coumadin?",
        domain="pharma",
        plugins="pharma",
        cwd=tmp_path,
        session=first["session_id"],
    )
    assert second["session_id"] == first["session_id"] and second["turn"] == 2
    assert "Nurofen" in (second["context"]["standalone"] or "")
    ran = [run["tool_name"] for run in second["trace"]["tools"] if run["outcome"] == "guaranteed"]
    assert ran == ["pharma.interaction_analysis"]
    [analysis] = second["guaranteed_contexts"]
    assert "Nurofen" in analysis and "Coumadin" in analysis
