"""Run ``toolwire ask`` as a user would, for end-to-end tests of a plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MODEL_ENVIRONMENT = ("OPENAI_API_KEY", "TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_LLM_MODEL")
"""Variables that would point toolwire away from the embedded model."""


def ask_embedded_model(
    question: str,
    *,
    domain: str,
    plugins: str,
    cwd: Path,
    timeout_s: float = 900,
    session: str | None = None,
) -> dict[str, Any]:
    """``toolwire ask --json --trace`` in a subprocess on the embedded local model; the
    ``Answer`` as JSON, with the text of any failure. Only the named installed plugins load, no
    config file is read (``cwd`` should be an empty directory), and a failing command fails with
    its stderr. ``session``: an earlier answer's ``session_id``, to continue its conversation
    (kept in ``cwd``'s SQLite file)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {*MODEL_ENVIRONMENT, "TOOLWIRE_CONFIG"}
    }
    env["TOOLWIRE_PLUGINS"] = plugins
    command = Path(sys.executable).with_name("toolwire")
    run = subprocess.run(
        # --trace: the verbose Answer, so a failed step shows what it said, not an error id
        [
            str(command),
            "ask",
            "--domain",
            domain,
            "--json",
            "--trace",
            question,
            *(("--session", session) if session else ()),
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if run.returncode != 0:
        raise AssertionError(f"toolwire ask exited {run.returncode}: {run.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer
