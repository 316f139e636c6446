"""The record of a ``toolwire model serve`` server, and finding it: whether a running embedded
model server may stand in for one a command would start itself.

``toolwire model serve`` (:mod:`toolwire.llm.model_service`) records the server it leaves running
in the model cache directory: a :class:`ServedModel` in ``model-server.json`` (model, context
window, threads, port, pid, start time). Every
:class:`~toolwire.llm.local.LocalModelServer` of the embedded provider asks
:func:`matching_server` before it starts a process of its own: a recorded server with its model,
window and threads whose process is alive and answers is used instead. A record whose process is
gone or is not the recorded server (a reused pid) is removed (``local_model_record_stale`` in the
log), never trusted. One whose process runs but does not answer on ``/health`` in time (still
loading, or a busy machine) is kept and not used (``local_model_server_not_answering``): the
process is still the record's, for ``toolwire model stop`` to end. Where there is no /proc to
read a command line from (macOS), ``toolwire model stop`` signals only a recorded process that
answers: a pid reused by another program is never ended on a record's word. The commands that
change the record hold ``model-server.lock`` while they do (:func:`model_server_lock`).

This module imports nothing of the embedded runtime: the model's server imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import structlog
from pydantic import BaseModel, ValidationError

from toolwire.errors import ToolwireError

log = structlog.get_logger(__name__)

RECORD_FILE = "model-server.json"
LOG_FILE = "model-server.log"
LOCK_FILE = "model-server.lock"
PROC = Path("/proc")
"""Where Linux shows each process's state and command line (absent on macOS)."""
HEALTH_TIMEOUT_S = 2.0
"""How long a recorded server may take to answer ``/health`` before it counts as not answering
(not used, its record kept)."""


class ModelServerBusyError(ToolwireError):
    """Another ``toolwire model`` command is starting or stopping the server right now."""

    def __init__(self, lock: Path) -> None:
        super().__init__(
            f"another toolwire model command is starting or stopping the model server (it holds "
            f"{lock}); wait for it to finish, then run: toolwire model status"
        )


class ServedModel(BaseModel):
    """The record of a running ``toolwire model serve`` server (``model-server.json``)."""

    model: str
    """The embedded model's name (``llm.local_model``), the name the server answers to."""
    window: int
    """Its context window in tokens (the model profile's ``context_window_tokens``)."""
    threads: int
    """``llm.local_threads``; 0: every core the server may use."""
    cache_mib: int
    port: int
    pid: int
    started_at: float
    """When its process started, in seconds since the epoch."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health"

    def matches(self, model: str, window: int, threads: int | None) -> bool:
        """Whether a server with these settings may be used in place of this one."""
        return (self.model, self.window, self.threads) == (model, window, threads or 0)

    def alive(self) -> bool:
        """Its process still runs and is not known to be another program (cheap, no request: a
        client checks it before each call, and a wrong guess costs it one failed call)."""
        return process_alive(self.pid) and _names_port(self.pid, self.port) is not False

    def stale_reason(self, *, to_stop: bool = False) -> str | None:
        """Why this record names no running server (None: its process runs and is the recorded
        server; whether it answers is :meth:`answers`).

        ``to_stop``: the caller signals the process. Where its command line cannot be read (no
        /proc: macOS), only an answer on the recorded port shows that the pid was not reused by
        another program, so a process that does not answer counts as not the server."""
        if not process_alive(self.pid):
            return f"its process {self.pid} is gone"
        names_port = _names_port(self.pid, self.port)
        if names_port is False:
            return f"process {self.pid} is no longer the model server"
        if names_port is None and to_stop and not self.answers():
            return (
                f"process {self.pid} cannot be told to be the model server (its command line "
                f"cannot be read) and does not answer on {self.health_url}: it is not signalled"
            )
        return None

    def answers(self) -> bool:
        """It answers ``/health`` within :data:`HEALTH_TIMEOUT_S` (llama.cpp says 503 there
        while it loads the model); asked only where the answer decides something (not by
        ``model stop``, nor for a server with other settings)."""
        try:
            answered = httpx.get(self.health_url, timeout=HEALTH_TIMEOUT_S).status_code == 200
        except httpx.HTTPError:
            answered = False
        if not answered:
            log.warning("local_model_server_not_answering", pid=self.pid, url=self.health_url)
        return answered

    def uptime(self) -> str:
        return duration(time.time() - self.started_at)

    def settings_text(self) -> str:
        return settings_text(self.model, self.window, self.threads)


def settings_text(model: str, window: int, threads: int | None) -> str:
    """``qwen2.5-coder-1.5b, window 8192 tokens, every core``."""
    cores = "every core" if not threads else "1 thread" if threads == 1 else f"{threads} threads"
    return f"{model}, window {window} tokens, {cores}"


def duration(seconds: float) -> str:
    """``42 s``, ``5 min``, ``2 h 5 min``, ``3 d 4 h``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole} s"
    minutes, hours = whole // 60, whole // 3600
    if hours == 0:
        return f"{minutes} min"
    if hours < 24:
        return f"{hours} h {minutes % 60} min"
    return f"{hours // 24} d {hours % 24} h"


