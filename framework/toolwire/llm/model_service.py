"""The embedded model kept running between commands: ``toolwire model serve`` and ``stop``, and
the warm-up that has a new server read toolwire's fixed text before the first question.

``toolwire model serve`` starts the embedded model's server (:class:`DetachedModelServer`: the same
launcher as :class:`~toolwire.llm.local.LocalModelServer`, in a session of its own so that it
outlives the command), records it in the model cache directory as soon as its process runs
(``model-server.json``, written atomically; :mod:`toolwire.llm.served_model` reads it), its
output in ``model-server.log``, and waits until it answers and has read toolwire's fixed system
text (:func:`warm_up`). ``toolwire model stop`` ends it (:func:`stop_served`) and removes both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import structlog

from toolwire.errors import ModelError
from toolwire.llm.local import (
    LocalModelServer,
    LocalModelSpec,
    _replacing,
    local_model_spec,
    model_cache_dir,
)
from toolwire.llm.served_model import (
    ServedModel,
    log_path,
    process_alive,
    record_path,
    settings_text,
)
from toolwire.settings import LLMSettings

log = structlog.get_logger(__name__)

WARM_UP_TIMEOUT_S = 120.0
"""The most the warm-up request may take (the model's first read of toolwire's fixed text)."""
STOP_TIMEOUT_S = 10.0
"""How long ``toolwire model stop`` waits after SIGTERM before it sends SIGKILL."""
WARM_UP_TASK = "Reply with OK."
"""The warm-up request's user message: a few tokens after toolwire's fixed system text."""


def write_record(record: ServedModel, directory: Path) -> None:
    """Atomically: a temporary file beside it, synced, renamed into place."""
    path = record_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(path) as out:
        out.write(record.model_dump_json(indent=2).encode("utf-8") + b"\n")


# -- warming up -------------------------------------------------------------------------------


async def warm_up(base_url: str, model: str, timeout_s: float = WARM_UP_TIMEOUT_S) -> float:
    """One tiny request, so that the server has its weights in memory and toolwire's fixed
    system text (:data:`toolwire.llm.prompts.RULES`, the start of every call's prompt) in its
    prompt cache before the first question; the seconds it took. ModelError when it fails."""
    from toolwire.llm.prompts import RULES

    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": RULES},
            {"role": "user", "content": WARM_UP_TASK},
        ],
        "max_tokens": 1,
        "temperature": 0,
    }
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.post(f"{base_url}/chat/completions", json=body)
        response.raise_for_status()
    except httpx.HTTPStatusError as error:
        answer = " ".join(error.response.text.split())[:300]
        reason = f"HTTP {error.response.status_code} {answer}".rstrip()
        raise ModelError(
            "local", f"the embedded model server at {base_url} failed its warm-up request: {reason}"
        ) from error
    except httpx.HTTPError as error:
        reason = str(error) or type(error).__name__
        raise ModelError(
            "local", f"the embedded model server at {base_url} failed its warm-up request: {reason}"
        ) from error
    seconds = round(time.perf_counter() - started, 2)
    log.info("local_model_warmed", base_url=base_url, seconds=seconds)
    return seconds


# -- toolwire model serve / stop --------------------------------------------------------------


_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []
"""The servers this process started and left running (kept, so that no ``Popen`` finaliser
warns that its process still runs: that is the point)."""


class DetachedModelServer(LocalModelServer):
    """``toolwire model serve``'s server: started in a session of its own (no signal of the
    command's terminal, no death with the command), its output in ``model-server.log``."""

    shares_running_server = False
    """It is the shared server: it never looks for a record itself."""

    def __init__(
        self,
        spec: LocalModelSpec | None = None,
        *,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        threads: int | None = None,
        cache_mib: int = 512,
        startup_timeout_s: float = 180.0,
        directory: Path | None = None,
    ) -> None:
        super().__init__(
            spec,
            model_path=model_path,
            n_ctx=n_ctx,
            threads=threads,
            cache_mib=cache_mib,
            startup_timeout_s=startup_timeout_s,
        )
        self.directory = directory or model_cache_dir()
        self.record: ServedModel | None = None
        """The record written for the process it started (:meth:`_wait_until_healthy`)."""

    def settings_text(self) -> str:
        return settings_text(self.spec.name, self._n_ctx, self._threads)

    def matches(self, record: ServedModel) -> bool:
        return record.matches(self.spec.name, self._n_ctx, self._threads)

    async def _wait_until_healthy(self, process: subprocess.Popen[bytes], base_url: str) -> None:
        """Record the server before waiting for it: the process lives in a session of its own,
        so a command ended while the model loads (SIGTERM, a closed terminal, SIGKILL) cannot
        stop it, and leaves it recorded, for ``status`` to show and ``stop`` to end, instead of
        running unknown to every command. The caller holds the lock; :meth:`_stop` removes the
        record of a start that fails."""
        self.record = ServedModel(
            model=self.spec.name,
            window=self._n_ctx,
            threads=self._threads or 0,
            cache_mib=self._cache_mib,
            port=urlsplit(base_url).port or 0,
            pid=process.pid,
            started_at=time.time(),
        )
        try:
            write_record(self.record, self.directory)
        except OSError as error:
            raise ModelError(
                "local",
                f"cannot record the model server in {record_path(self.directory)}: "
                f"{error.strerror or error}",
            ) from error
        await super()._wait_until_healthy(process, base_url)

    def _stop(self) -> None:
        """Stop the process this command started, then remove its record (a command killed in
        between leaves a record whose process is gone: stale, removed by the next look)."""
        started = self._process is not None
        super()._stop()
        if started:
            record_path(self.directory).unlink(missing_ok=True)

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        path = log_path(self.directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._stderr_path = path
        with path.open("wb") as output:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
        return self._process

    async def serve(self) -> ServedModel:
        """Start the server (assembling the model first if needed; recorded as soon as its
        process runs), warm it up, and leave it running. A start that fails, or is interrupted
        (Ctrl-C), leaves no process and no record behind."""
        try:
            base_url = await self.ensure_started()
            process, record = self._process, self.record
            if process is None or record is None:  # ensure_started spawns here; for the types
                raise ModelError("local", "the embedded model server did not start")
            await warm_up(base_url, self.spec.name)
        except BaseException:
            self._stop()
            raise
        _LEFT_RUNNING.append(process)
        self._process, self._base_url, self._stderr_path = None, None, None
        log.info("local_model_server_detached", base_url=base_url, pid=process.pid)
        return record


def detached_server(settings: LLMSettings, window: int) -> DetachedModelServer:
    """``toolwire model serve``'s server for these settings and the model profile's window."""
    return DetachedModelServer(
        local_model_spec(settings.local_model),
        n_ctx=window,
        threads=settings.local_threads,
        cache_mib=settings.local_prompt_cache_mib,
    )


def stop_served(record: ServedModel, directory: Path) -> None:
    """Stop the recorded server (SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`) and remove
    its record and log. The caller holds :func:`model_server_lock`; ModelError when the process
    does not end."""
    if record.alive():
        _signal_and_wait(record.pid, signal.SIGTERM, STOP_TIMEOUT_S)
        if process_alive(record.pid):
            _signal_and_wait(record.pid, signal.SIGKILL, 5.0)
        if process_alive(record.pid):
            raise ModelError(
                "local", f"the model server (pid {record.pid}) did not end after SIGKILL"
            )
    record_path(directory).unlink(missing_ok=True)
    log_path(directory).unlink(missing_ok=True)
    log.info("local_model_server_stopped", pid=record.pid)


def _signal_and_wait(pid: int, signum: int, timeout_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
    deadline = time.monotonic() + timeout_s
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
