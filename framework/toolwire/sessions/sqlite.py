"""Sessions in a SQLite file: the embedded default, shared by processes on one machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import structlog

from toolwire.conversation import Conversation
from toolwire.errors import SessionConflictError, SessionStoreUnavailableError
from toolwire.sessions.base import (
    Clock,
    StoredSession,
    new_session_id,
    session_payload,
    stored_session,
    unknown_session,
)

log = structlog.get_logger(__name__)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolwire_sessions (
    session_id TEXT PRIMARY KEY,
    domain TEXT NOT NULL,
    task TEXT NOT NULL,
    version INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    owner TEXT
)
"""
_OWNER_COLUMN = "ALTER TABLE toolwire_sessions ADD COLUMN owner TEXT"
"""Databases written before sessions had owners get the column (NULL: no owner)."""
_EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS toolwire_sessions_expiry ON toolwire_sessions (expires_at)"
)
"""Expired rows are purged on every write: without it, each purge scans the table."""
_PURGE = "DELETE FROM toolwire_sessions WHERE expires_at <= ?"


class SQLiteSessionStore:
    """Sessions in a SQLite file (the embedded default): they survive a restart of the process
    and are shared by processes on one machine.

    Operations run in a worker thread on one connection per store (stdlib ``sqlite3``); a save is
    one ``UPDATE ... WHERE version = ?`` (compare-and-set), so of two processes saving the same
    round exactly one wins. Expired rows (``ttl_s`` after their last turn) are treated as gone,
    and deleted from the file by the next create or save (one indexed ``DELETE`` in the write's
    own transaction): every turn stores, so a conversation's text does not outlive ``ttl_s`` by
    long on a file in use. A load stays a read that takes no write lock, so it (and the
    server's readiness probe) never waits behind another process's write.
    """

    def __init__(
        self, path: str | Path, ttl_s: float = 86_400, *, clock: Clock = time.time
    ) -> None:
        self.path = Path(path).absolute()
        """Absolute: the file the store was made for, whatever the working directory later."""
        self.ttl_s = ttl_s
        self.description = "the SQLite session store"
        """How an unknown session's error names this store (its file is ``location``, which a
        message sent to a remote caller must not show)."""
        self.location = str(self.path)
        """The file, which the command line shows beside an unknown session's error: a user who
        ran from another working directory sees that another file was opened."""
        self._clock = clock
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        session_id = new_session_id()
        task_json = session_payload(conversation)

        def insert(connection: sqlite3.Connection) -> None:
            now = self._purge(connection)
            connection.execute(
                "INSERT INTO toolwire_sessions (session_id, domain, task, version, expires_at, "
                "owner) VALUES (?, ?, ?, 1, ?, ?)",
                (session_id, domain, task_json, now + self.ttl_s, owner),
            )

        await self._run(insert)
        return StoredSession(
            session_id=session_id,
            domain=domain,
            conversation=conversation,
            version=1,
            owner=owner,
        )

    async def load(self, session_id: str) -> StoredSession:
        def select(connection: sqlite3.Connection) -> tuple[object, ...] | None:
            row: tuple[object, ...] | None = connection.execute(
                "SELECT domain, task, version, owner FROM toolwire_sessions "
                "WHERE session_id = ? AND expires_at > ?",
                (session_id, self._clock()),
            ).fetchone()
            return row

        row = await self._run(select, write=False)
        if row is None:
            raise unknown_session(self, session_id)
        return stored_session(session_id, *row)

    async def save(self, session: StoredSession) -> StoredSession:
        task_json = session_payload(session.conversation)

        def update(connection: sqlite3.Connection) -> int | None:
            now = self._purge(connection)
            cursor = connection.execute(
                "UPDATE toolwire_sessions SET task = ?, version = version + 1, expires_at = ? "
                "WHERE session_id = ? AND version = ? AND expires_at > ?",
                (task_json, now + self.ttl_s, session.session_id, session.version, now),
            )
            if cursor.rowcount == 1:
                return None
            row = connection.execute(
                "SELECT version FROM toolwire_sessions WHERE session_id = ? AND expires_at > ?",
                (session.session_id, now),
            ).fetchone()
            return -1 if row is None else int(row[0])

        stored_version = await self._run(update)
        if stored_version == -1:
            raise unknown_session(self, session.session_id)
        if stored_version is not None:
            raise SessionConflictError(session.session_id, session.version, stored_version)
        return session.model_copy(update={"version": session.version + 1})

    async def delete(self, session_id: str) -> None:
        def remove(connection: sqlite3.Connection) -> None:
            connection.execute("DELETE FROM toolwire_sessions WHERE session_id = ?", (session_id,))

        await self._run(remove)

    def _purge(self, connection: sqlite3.Connection) -> float:
        """Delete the expired rows (in the caller's write transaction); returns the time it
        purged at, the ``now`` of the write."""
        now = self._clock()
        connection.execute(_PURGE, (now,))
        return now

    async def aclose(self) -> None:
        """Close the connection (the next operation opens a new one)."""
        await asyncio.to_thread(self._close)

    async def _run(self, operation: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Run ``operation`` in a worker thread; a write holds the file's write lock throughout.

        A read is one statement in autocommit mode: under WAL it never takes the write lock, so
        loads (and the server's readiness probe) do not queue behind other processes' writes.
        """
        return await asyncio.to_thread(self._in_transaction, operation, write)

    def _in_transaction(self, operation: Callable[[sqlite3.Connection], T], write: bool) -> T:
        with self._lock:
            connection: sqlite3.Connection | None = None
            try:
                connection = self._open()
                if not write:
                    return operation(connection)
                connection.execute("BEGIN IMMEDIATE")
                result = operation(connection)
                connection.execute("COMMIT")
                return result
            except (sqlite3.Error, OSError) as error:
                raise SessionStoreUnavailableError(
                    f"session store {str(self.path)!r} failed: {error}; check that the file is "
                    "writable and not corrupted (sessions.path in the configuration)"
                ) from error
            finally:
                if connection is not None and connection.in_transaction:
                    self._abandon(connection)

    def _abandon(self, connection: sqlite3.Connection) -> None:
        """End a transaction that failed, COMMIT included: left open, it would hold the file's
        write lock (blocking every other process) and make each later BEGIN fail. A connection
        that cannot even roll back is closed; the next operation opens a fresh one."""
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            connection.close()
            self._connection = None

    def _open(self) -> sqlite3.Connection:
        """The store's one connection, opened on first use (closing the last connection of a
        WAL database checkpoints it with an fsync, so connections are not opened per call)."""
        if self._connection is None:
            _private_database(self.path)
            connection = sqlite3.connect(
                self.path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            try:
                # WAL with synchronous=NORMAL: a commit survives a crash of the process without
                # an fsync per round; readers never block the writer.
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(_SCHEMA)
                connection.execute(_EXPIRY_INDEX)
                _add_owner_column(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _add_owner_column(connection: sqlite3.Connection) -> None:
    """Give a database of an earlier version the ``owner`` column (another process may be
    adding it at the same moment: then it is there, which is all that is wanted)."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(toolwire_sessions)")}
    if "owner" in columns:
        return
    try:
        connection.execute(_OWNER_COLUMN)
    except sqlite3.OperationalError as error:
        if "duplicate column" not in str(error):
            raise


def _private_database(path: Path) -> None:
    """Create the database file 0600 in a 0700 directory (conversations are private).

    SQLite gives the ``-wal`` and ``-shm`` files the database's permissions. A directory this
    creates is 0700; an existing directory is left as it is (it may be shared on purpose). A
    database (or its ``-wal``/``-shm``) left group- or world-readable by an earlier version is
    tightened to 0600.
    """
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            try:
                file.chmod(mode & 0o700)
            except PermissionError:  # not ours to change: say so, and go on
                log.warning("session_store_not_private", path=str(file), mode=oct(mode))
                continue
            log.warning(
                "session_store_permissions_tightened",
                path=str(file),
                mode=oct(mode),
                new_mode=oct(mode & 0o700),
            )
