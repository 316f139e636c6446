"""The embedded model: assembling the GGUF, starting the server, and a few end-to-end answers.

Tests marked ``local_model`` start llama.cpp with the real 0.5B model (a few seconds each); CI
runs them. They keep to unambiguous questions a small model gets right.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from toolwire.errors import ConfigError, ModelError
from toolwire.llm import OpenAIGateway, Purpose, SuitabilityQuestion, create_language_model
from toolwire.llm import local as local_module
from toolwire.llm.local import MODEL_FILE, LocalModelServer, assemble_model
from toolwire.settings import LLMSettings


def test_assembly_refuses_parts_that_do_not_hash_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    for index, part in enumerate(parts):
        part.write_bytes(bytes([index]) * 1000)
    monkeypatch.setattr(local_module, "_part_paths", lambda: parts)
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match="sha256") as raised:
        assemble_model(cache)
    assert "force-reinstall" in str(raised.value)
    assert list(cache.iterdir()) == []  # nothing half-written is left behind


def test_a_missing_part_package_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_module, "PART_PACKAGES", ("toolwire_no_such_part_package",))
    with pytest.raises(ConfigError, match=r"toolwire\[local\]"):
        assemble_model(tmp_path)


def test_the_cache_directory_follows_toolwire_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path))
    assert local_module.model_cache_dir() == tmp_path / "models"


def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Three small parts standing in for the six model packages; returns their concatenation."""
    contents = [b"GGUF" + bytes([n]) * 5000 for n in range(3)]
    parts = []
    for number, content in enumerate(contents, start=1):
        part = tmp_path / f"part{number:02d}.bin"
        part.write_bytes(content)
        parts.append(part)
    monkeypatch.setattr(local_module, "_part_paths", lambda: parts)
    return b"".join(contents)


def test_assembly_writes_the_verified_model_once_and_then_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    monkeypatch.setattr(local_module, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(local_module, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"

    target = assemble_model(cache)

    assert target.read_bytes() == whole
    assert sorted(p.name for p in cache.iterdir()) == [MODEL_FILE, MODEL_FILE + ".sha256"]

    def parts_must_not_be_read() -> list[Path]:
        raise AssertionError("the verified model was assembled again")

    monkeypatch.setattr(local_module, "_part_paths", parts_must_not_be_read)
    assert assemble_model(cache) == target


def test_assembly_refuses_parts_of_the_wrong_size_and_keeps_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    monkeypatch.setattr(local_module, "MODEL_SIZE", len(whole) + 1)
    monkeypatch.setattr(local_module, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match=f"size {len(whole)} .* expected {len(whole) + 1}"):
        assemble_model(cache)
    assert list(cache.iterdir()) == []


# -- the server process, with a stand-in for llama.cpp's server --------------------------------

STAND_IN_SERVER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": []}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class StandInServer(LocalModelServer):
    """LocalModelServer running a Python script instead of llama-cpp-python's server."""

    def __init__(self, script: str, *, delay_s: float = 0.0, startup_timeout_s: float = 20) -> None:
        super().__init__(Path("unused.gguf"), startup_timeout_s=startup_timeout_s)
        self.script = script
        self.delay_s = delay_s

    def _command(self, model_path: Path, port: int) -> list[str]:
        return [sys.executable, "-c", self.script, str(port), str(self.delay_s)]

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._process


async def test_the_server_starts_on_a_free_port_after_its_health_check_and_is_reused() -> None:
    server = StandInServer(STAND_IN_SERVER, delay_s=0.5)
    try:
        url = await server.ensure_started()
        process = server.process
        assert process is not None and process.poll() is None
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/models")).status_code == 200
        assert await server.ensure_started() == url
        assert server.process is process  # reused, not started again
    finally:
        await server.aclose()
    assert process.poll() is not None  # stopped
    assert server.base_url is None


async def test_a_server_that_died_is_started_again() -> None:
    server = StandInServer(STAND_IN_SERVER)
    try:
        await server.ensure_started()
        first = server.process
        assert first is not None
        first.kill()
        first.wait()
        await server.ensure_started()
        assert server.process is not None and server.process is not first
        assert server.process.poll() is None
    finally:
        await server.aclose()


async def test_a_start_failure_reports_the_exit_code_and_the_output_tail() -> None:
    script = "import sys; print('loading model', file=sys.stderr); print('bad magic', file=sys.stderr); sys.exit(3)"  # noqa: E501
    server = StandInServer(script)
    with pytest.raises(ModelError, match="exited with code 3") as raised:
        await server.ensure_started()
    assert raised.value.detail.endswith("its last output:\nloading model\nbad magic")
    assert server.base_url is None and server.process is None


async def test_a_server_that_never_answers_is_stopped_after_the_startup_timeout() -> None:
    server = StandInServer(STAND_IN_SERVER, delay_s=30, startup_timeout_s=0.5)
    with pytest.raises(ModelError, match=r"did not answer on http://127\.0\.0\.1:\d+/v1 within"):
        await server.ensure_started()
    assert server.process is None


PARENT = """
import os, subprocess, sys, time
from functools import partial
from toolwire.llm.local import die_with_parent
child = subprocess.Popen(["sleep", "60"], preexec_fn=partial(die_with_parent, os.getpid()))
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux-only")
def test_the_server_process_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    parent.send_signal(signal.SIGKILL)  # no atexit handler runs
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid)


@pytest.mark.local_model
async def test_a_server_that_cannot_start_reports_its_output(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    server = LocalModelServer(bogus, startup_timeout_s=60)
    with pytest.raises(ModelError, match="exited with code") as raised:
        await server.ensure_started()
    assert "last output" in str(raised.value)
    assert server.base_url is None


class DrugPair(BaseModel):
    """The two drugs the user asks about."""

    drug_a: str
    drug_b: str


@pytest.fixture
async def embedded() -> AsyncIterator[OpenAIGateway]:
    model = create_language_model(LLMSettings(), environ={})
    assert isinstance(model, OpenAIGateway)
    yield model
    await model.aclose()


@pytest.mark.local_model
async def test_embedded_model_extracts_a_drug_pair(embedded: OpenAIGateway) -> None:
    pair = await embedded.extract(
        DrugPair, "Can I take ibuprofen together with warfarin?", purpose=Purpose.PARAMETERS
    )
    assert pair is not None
    assert {pair.drug_a.lower(), pair.drug_b.lower()} == {"ibuprofen", "warfarin"}


TOOLS = [
    SuitabilityQuestion(
        tool_name="weather.forecast", question="Does the task ask about the weather?"
    ),
    SuitabilityQuestion(
        tool_name="pharma.interactions",
        question="Does the task ask whether two medicines can be taken together?",
    ),
    SuitabilityQuestion(
        tool_name="finance.exchange",
        question="Does the task ask to convert money between currencies?",
    ),
]


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("message", "tool"),
    [
        ("Will it rain in Budapest tomorrow?", "weather.forecast"),
        ("Can I take ibuprofen together with warfarin?", "pharma.interactions"),
        ("How many euros is 100 US dollars?", "finance.exchange"),
    ],
)
async def test_embedded_model_picks_the_right_tool(
    embedded: OpenAIGateway, message: str, tool: str
) -> None:
    answers = await embedded.suitability(message, TOOLS)
    assert answers[tool] is True
