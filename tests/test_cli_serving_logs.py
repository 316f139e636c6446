"""What ``toolwire serve`` and ``toolwire mcp serve`` say of a plugin that failed to load: a
``plugin_failed`` event in their JSON log, not the plain line of the interactive commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _build_samples import WriteFile
from toolwire import plugins as plugins_module
from toolwire.cli import build_cli

runner = CliRunner()

CONFIG = (
    "default_domain: desk\n"
    "domains: [{name: desk}]\n"
    "sessions: {store: memory}\n"
    "llm: {base_url: 'http://127.0.0.1:9/v1', model: never-asked}\n"  # never started nor asked
)
PLAIN_LINE = "plugin 'ghost' failed to load"


@pytest.fixture
def ghost_named(isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``TOOLWIRE_PLUGINS`` names a plugin nobody installed; the configuration needs none."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "ghost")
    # logged once per process: another test's ghost must not have used up this one's event
    monkeypatch.setattr(plugins_module, "_LOGGED_FAILURES", set())
    return write_file("toolwire.yaml", CONFIG)


def logged_events(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line as a JSON log event (json.loads fails on a plain line)."""
    return [json.loads(line) for line in stderr.splitlines()]


@pytest.mark.requires_extra("server")
def test_serve_logs_a_failed_plugin_as_a_plugin_failed_event(
    ghost_named: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line finds its commands (loading the plugins, failure included) before
    ``serve`` configures its JSON log and loads the app: the failure is still an event there."""
    import toolwire.server

    served: list[object] = []

    async def serve_app(app: object, settings: object, *, insecure_no_auth: bool) -> None:
        served.append(app)

    monkeypatch.setattr(toolwire.server, "serve", serve_app)
    cli = build_cli()

    result = runner.invoke(cli, ["serve", "--config", str(ghost_named)])

    assert result.exit_code == 0, result.output
    assert served
    assert PLAIN_LINE not in result.stderr
    failed = [event for event in logged_events(result.stderr) if event["event"] == "plugin_failed"]
    assert [event["plugin"] for event in failed] == ["ghost"]
    assert failed[0]["level"] == "error"
    assert failed[0]["error"].startswith("named in TOOLWIRE_PLUGINS but no installed plugin")


@pytest.mark.requires_extra("mcp")
def test_mcp_serve_logs_a_failed_plugin_as_a_plugin_failed_event(
    ghost_named: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolwire.mcp.transports

    served: list[object] = []

    async def serve_stdio(server: object) -> None:
        served.append(server)

    monkeypatch.setattr(toolwire.mcp.transports, "serve_stdio", serve_stdio)
    cli = build_cli()

    result = runner.invoke(cli, ["mcp", "serve", "--config", str(ghost_named)])

    assert result.exit_code == 0, result.output
    assert served
    assert PLAIN_LINE not in result.stderr
    failed = [event for event in logged_events(result.stderr) if event["event"] == "plugin_failed"]
    assert [event["plugin"] for event in failed] == ["ghost"]


def test_the_interactive_commands_still_say_a_failed_plugin_in_one_plain_line(
    ghost_named: Path,
) -> None:
    cli = build_cli()

    result = runner.invoke(cli, ["graph", "--config", str(ghost_named)])

    assert result.exit_code == 1  # the build without the plugin's contributions
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{PLAIN_LINE}: named in TOOLWIRE_PLUGINS but no installed plugin")
