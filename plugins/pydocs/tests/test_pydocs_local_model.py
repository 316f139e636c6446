"""End to end on the embedded local model: ``toolwire ask --domain pydocs``.

The assertions hold whatever the small model writes: the RAG tool retrieved pages from Python's
own documentation and an answer was composed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.testing import ask_embedded_model


@pytest.mark.local_model
def test_ask_pydocs_on_the_embedded_model(tmp_path: Path) -> None:
    answer = ask_embedded_model(
        "What does the nonlocal statement do?", domain="pydocs", plugins="pydocs", cwd=tmp_path
    )

    assert answer["kind"] == "answer"
    assert answer["text"].strip()
    rag = [r for r in answer["trace"]["tools"] if r["tool_name"] == "pydocs.docs_search"]
    assert [(r["reason"], r["outcome"]) for r in rag] == [("rag", "context")]
    assert answer["usage"]["llm_calls"] >= 2
