"""Sessions in this process's memory (tests, one-shot scripts)."""

from __future__ import annotations

import dataclasses
import time

from toolwire.conversation import Conversation
from toolwire.errors import SessionConflictError
from toolwire.sessions.base import (
    Clock,
    StoredSession,
    new_session_id,
    session_payload,
    stored_session,
    unknown_session,
)


@dataclasses.dataclass(frozen=True)
class _MemoryRow:
    domain: str
    task: str
    """The conversation as JSON (:func:`session_payload`), so a caller changing a loaded
    conversation never changes the stored one."""
    version: int
    expires: float
    owner: str | None


PURGE_FLOOR = 64
"""Rows the store holds before it first looks for expired ones."""


class MemorySessionStore:
    """Sessions in this process's memory (tests, one-shot scripts); gone when the process ends.

    Conversations are stored as JSON, so a caller changing a loaded one never changes the stored
    one.
    Expired rows are purged when a new session finds the store twice as full as after the last
    purge: conversations nobody answers cost memory for ``ttl_s``, not for the process's life.
    """

    description = "the memory session store of this process"
    """How an unknown session's error names this store: one of another process is not this one."""

    def __init__(self, ttl_s: float = 86_400, *, clock: Clock = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._rows: dict[str, _MemoryRow] = {}
        self._purge_at = PURGE_FLOOR

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        if len(self._rows) >= self._purge_at:
            self._purge_expired()
        session_id = new_session_id()
        row = _MemoryRow(domain, session_payload(conversation), 1, self._expiry(), owner)
        self._rows[session_id] = row
        return StoredSession(
            session_id=session_id,
            domain=domain,
            conversation=conversation,
            version=1,
            owner=owner,
        )

    async def load(self, session_id: str) -> StoredSession:
        row = self._row(session_id)
        return stored_session(session_id, row.domain, row.task, row.version, row.owner)

    async def save(self, session: StoredSession) -> StoredSession:
        row = self._row(session.session_id)
        if row.version != session.version:
            raise SessionConflictError(session.session_id, session.version, row.version)
        new_version = row.version + 1
        self._rows[session.session_id] = dataclasses.replace(
            row,
            task=session_payload(session.conversation),
            version=new_version,
            expires=self._expiry(),
        )
        return session.model_copy(update={"version": new_version})

    async def delete(self, session_id: str) -> None:
        self._rows.pop(session_id, None)

    async def aclose(self) -> None:
        self._rows.clear()

    def _expiry(self) -> float:
        return self._clock() + self.ttl_s

    def _purge_expired(self) -> None:
        """Drop every expired row (one pass; amortised over the creates that filled the store)."""
        now = self._clock()
        self._rows = {key: row for key, row in self._rows.items() if row.expires > now}
        self._purge_at = max(PURGE_FLOOR, 2 * len(self._rows))

    def _row(self, session_id: str) -> _MemoryRow:
        row = self._rows.get(session_id)
        if row is None or row.expires <= self._clock():
            self._rows.pop(session_id, None)
            raise unknown_session(self, session_id)
        return row
