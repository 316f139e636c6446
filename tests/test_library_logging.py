"""The standard-library logging of the libraries toolwire runs (the ``mcp`` SDK, uvicorn) goes
through structlog (issue 34, section 5): JSON lines like every other event (``library_log``),
redacted, a validation error's quoted input withheld. Before, an MCP server that wrote junk on
stdout put the SDK's tracebacks in the log as plain text, quoting the credential in the message."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
from pydantic import BaseModel, ValidationError

from mcp_support.noisy_server import API_KEY, PASSWORD
from toolwire import logging as logging_module
from toolwire.logging import StructlogHandler, configure_logging

TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))
NOISY_SERVER = Path(__file__).parent / "mcp_support" / "noisy_server.py"


@pytest.mark.requires_extra("mcp")  # the junk-writing server is consumed over the SDK
def test_a_server_writing_junk_leaves_the_log_json_lines_without_its_secrets(
    tmp_path: Path,
) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        "default_domain: office\n"
        "sessions: {store: memory}\n"
        "domains: [{name: office, description: Notes.}]\n"
        "mcp_servers:\n"
        "  - name: noisy\n"
        f"    command: {json.dumps([sys.executable, str(NOISY_SERVER)])}\n"
    )
    result = subprocess.run(
        [TOOLWIRE, "--config", str(config), "tools", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"TOOLWIRE_PLUGINS": "", "PATH": "/usr/bin:/bin"},
    )

    assert result.returncode == 0, result.stderr
    assert "office.read_note" in result.stdout  # the server's tools are there all the same
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    events = [json.loads(line) for line in lines]  # every line is one JSON event
    routed = [event for event in events if event["event"] == "library_log"]
    assert len(routed) == 2, result.stderr
    for event in routed:
        assert event["logger"] == "mcp.client.stdio"
        assert event["message"] == "Failed to parse JSONRPC message from server"
        assert event["level"] == "error"
        assert "ValidationError" in event["exception"]
        assert "input_value=(withheld)" in event["exception"]
    assert PASSWORD[:8] not in result.stderr and API_KEY[:10] not in result.stderr


class Call(BaseModel):
    name: str


def test_a_library_record_is_one_redacted_event_with_its_quoted_input_withheld() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream, force=True, default_level="info")
    try:
        try:
            Call.model_validate({"name": 5, "password": "hunter2-quoted"})
        except ValidationError:
            logging.getLogger("mcp.server.lowlevel").exception(
                "handler for %r raised: {'password': 'hunter2-quoted'}", "tools/call"
            )
        logging.getLogger("uvicorn.error").warning("token=abc123secret in a header")
        logging.getLogger("mcp.server.lowlevel").info("an info record: below the level")
    finally:
        structlog.reset_defaults()

    text = stream.getvalue()
    assert "hunter2" not in text and "abc123secret" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["event"] == "library_log" and first["logger"] == "mcp.server.lowlevel"
    assert first["message"] == "handler for 'tools/call' raised: {'password': '***'}"
    assert "input_value=(withheld), input_type=int" in first["exception"]
    assert second == {
        "logger": "uvicorn.error",
        "message": "token=*** in a header",
        "event": "library_log",
        "level": "warning",
        "timestamp": second["timestamp"],
    }


@pytest.mark.parametrize("times", [1, 3])
def test_routing_is_installed_once(times: int) -> None:
    for _ in range(times):
        configure_logging(stream=io.StringIO(), force=True)
    structlog.reset_defaults()

    for name in ("mcp", "uvicorn"):
        logger = logging.getLogger(name)
        routed = [handler for handler in logger.handlers if isinstance(handler, StructlogHandler)]
        assert len(routed) == 1 and logger.propagate is False


def test_a_log_level_that_is_no_level_is_warned_about_once_and_the_default_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was taken as ``warning`` without a word (``toolwire check`` then printed warnings)."""
    monkeypatch.setenv("TOOLWIRE_LOG_LEVEL", "loud")
    # warned once per process: another test's "loud" must not have used up this one's warning
    monkeypatch.setattr(logging_module, "_WARNED_LEVELS", set())
    stream = io.StringIO()
    log = structlog.get_logger("test")
    try:
        configure_logging(stream=stream, force=True, default_level="critical")  # check's
        log.warning("hidden_at_the_default")
        for _ in range(2):  # the command line, then a command
            configure_logging(stream=stream, force=True)
        log.warning("shown")
    finally:
        structlog.reset_defaults()

    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [event["event"] for event in events] == ["log_level_unknown", "shown"]
    assert events[0] == {
        "variable": "TOOLWIRE_LOG_LEVEL",
        "value": "loud",
        "accepted": "debug, info, warning, error, critical",
        "event": "log_level_unknown",
        "level": "warning",
        "timestamp": events[0]["timestamp"],
    }
