"""The session store contract: what every store keeps and the rows it reads back.

A conversation waiting for the user's reply is a :class:`StoredSession`; a store persists it
between clarification rounds. A round is applied with optimistic concurrency: ``save`` succeeds
only when the stored version is still the one the round started from, so two replicas resuming one
session cannot both apply it. Every store reads its rows back through :func:`stored_session`.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import AfterValidator, BaseModel, ValidationError

from toolwire.errors import SessionError
from toolwire.task import TaskInfo

SESSION_ID_BYTES = 24
"""Entropy of a session id (``secrets.token_urlsafe``): 192 bits, unguessable."""

Clock = Callable[[], float]
"""Seconds, for expiry (a test passes its own)."""


class StoredSession(BaseModel):
    """A conversation waiting for the user's reply."""

    session_id: str
    domain: str
    task: TaskInfo
    version: int
    """Starts at 1 and grows by one with every applied round."""
    owner: str | None = None
    """The API key (its name) that started the conversation; only it may continue it. None:
    started without authentication."""


@runtime_checkable
class SessionStore(Protocol):
    """Persistence of waiting conversations, safe to share between processes."""

    async def create(self, domain: str, task: TaskInfo, owner: str | None = None) -> StoredSession:
        """Store a new conversation under a fresh, unguessable session id (version 1), bound to
        ``owner`` (the API key's name that started it)."""
        ...

    async def load(self, session_id: str) -> StoredSession:
        """The stored conversation; ``UnknownSessionError`` when there is none."""
        ...

    async def save(self, session: StoredSession) -> StoredSession:
        """Store ``session.task`` if the stored version is still ``session.version``.

        Returns the session with its new version; raises ``SessionConflictError`` when another
        round was applied first and ``UnknownSessionError`` when the session is gone.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a finished conversation (no error when it is already gone)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def new_session_id() -> str:
    """A fresh, unguessable session id."""
    return secrets.token_urlsafe(SESSION_ID_BYTES)


SESSION_ID_MAX_CHARS = 256
_SESSION_ID = re.compile(rf"[!-~]{{1,{SESSION_ID_MAX_CHARS}}}")


def checked_session_id(value: str) -> str:
    """A session id a caller sent back, refused unless it has the shape of one: printable ASCII
    without spaces, at most :data:`SESSION_ID_MAX_CHARS` characters. toolwire's stores issue 32
    URL-safe characters; a store a plugin registers must issue ids of this shape too. Anything
    else (control characters, text that is not UTF-8, megabytes) never reaches a store."""
    if _SESSION_ID.fullmatch(value) is None:
        raise ValueError(
            "this is not a session id (a session id is printable ASCII without spaces, at most "
            f"{SESSION_ID_MAX_CHARS} characters): send back the session_id of the answer that "
            "asked the clarifying question"
        )
    return value


SessionIdText = Annotated[str, AfterValidator(checked_session_id)]
"""A request field carrying a session id (``POST /v1/ask``, the MCP ``<domain>.ask`` tool)."""


SESSION_FORMAT = 2
"""The format of a stored task: ``{"format": 2, "task": <the root TaskInfo>}``, each task with
its run state under ``run``. Format 1 (toolwire before the run state was kept apart: the bare
task, the orchestrator's fields beside the SPEC's) is refused with a clear message."""


class TaskPayload(BaseModel):
    """What a store keeps of a conversation's tasks: the root task with its run state."""

    format: Literal[2]
    task: TaskInfo


def task_payload(task: TaskInfo) -> str:
    """The root task as a store writes it (JSON, :data:`SESSION_FORMAT`)."""
    return TaskPayload(format=SESSION_FORMAT, task=task).model_dump_json()


def stored_session(
    session_id: str, domain: object, task_json: object, version: object, owner: object = None
) -> StoredSession:
    """A stored row back as a ``StoredSession``; every store reads its rows through this.

    A row that no longer reads (a task that does not parse, a version that is not a positive
    whole number, a missing column: written by an incompatible version, or damaged) is a
    ``SessionError`` naming the session and the damaged column, not a bare validation error; a
    task stored in another format says which.
    """
    problems: list[str] = []
    if not isinstance(domain, str) or not domain:
        problems.append(f"its domain is {_shown(domain)}")
    if owner is not None and (not isinstance(owner, str) or not owner):
        problems.append(f"its owner is {_shown(owner)}")
    stored_version = _stored_version(version)
    if stored_version is None:
        problems.append(f"its version is {_shown(version)}, not a positive whole number")
    task: TaskInfo | None = None
    if not isinstance(task_json, str):
        problems.append(f"its task is {_shown(task_json)}")
    else:
        try:
            task = TaskPayload.model_validate_json(task_json).task
        except ValidationError as error:
            _refuse_other_format(session_id, task_json)
            problems.append(f"{error.error_count()} problem(s) in its task")
    if problems or task is None or stored_version is None:
        raise SessionError(
            f"the stored conversation {session_id!r} cannot be read ({'; '.join(problems)}); "
            "it was written by an incompatible version or damaged: start a new conversation"
        )
    return StoredSession(
        session_id=session_id,
        domain=str(domain),
        task=task,
        version=stored_version,
        owner=owner if isinstance(owner, str) else None,
    )


def _refuse_other_format(session_id: str, task_json: str) -> None:
    """A task stored in a format this toolwire does not read is refused, saying which format."""
    try:
        stored = json.loads(task_json)
    except ValueError:
        return  # not JSON at all: damaged
    if not isinstance(stored, dict):
        return
    found = stored.get("format", 1 if "task_prompt" in stored else None)
    if found is None or found == SESSION_FORMAT:
        return
    if found == 1:
        why = (
            "was saved by an earlier toolwire (session format 1, before the orchestrator's state "
            "moved to TaskInfo.run)"
        )
    else:
        why = f"was saved in session format {_shown(found)}; this toolwire reads {SESSION_FORMAT}"
    raise SessionError(
        f"the stored conversation {session_id!r} {why}: it cannot be resumed; start a new "
        "conversation"
    )


def _stored_version(value: object) -> int | None:
    """A stored version as an int: a whole number from 1 up (Redis hands it over as text)."""
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    if isinstance(value, str) and value.isascii() and value.isdecimal():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def _shown(value: object) -> str:
    """A damaged stored value for an error message: its type and a short repr."""
    if value is None:
        return "missing"
    text = repr(value)
    return f"{text[:40]}… ({type(value).__name__})" if len(text) > 40 else text
