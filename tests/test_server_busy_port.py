"""A port another process holds: ``toolwire serve`` and ``toolwire mcp serve --http`` say so in one
line naming the address and the option, exit 1, no traceback (issue 34, section 3; before, an
``OSError: [Errno 98]`` traceback)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_support.processes import write_config
from server_support.sockets import refused_start
from toolwire.errors import ConfigError
from toolwire.server.run import bind_socket

TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket of this test holds."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def busy(port: int) -> str:
    return (
        f"cannot listen on 127.0.0.1:{port}: port {port} is already in use by another process; "
        "stop it, or choose another port with --port (server.port; --port 0 picks a free one)"
    )


def test_binding_a_taken_port_is_a_config_error_of_one_line(taken_port: int) -> None:
    with pytest.raises(ConfigError) as raised:
        bind_socket("127.0.0.1", taken_port)

    assert str(raised.value) == busy(taken_port)


@pytest.mark.parametrize(
    "command", [["serve"], ["mcp", "serve", "--http"]], ids=["serve", "mcp-serve-http"]
)
def test_a_server_command_on_a_taken_port_says_so_in_one_line(
    tmp_path: Path, taken_port: int, command: list[str]
) -> None:
    config = write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        domains=[{"name": "desk"}],
        default_domain="desk",
    )
    line = refused_start([TOOLWIRE, *command, "--config", str(config), "--port", str(taken_port)])

    assert line == busy(taken_port)
