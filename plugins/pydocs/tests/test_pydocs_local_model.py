"""End to end on the embedded local model: ``toolwire ask --domain pydocs``.

Starts llama.cpp with the bundled 0.5B model in a subprocess CLI run. The assertions hold
whatever the small model writes: the RAG tool retrieved the answering page from Python's own
documentation and the answer was composed from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).with_name("toolwire")


@pytest.mark.local_model
def test_ask_pydocs_on_the_embedded_model(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"OPENAI_API_KEY", "TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_CONFIG"}
    }
    env["TOOLWIRE_PLUGINS"] = "pydocs"
    run = subprocess.run(
        [str(CLI), "ask", "--domain", "pydocs", "--json", "What does the nonlocal statement do?"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    answer = json.loads(run.stdout)
    assert answer["kind"] == "answer"
    assert answer["text"].strip()
    rag = [r for r in answer["trace"]["tools"] if r["tool_name"] == "pydocs.docs_search"]
    assert [(r["reason"], r["outcome"]) for r in rag] == [("rag", "context")]
    assert answer["usage"]["llm_calls"] >= 2
