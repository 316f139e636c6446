"""Where a conversation waits between its turns (its history, and a task waiting for a reply).

The contract is in ``base``; the stores are in ``memory`` (tests), ``sqlite`` (the embedded
default) and ``redis`` (``toolwire[redis]``, imported only when used); ``factory`` makes the one
``sessions.store`` names.
"""

from toolwire.sessions.base import (
    SESSION_FORMAT,
    SessionStore,
    StoredSession,
    new_session_id,
    session_payload,
    stored_session,
    task_payload,
)
from toolwire.sessions.factory import create_session_store
from toolwire.sessions.memory import MemorySessionStore
from toolwire.sessions.sqlite import SQLiteSessionStore

__all__ = [
    "SESSION_FORMAT",
    "MemorySessionStore",
    "SQLiteSessionStore",
    "SessionStore",
    "StoredSession",
    "create_session_store",
    "new_session_id",
    "session_payload",
    "stored_session",
    "task_payload",
]
