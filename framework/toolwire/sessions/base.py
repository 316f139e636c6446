"""The session store contract: what every store keeps and the rows it reads back.

A conversation is a :class:`StoredSession`: its turns and, while a clarifying question waits, its
task tree (:class:`~toolwire.conversation.Conversation`); a store persists it between turns, so
any replica can take the next one. A turn is applied with optimistic concurrency: ``save``
succeeds only when the stored version is still the one the turn started from, so two replicas
continuing one conversation cannot both apply a turn. Every store reads its rows back through
:func:`stored_session`.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import AfterValidator, BaseModel, ValidationError

from toolwire.conversation import Conversation, waiting
from toolwire.errors import UnknownSessionError, UnreadableSessionError
from toolwire.task import TaskInfo

SESSION_ID_BYTES = 24
"""Entropy of a session id (``secrets.token_urlsafe``): 192 bits, unguessable."""

Clock = Callable[[], float]
"""Seconds, for expiry (a test passes its own)."""


class StoredSession(BaseModel):
    """A conversation, between two of its turns."""

    session_id: str
    """The conversation's id: every answer carries it, and a message sent with it continues the
    conversation."""
    domain: str
    conversation: Conversation
    version: int
    """Starts at 1 and grows by one with every applied round."""
    owner: str | None = None
    """The API key (its name) that started the conversation; only it may continue it. None:
    started without authentication."""

    @property
    def task(self) -> TaskInfo | None:
        """The task tree waiting for the reply to its clarifying question (None: none waits)."""
        return self.conversation.pending


@runtime_checkable
class SessionStore(Protocol):
    """Persistence of conversations between their turns, safe to share between processes.

    A store writes a conversation as :func:`session_payload` gives it and reads it back through
    :func:`stored_session`; every write renews its idle time-to-live (``sessions.ttl_s``). A store
    that has a ``description`` ("the SQLite session store"), a ``location`` (its file) and a
    ``ttl_s`` attribute is named by them in the error of an unknown id (:func:`unknown_session`)."""

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        """Store a new conversation under a fresh, unguessable session id (version 1), bound to
        ``owner`` (the API key's name that started it)."""
        ...

    async def load(self, session_id: str) -> StoredSession:
        """The stored conversation; ``UnknownSessionError`` when there is none (or it expired),
        ``UnreadableSessionError`` when it no longer reads."""
        ...

    async def save(self, session: StoredSession) -> StoredSession:
        """Store ``session.conversation`` if the stored version is still ``session.version``.

        Returns the session with its new version; raises ``SessionConflictError`` when another
        round was applied first and ``UnknownSessionError`` when the session is gone.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a conversation (no error when it is already gone)."""
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
            f"{SESSION_ID_MAX_CHARS} characters): send back the session_id of an answer of the "
            "conversation"
        )
    return value


SessionIdText = Annotated[str, AfterValidator(checked_session_id)]
"""A request field carrying a session id (``POST /v1/ask``, the MCP ``<domain>.ask`` tool)."""


SESSION_FORMAT = 3
"""The format of a stored conversation: ``{"format": 3, "conversation": <Conversation>}``, its
waiting task (if any) with its run state under ``run``. Format 2 (toolwire before conversations
were kept: ``{"format": 2, "task": <the root TaskInfo>}``, a clarification waiting) is read as a
conversation without earlier turns. Format 1 (the bare task, the orchestrator's fields beside the
SPEC's) is refused with a clear message."""


class SessionPayload(BaseModel):
    """What a store keeps of a conversation."""

    format: Literal[3]
    conversation: Conversation


class TaskPayload(BaseModel):
    """A conversation stored by an earlier toolwire (format 2): a task waiting for its reply."""

    format: Literal[2]
    task: TaskInfo


def session_payload(conversation: Conversation) -> str:
    """The conversation as a store writes it (JSON, :data:`SESSION_FORMAT`)."""
    return SessionPayload(format=SESSION_FORMAT, conversation=conversation).model_dump_json()


def task_payload(task: TaskInfo) -> str:
    """A conversation whose only state is a task waiting for its reply, as a store writes it."""
    return session_payload(waiting(task))


