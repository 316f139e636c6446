"""Server processes on free loopback ports, and a small HTTP client for them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

SUPPORT_DIR = Path(__file__).resolve().parent
TESTS_DIR = SUPPORT_DIR.parent


def write_config(
    path: Path,
    *,
    sessions: dict[str, Any],
    server: dict[str, Any] | None = None,
    **top_level: Any,
) -> Path:
    """A config/toolwire.yaml (JSON is valid YAML); by default for the test plugin's ``trip``."""
    config = {
        "default_domain": "trip",
        "sessions": sessions,
        "server": {"host": "127.0.0.1", "port": 0, **(server or {})},
        **top_level,
    }
    path.write_text(json.dumps(config, indent=2))
    return path


@dataclass
class ServerProcess:
    """One ``server_support.launch`` process (start it once); ``url`` once it is ready."""

    config: Path
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None
    """Default: ``python -m server_support.launch CONFIG`` (the test plugin, scripted model)."""
    process: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self, timeout_s: float = 30.0) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": str(TESTS_DIR), "TOOLWIRE_LOG_LEVEL": "info", **self.env}
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                self.command or [sys.executable, "-m", "server_support.launch", str(self.config)],
                stdout=log_file,
                stderr=log_file,
                env=env,
                cwd=self.config.parent,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"server exited with {code}:\n{self.log_text()}")
            event = self._listening_event()
            if event is not None and self._ready(f"http://127.0.0.1:{event['port']}"):
                self.url = f"http://127.0.0.1:{event['port']}"
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not become ready in {timeout_s} s:\n{self.log_text()}")

    def _listening_event(self) -> dict[str, Any] | None:
        for event in self.events():
            if event.get("event") == "server_listening":
                return event
        return None

    @staticmethod
    def _ready(url: str) -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def events(self) -> list[dict[str, Any]]:
        """The JSON log events written so far (other lines are skipped)."""
        events = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return events

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown, no cleanup, as when a machine dies."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
