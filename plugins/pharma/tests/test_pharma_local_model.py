"""End to end on the embedded local model: the ``toolwire ask --domain pharma`` path.

Starts llama.cpp with the bundled 0.5B model in a subprocess CLI run (tens of seconds on two
cores). The assertions hold whichever way the small model decomposes: the answer must carry the
guaranteed interaction text, its severity, the source and the disclaimer, verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from toolwire_pharma import MedicineData

CLI = Path(sys.executable).with_name("toolwire")


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
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"OPENAI_API_KEY", "TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_CONFIG"}
    }
    env["TOOLWIRE_PLUGINS"] = "pharma"
    run = subprocess.run(
        [str(CLI), "ask", "--domain", "pharma", "--json", question],
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
    [guaranteed] = answer["guaranteed_contexts"]
    assert expected in guaranteed
    assert guaranteed.endswith(MedicineData.read().attribution())
    assert guaranteed in answer["text"]
    analysis = [run for run in answer["trace"]["tools"] if run["tool_name"].endswith("analysis")]
    assert [run["outcome"] for run in analysis] == ["guaranteed"]
