"""``toolwire mcp serve`` processes for the tests, and the SDK's client for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

TESTS_DIR = Path(__file__).resolve().parent.parent
TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))


def trip_config(tmp_path: Path, server: dict[str, Any] | None = None) -> Path:
    """The test plugin's ``trip`` domain, memory sessions, a free loopback port, ``server``."""
    path = tmp_path / "trip.yaml"
    settings = {"host": "127.0.0.1", "port": 0, **(server or {})}
    config = {"default_domain": "trip", "sessions": {"store": "memory"}, "server": settings}
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    return path


def launcher_env(**extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(TESTS_DIR), "TOOLWIRE_PLUGINS": "", **extra}


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers) as client,
        streamable_http_client(url, http_client=client) as streams,
        ClientSession(*streams) as session,
    ):
        await session.initialize()
        yield session


class McpHttpServer:
    """An MCP server over HTTP, started; ``url`` from its ``mcp_server_listening`` event.

    ``command`` defaults to ``mcp_support.serve_launch CONFIG --http`` (the ``trip`` test plugin
    and its deterministic model).
    """

    def __init__(
        self, config: Path, env: dict[str, str], command: list[str] | None = None
    ) -> None:
        self.log_path = config.with_suffix(".log")
        launcher = [sys.executable, "-m", "mcp_support.serve_launch", str(config), "--http"]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command or launcher,
                stdout=log, stderr=log, env={**os.environ, **env}, cwd=config.parent,
            )  # fmt: skip
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()
            for event in self.events():
                if event["event"] == "mcp_server_listening":
                    url: str = event["url"]
                    return url
            time.sleep(0.05)
        raise AssertionError(f"no mcp_server_listening event:\n{self.log_path.read_text()}")

    def events(self) -> list[dict[str, Any]]:
        """The JSON log events written so far (other lines, such as warnings, left out)."""
        events = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
        return events

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=15)


def post_ping(url: str, headers: dict[str, str]) -> httpx.Response:
    """An MCP ``ping`` as one plain HTTP request."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    return httpx.post(url, json=body, headers={**accept, **headers}, timeout=10)