def process_alive(pid: int) -> bool:
    """A process of this user with this pid runs (a zombie does not; another user's pid is not
    the server this user started). A child of this process that ended is reaped here."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except OSError:  # no such process, or another user's
        return False
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(") ", 1)[1][:1]
    except FileNotFoundError:
        return not (PROC / "self").exists()  # gone meanwhile; or no /proc (not Linux)
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X", "")


def _names_port(pid: int, port: int) -> bool | None:
    """The process's command line names the recorded port (a pid reused by another program
    does not); None where it cannot be read (no /proc: not Linux)."""
    try:
        arguments = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False if (PROC / "self").exists() else None  # gone meanwhile; or no /proc
    except OSError:
        return None
    return str(port).encode() in arguments


def _reap(pid: int) -> None:
    """Collect the exit status if the server is this process's child (``toolwire model serve``
    in a test, stopping what it started), so that it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def record_path(directory: Path) -> Path:
    return directory / RECORD_FILE


def log_path(directory: Path) -> Path:
    return directory / LOG_FILE


def lock_held(directory: Path) -> bool:
    """Whether another command holds :func:`model_server_lock` right now (it is starting or
    stopping the server). Creates nothing; a lock that cannot be opened counts as not held."""
    if not (directory / LOCK_FILE).exists():
        return False
    try:
        with model_server_lock(directory):
            return False
    except ModelServerBusyError:
        return True
    except OSError:
        return False


@contextlib.contextmanager
def model_server_lock(directory: Path) -> Iterator[None]:
    """Held while a command starts or stops the server; ModelServerBusyError when another holds
    it (never waits: a start may take minutes)."""
    lock = directory / LOCK_FILE
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ModelServerBusyError(lock) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Lookup:
    """What the record says: the running server, or none (and why a record was removed)."""

    running: ServedModel | None
    """The recorded server, its process alive (whether it answers: :meth:`ServedModel.answers`)."""
    removed: str | None = None
    """Why a stale record was removed (None: none was; a command holding the lock kept it)."""
    unreadable: str | None = None
    """The record that cannot be read, and why (it is left as it is)."""


def look_up(directory: Path, *, holding_lock: bool = False, to_stop: bool = False) -> Lookup:
    """The recorded server if its process runs; a stale record is removed, one that cannot be
    read is left as it is (it cannot be told from a record being written).

    ``holding_lock``: the caller holds :func:`model_server_lock`. Without it the record is
    removed only when no command holds the lock (one may be writing a new record). ``to_stop``:
    the caller signals the server found (:meth:`ServedModel.stale_reason`)."""
    path = record_path(directory)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Lookup(None)
    except (OSError, UnicodeDecodeError) as error:
        detail = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        log.warning("local_model_record_unreadable", path=str(path), detail=detail)
        return Lookup(None, unreadable=f"{path}: {detail}")
    try:
        record = ServedModel.model_validate_json(text)
    except ValidationError:
        reason: str | None = "it is not a record of a model server"
    else:
        reason = record.stale_reason(to_stop=to_stop)
        if reason is None:
            return Lookup(record)
    removed = _remove_stale(path, text, holding_lock=holding_lock)
    log.warning("local_model_record_stale", path=str(path), reason=reason, removed=removed)
    return Lookup(None, removed=reason if removed else None)


def _remove_stale(path: Path, text: str, *, holding_lock: bool) -> bool:
    """Remove the record if it still says ``text`` (another command may have replaced it);
    whether it was removed."""

    def remove() -> bool:
        try:
            if path.read_text(encoding="utf-8") != text:
                return False
            path.unlink()
        except (OSError, UnicodeDecodeError):
            return False
        return True

    if holding_lock:
        return remove()
    try:
        with model_server_lock(path.parent):
            return remove()
    except (ModelServerBusyError, OSError):
        return False  # a command is starting or stopping the server: the record is its to write


async def matching_server(
    model: str,
    window: int,
    threads: int | None,
    known: ServedModel | None,
    *,
    directory: Path,
) -> ServedModel | None:
    """A running ``toolwire model serve`` server with these settings recorded in ``directory``
    that answers, else None. ``known``: the one this client used so far, kept while its process
    runs (no file read, no request). Never raises: a record that cannot be read is no server."""
    if known is not None and known.alive():
        return known
    try:
        found = await asyncio.to_thread(look_up, directory)
    except (OSError, ValueError) as error:  # a cache directory that cannot be read
        log.warning("local_model_record_unreadable", detail=str(error))
        return None
    running = found.running
    if running is None or not running.matches(model, window, threads) or not running.answers():
        return None
    log.info("local_model_server_shared", base_url=running.base_url, pid=running.pid)
    return running
