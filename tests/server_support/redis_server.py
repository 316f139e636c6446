"""Start a private ``redis-server`` on a free loopback port for one test session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is not None:
        return binary
    reason = (
        "redis-server is not installed (Debian: apt-get install -y redis-server); "
        ".ci/run installs it"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}, and under CI=true the Redis tests must run")
    pytest.skip(reason)


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return True
        except OSError:
            time.sleep(0.05)
    return False


@contextmanager
def running_redis(workdir: Path) -> Iterator[str]:
    """A redis-server on 127.0.0.1 without persistence; yields its URL, stops it afterwards."""
    binary = _require_binary()
    for _attempt in range(3):
        port = free_port()
        process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             "--appendonly", "no", "--dir", str(workdir), "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if _wait_until_listening(port, process, time.monotonic() + 10):
                yield f"redis://127.0.0.1:{port}/0"
                return
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    pytest.fail("redis-server did not start on a free loopback port in three attempts")
