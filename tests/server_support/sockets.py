"""Raw sockets to a server under test (clients that stall), and the refusal to start it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

EXPOSURE_REFUSAL = (
    "refusing to serve {path} without authentication on 0.0.0.0, an address other hosts can "
    "reach: set TOOLWIRE_API_TOKEN (server.token_env) or server.api_keys to require a bearer "
    "token, listen on 127.0.0.1 (--host), or pass --insecure-no-auth if the network in front "
    "of this server authenticates callers"
)
"""What ``toolwire serve`` (``/v1``) and ``toolwire mcp serve --http`` (``/mcp``) say when
asked to listen on 0.0.0.0 without an API key."""


def connect(url: str) -> socket.socket:
    """A plain TCP connection to the server at ``url`` (its path is ignored)."""
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed."""
    received = b""
    while chunk := sock.recv(65_536):
        received += chunk
    return received, time.monotonic()


@dataclass(frozen=True)
class Closed:
    """What the server sent to a request it then closed the connection on."""

    head: bytes
    body: bytes
    after_s: float
    """Seconds from sending the request to the connection's close."""

    def body_timeout(self) -> dict[str, Any]:
        """The details of a ``body_timeout`` error, checked to be a 408 that closed."""
        assert self.head.startswith(b"HTTP/1.1 408 "), self.head
        assert b"connection: close" in self.head.lower()
        error = json.loads(self.body)
        assert error["error"] == "body_timeout"
        details: dict[str, Any] = error["details"]
        return details


def send_until_closed(url: str, request: bytes) -> Closed:
    """Send ``request`` (maybe incomplete) and read until the server closes the connection."""
    with connect(url) as sock:
        sock.sendall(request)
        sent = time.monotonic()
        received, closed = read_until_closed(sock)
    head, _, body = received.partition(b"\r\n\r\n")
    return Closed(head, body, closed - sent)


def refused_start(command: list[str]) -> str:
    """Run a server command that must refuse to start: exit 1 and no traceback; the last line
    of its stderr."""
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={"TOOLWIRE_PLUGINS": "", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stderr
    assert "listening" not in result.stderr and "Traceback" not in result.stderr
    return result.stderr.splitlines()[-1]