def _conversation_of(payload_json: str) -> Conversation:
    """The stored conversation of either readable format (``ValidationError`` if neither)."""
    try:
        return SessionPayload.model_validate_json(payload_json).conversation
    except ValidationError:
        try:
            return waiting(TaskPayload.model_validate_json(payload_json).task)
        except ValidationError:
            pass
        raise


def stored_session(
    session_id: str, domain: object, payload_json: object, version: object, owner: object = None
) -> StoredSession:
    """A stored row back as a ``StoredSession``; every store reads its rows through this.

    A row that no longer reads (a conversation that does not parse, a version that is not a
    positive whole number, a missing column: written by an incompatible version, or damaged) is an
    ``UnreadableSessionError`` naming the session and the damaged column, not a bare validation
    error; a conversation stored in another format says which. It carries the row's owner and
    domain, so that the conversation service tells only the owner (any other caller gets the
    unknown session an unknown id gets). Only that conversation is lost: the store and its other
    conversations are not touched.
    """
    problems: list[str] = []
    if not isinstance(domain, str) or not domain:
        problems.append(f"its domain is {_shown(domain)}")
    if owner is not None and (not isinstance(owner, str) or not owner):
        problems.append(f"its owner is {_shown(owner)}")
    stored_version = _stored_version(version)
    if stored_version is None:
        problems.append(f"its version is {_shown(version)}, not a positive whole number")
    conversation: Conversation | None = None
    if not isinstance(payload_json, str):
        problems.append(f"its conversation is {_shown(payload_json)}")
    else:
        try:
            conversation = _conversation_of(payload_json)
        except ValidationError as error:
            why = _other_format(payload_json)
            if why is not None:
                raise UnreadableSessionError(
                    f"the stored conversation {session_id!r} {why}: it cannot be resumed; start "
                    "a new conversation",
                    owner=owner,
                    domain=domain,
                ) from None
            problems.append(f"{error.error_count()} problem(s) in its conversation")
    if problems or conversation is None or stored_version is None:
        raise UnreadableSessionError(
            f"the stored conversation {session_id!r} cannot be read ({'; '.join(problems)}); "
            "it was written by an incompatible version or damaged: start a new conversation",
            owner=owner,
            domain=domain,
        )
    return StoredSession(
        session_id=session_id,
        domain=str(domain),
        conversation=conversation,
        version=stored_version,
        owner=owner if isinstance(owner, str) else None,
    )


def unknown_session(store: object, session_id: str, *, keyed: bool = True) -> UnknownSessionError:
    """The error for an id ``store`` holds no conversation under, naming the store
    (``description``) and its ``ttl_s`` when it has them (toolwire's stores do).

    A store raises it for an unknown or expired id, and the conversation service for another
    caller's conversation: built by this one function, the two cannot be told apart.
    ``keyed``: the caller has an API key (without one, no other key's conversation is meant).
    """
    description = getattr(store, "description", None)
    location = getattr(store, "location", None)
    ttl_s = getattr(store, "ttl_s", None)
    return UnknownSessionError(
        session_id,
        store=description if isinstance(description, str) else None,
        location=location if isinstance(location, str) else None,
        ttl_s=ttl_s if isinstance(ttl_s, int | float) else None,
        keyed=keyed,
    )


def _other_format(task_json: str) -> str | None:
    """Why a conversation stored in a format this toolwire does not read cannot be resumed,
    naming the format (None: it is in a format read here, or not a stored format at all)."""
    try:
        stored = json.loads(task_json)
    except ValueError:
        return None  # not JSON at all: damaged
    if not isinstance(stored, dict):
        return None
    found = stored.get("format", 1 if "task_prompt" in stored else None)
    if found is None or found in (2, SESSION_FORMAT):
        return None
    if found == 1:
        return (
            "was saved by an earlier toolwire (session format 1, before the orchestrator's state "
            "moved to TaskInfo.run)"
        )
    return f"was saved in session format {_shown(found)}; this toolwire reads {SESSION_FORMAT}"


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
