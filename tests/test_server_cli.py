"""``toolwire serve`` itself, as an operator runs it (no test plugin, no installed plugins)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from server_support.processes import ServerProcess, write_config

TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))


def test_serve_runs_the_api_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        default_domain="desk",
        domains=[{"name": "desk", "description": "Declared in YAML, no tools."}],
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
