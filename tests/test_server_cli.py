"""``toolwire serve`` itself, as an operator runs it (no test plugin, no installed plugins)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from server_support.processes import ServerProcess, write_config
from server_support.sockets import EXPOSURE_REFUSAL, refused_start
from toolwire.cli import app

pytestmark = pytest.mark.requires_extra("server")  # `toolwire serve` processes

TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))
REMOTE_MODEL = {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}
"""A model server these tests never ask: with the embedded model, toolwire serve would start and
warm it before /readyz says ready."""


def test_serve_runs_the_api_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        default_domain="desk",
        domains=[{"name": "desk", "description": "Declared in YAML, no tools."}],
        llm=REMOTE_MODEL,
    )
    server = ServerProcess(
        config,
        tmp_path / "serve.log",
        env={"TOOLWIRE_PLUGINS": "", "TOOLWIRE_API_TOKEN": "tok"},
        command=[TOOLWIRE, "serve", "--config", str(config), "--port", "0"],
    ).start()
    try:
        assert httpx.get(f"{server.url}/readyz").json()["status"] == "ready"
        assert httpx.get(f"{server.url}/v1/domains").status_code == 401
        domains = httpx.get(f"{server.url}/v1/domains", headers={"Authorization": "Bearer tok"})
        assert [domain["name"] for domain in domains.json()] == ["desk"]
    finally:
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal for the supervisor
        assert server.process.wait(timeout=20) in (0, -signal.SIGTERM)
    events = [event["event"] for event in server.events()]
    assert events.index("server_started") < events.index("server_stopped")


def test_serve_reports_a_bad_configuration_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text("server:\n  prot: 8000\n")
    result = subprocess.run(
        [TOOLWIRE, "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"TOOLWIRE_PLUGINS": "", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert f"{config}:2" in result.stderr
    assert "prot" in result.stderr
    assert "Traceback" not in result.stderr


def desk_config(tmp_path: Path) -> Path:
    """A configuration with one YAML-declared domain and nothing to install."""
    return write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        domains=[{"name": "desk"}],
        default_domain="desk",
        llm=REMOTE_MODEL,
    )


def serving_on_all_interfaces(
    tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> ServerProcess:
    """``toolwire serve --host 0.0.0.0 --port 0 OPTIONS``, started."""
    config = desk_config(tmp_path)
    command = [TOOLWIRE, "serve", "--config", str(config), "--port", "0", "--host", "0.0.0.0"]
    return ServerProcess(
        config,
        tmp_path / "serve.log",
        env={"TOOLWIRE_PLUGINS": "", **(env or {})},
        command=[*command, *options],
    ).start()


def test_serve_refuses_a_public_address_without_a_key(tmp_path: Path) -> None:
    config = desk_config(tmp_path)
    command = [TOOLWIRE, "serve", "--config", str(config), "--port", "0", "--host", "0.0.0.0"]

    assert refused_start(command) == EXPOSURE_REFUSAL.format(path="/v1")


def test_serve_on_a_public_address_with_insecure_no_auth_says_so(tmp_path: Path) -> None:
    server = serving_on_all_interfaces(tmp_path, "--insecure-no-auth")
    try:
        assert httpx.get(f"{server.url}/v1/domains").status_code == 200  # open, as asked
    finally:
        server.stop()
    assert "warning: --insecure-no-auth: /v1 on 0.0.0.0 answers anyone" in server.log_text()
    assert "serving_without_authentication" in [event["event"] for event in server.events()]


def test_serve_on_a_public_address_with_a_key_needs_no_flag(tmp_path: Path) -> None:
    server = serving_on_all_interfaces(tmp_path, env={"TOOLWIRE_API_TOKEN": "tok"})
    try:
        assert httpx.get(f"{server.url}/v1/domains").status_code == 401
    finally:
        server.stop()


def test_serve_help_names_the_endpoints_as_they_are() -> None:
    """/docs is off unless server.api_docs is set; the help said "OpenAPI at /docs"."""
    result = CliRunner().invoke(app, ["serve", "--help"])

    assert result.exit_code == 0
    text = " ".join(result.stdout.split())  # as wide as the terminal is
    assert "OpenAPI at /docs" not in text
    assert "the OpenAPI document at /openapi.json (the /docs and /redoc pages only with" in text
    assert "server.api_docs: true" in text
    assert "The embedded model is started and warmed as the server starts" in text
