"""The notes server (``notes_server.py``) after two lines on stdout that are not MCP messages, for
tests: a JSON-RPC message that is malformed and quotes a password, and a line of plain text with
an API key. The SDK's stdio client logs each with its traceback through the standard library."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

PASSWORD = "hunter2-in-a-bad-message"
API_KEY = "sk-noisy0123456789abcdefghijklmn"

if __name__ == "__main__":
    sys.stdout.write(
        '{"jsonrpc": "2.0", "method": 5, "params": {"password": "' + PASSWORD + '"}}\n'
    )
    sys.stdout.write(f"starting up with api_key={API_KEY} password: {PASSWORD}\n")
    sys.stdout.flush()
    notes = Path(__file__).with_name("notes_server.py")
    sys.argv = [str(notes)]
    runpy.run_path(str(notes), run_name="__main__")
