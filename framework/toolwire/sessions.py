"""Where a conversation's root task waits between clarification rounds.

A round is applied with optimistic concurrency: ``save`` succeeds only when the stored version is
still the one the round started from, so two replicas resuming one session cannot both apply it.
Implementations: in-memory (tests), SQLite (the embedded default), Redis (``toolwire[redis]``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from toolwire.task import TaskInfo


class StoredSession(BaseModel):
    """A conversation waiting for the user's reply."""

    session_id: str
    domain: str
    task: TaskInfo
    version: int
    """Starts at 1 and grows by one with every applied round."""


@runtime_checkable
class SessionStore(Protocol):
    """Persistence of waiting conversations, safe to share between processes."""

    async def create(self, domain: str, task: TaskInfo) -> StoredSession:
        """Store a new conversation under a fresh, unguessable session id (version 1)."""
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
