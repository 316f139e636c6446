"""What a caller is told when a conversation cannot be continued.

An unknown, expired or another caller's id reads alike, even when that conversation is damaged
(only its owner learns of the damage), and names the store and its time-to-live; a conflict says
that the other request's turn was stored; a store that fails while storing a turn does not claim
that nothing was changed; and the SQLite file forgets expired conversations without waiting for a
new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from orchestration_kit import Query, QueryTool
from server_support.redis_server import running_redis
from toolwire import SessionError, TaskInfo, UnknownSessionError
from toolwire.conversation import Conversation, waiting
from toolwire.errors import (
    SessionConflictError,
    SessionStoreUnavailableError,
    UnreadableSessionError,
)
from toolwire.orchestrator import ConversationService
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.registry import DomainSpec
from toolwire.server.problems import api_error_for, toolwire_error_status
from toolwire.sessions import MemorySessionStore, SessionStore, SQLiteSessionStore, StoredSession
from toolwire.sessions.redis import RedisSessionStore
from toolwire.testing import ScriptedModel, conversation_for

DOMAIN = DomainSpec(name="shop", description="A shop's stock.")
KEPT = "(a conversation is kept 60 s after its last turn: sessions.ttl_s)"
ENDING = (
    f": it is unknown, expired {KEPT} or was started under another API key; omit the session id "
    "to start a new conversation"
)
"""How an unknown id's error ends for a caller with an API key."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def service(store: SessionStore, finder: QueryTool | None = None) -> ConversationService:
    """A shop whose finder takes every message; a later message is rewritten to itself."""
    model = ScriptedModel().on_suitability({"finder": True}).on_answer("ok")
    model.on_extract(Query, {"query": "kettle"})
    model.on_extract(StandaloneTask, lambda text, instruction: {"task": text})
    return conversation_for(DOMAIN, finder or QueryTool("finder"), model=model, store=store)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    made: SessionStore
    if request.param == "memory":
        made = MemorySessionStore(ttl_s=60)
    elif request.param == "sqlite":
        made = SQLiteSessionStore(tmp_path / "sessions.sqlite3", ttl_s=60)
    else:
        url = request.getfixturevalue("redis_url")
        made = RedisSessionStore(url, ttl_s=60, key_prefix=f"test:{uuid.uuid4().hex}:")
    yield made
    await made.aclose()


async def damage(store: SessionStore, session_id: str) -> None:
    """Overwrite the stored conversation with text that does not parse, behind the store."""
    if isinstance(store, MemorySessionStore):
        row = store._rows[session_id]
        store._rows[session_id] = dataclasses.replace(row, task="{not json")
    elif isinstance(store, SQLiteSessionStore):
        with sqlite3.connect(store.path) as connection:
            connection.execute(
                "UPDATE toolwire_sessions SET task = '{not json' WHERE session_id = ?",
                (session_id,),
            )
        connection.close()
    else:
        assert isinstance(store, RedisSessionStore)
        await store._client.hset(store._key(session_id), "task", "{not json")


async def test_a_damaged_conversation_is_to_another_caller_what_an_unknown_id_is(
    store: SessionStore,
) -> None:
    """It was a 400 "cannot be read" naming the conversation: proof that it exists."""
    chat = service(store)
    first = await chat.ask("Do you sell kettles?", caller="alice")
    assert first.session_id is not None
    await damage(store, first.session_id)

    with pytest.raises(UnknownSessionError) as stolen:
        await chat.ask("and in red?", session_id=first.session_id, caller="bob")
    with pytest.raises(UnknownSessionError) as unknown:
        await chat.ask("and in red?", session_id="no-such-session", caller="bob")

    assert str(stolen.value) == str(unknown.value).replace("no-such-session", first.session_id)
    assert toolwire_error_status(stolen.value)[:2] == (404, "unknown_session")
    # its owner is told what is wrong, the domain first as for an intact conversation
    with pytest.raises(SessionError, match="belongs to domain 'shop', not 'garden'"):
        await chat.ask("and in red?", domain="garden", session_id=first.session_id, caller="alice")
    with pytest.raises(UnreadableSessionError, match="cannot be read"):
        await chat.ask("and in red?", session_id=first.session_id, caller="alice")


async def test_a_redis_key_of_another_type_is_unknown_to_a_caller_with_a_key(
    redis_url: str,
) -> None:
    store = RedisSessionStore(redis_url, ttl_s=60, key_prefix=f"test:{uuid.uuid4().hex}:")
    await store._client.set(store._key("plain"), "x")
    chat = service(store)

    with pytest.raises(UnknownSessionError):
        await chat.ask("hello", session_id="plain", caller="bob")
    with pytest.raises(UnreadableSessionError, match="another kind of Redis value"):
        await chat.ask("hello", session_id="plain")  # no keys: no tenant to keep it from
    await store.aclose()


async def test_an_unknown_id_names_the_store_and_its_time_to_live(store: SessionStore) -> None:
    """Without API keys (the command line, a server with none) no other key's conversation can
    be meant, and the message does not suggest one."""
    named = {
        MemorySessionStore: "the memory session store of this process",
        SQLiteSessionStore: "the SQLite session store",
        RedisSessionStore: "the Redis session store",
    }[type(store)]
    chat = service(store)

    with pytest.raises(UnknownSessionError) as keyed:
        await chat.ask("and in red?", session_id="no-such-session", caller="alice")
    with pytest.raises(UnknownSessionError) as keyless:
        await chat.ask("and in red?", session_id="no-such-session")

    start = f"no conversation is stored under session id 'no-such-session' in {named}"
    assert str(keyed.value) == f"{start}{ENDING}"
    assert str(keyless.value) == (
        f"{start}: it is unknown or expired {KEPT}; omit the session id to start a new "
        "conversation"
    )


async def test_a_relative_sqlite_path_is_kept_absolute_beside_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user who ran from another working directory can see which file was opened (the
    command line shows ``location``), and the message, which may reach a remote caller, does
    not hold the server's path."""
    monkeypatch.chdir(tmp_path)
    store = SQLiteSessionStore(Path(".toolwire") / "sessions.sqlite3", ttl_s=60)

    with pytest.raises(UnknownSessionError, match="no conversation is stored") as caught:
        await store.load("no-such-session")

    assert caught.value.location == str(tmp_path / ".toolwire" / "sessions.sqlite3")
    assert str(tmp_path) not in str(caught.value)
    assert " in the SQLite session store: " in str(caught.value)


class Wrapping:
    """A plugin's store that delegates to another (as docs/plugins.md's audited store does)
    and names nothing itself."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        return await self.inner.create(domain, conversation, owner)

    async def load(self, session_id: str) -> StoredSession:
        return await self.inner.load(session_id)

    async def save(self, session: StoredSession) -> StoredSession:
        return await self.inner.save(session)

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_through_a_wrapping_store_another_callers_id_still_reads_as_an_unknown_one(
    tmp_path: Path,
) -> None:
    chat = service(Wrapping(SQLiteSessionStore(tmp_path / "sessions.sqlite3")))
    first = await chat.ask("Do you sell kettles?", caller="alice")
    assert first.session_id is not None

    with pytest.raises(UnknownSessionError) as stolen:
        await chat.ask("and in red?", session_id=first.session_id, caller="bob")
    with pytest.raises(UnknownSessionError) as unknown:
        await chat.ask("and in red?", session_id="no-such-session", caller="bob")

    assert str(stolen.value) == str(unknown.value).replace("no-such-session", first.session_id)


async def test_a_conflict_says_the_other_turn_was_stored_and_this_message_can_be_sent_again() -> (
    None
):
    store = MemorySessionStore()
    created = await store.create("shop", waiting(TaskInfo(task_prompt="q")))
    await store.save(created)

    with pytest.raises(SessionConflictError) as caught:
        await store.save(created)

    assert str(caught.value) == (
        f"session {created.session_id!r} was changed by another request while this message was "
        "answered (expected version 1, found 2): the other request's turn was stored and this "
        "one was not; send this message again with the same session id to make it the next turn"
    )


class FailingStore(MemorySessionStore):
    """Fails its writes, or its loads, as an unreachable store does."""

    def __init__(self, *, failing: str) -> None:
        super().__init__()
        self.failing = failing

    def fail(self, operation: str) -> None:
        if operation == self.failing:
            raise SessionStoreUnavailableError(
                "the Redis session store at redis://10.1.2.3:6379/0 failed: Timeout reading from "
                "socket; check that Redis is running and sessions.redis_url is right"
            )

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        self.fail("create")
        return await super().create(domain, conversation, owner)

    async def load(self, session_id: str) -> StoredSession:
        self.fail("load")
        return await super().load(session_id)

    async def save(self, session: StoredSession) -> StoredSession:
        self.fail("save")
        return await super().save(session)


@pytest.mark.parametrize("failing", ["create", "save"])
async def test_a_store_that_fails_while_storing_a_turn_says_its_tools_may_have_run(
    failing: str,
) -> None:
    """It said "nothing was changed": but the turn's tools had run, and a Redis write that
    timed out may even have been applied."""
    store, finder = FailingStore(failing=failing), QueryTool("finder")
    chat = service(store, finder)
    session_id = None
    if failing == "save":
        session_id = (await chat.ask("Do you sell kettles?")).session_id

    with pytest.raises(SessionStoreUnavailableError) as caught:
        await chat.ask("and in red?", session_id=session_id)

    assert finder.calls[-1][1] == "and in red?"  # the tool ran before the store failed
    assert caught.value.while_storing
    assert str(caught.value) == (
        "storing this turn failed: its answer could not be stored and its tools may have run "
        "(a store that timed out may have stored the answer after all); the Redis session store "
        "at redis://10.1.2.3:6379/0 failed: Timeout reading from socket; check that Redis is "
        "running and sessions.redis_url is right"
    )
    http = api_error_for(caught.value)
    assert http.status == 503 and "nothing was changed" not in http.message
    assert http.message.startswith(
        "the session store failed while storing this turn: its answer could not be stored and "
        "its tools may have run (a store that timed out may have stored the answer after all); "
        "retry later (error id "
    )


async def test_a_store_that_fails_while_loading_says_nothing_was_changed() -> None:
    store, finder = FailingStore(failing="load"), QueryTool("finder")
    chat = service(store, finder)
    first = await chat.ask("Do you sell kettles?")

    with pytest.raises(SessionStoreUnavailableError) as caught:
        await chat.ask("and in red?", session_id=first.session_id)

    assert len(finder.calls) == 1 and not caught.value.while_storing
    assert api_error_for(caught.value).message.startswith(
        "the session store cannot be reached; nothing was changed, retry later (error id "
    )


def rows_in(path: Path) -> set[str]:
    """The session ids the SQLite file holds, expired or not."""
    with sqlite3.connect(path) as connection:
        rows = {row[0] for row in connection.execute("SELECT session_id FROM toolwire_sessions")}
    connection.close()
    return rows


async def test_a_save_deletes_expired_sqlite_conversations_from_the_file(tmp_path: Path) -> None:
    """They stayed on disk until a new conversation was created, however many turns passed."""
    clock, path = Clock(), tmp_path / "sessions.sqlite3"
    store = SQLiteSessionStore(path, ttl_s=10, clock=clock)
    expired = await store.create("shop", waiting(TaskInfo(task_prompt="old")))
    clock.now += 5
    live = await store.create("shop", waiting(TaskInfo(task_prompt="live")))
    clock.now += 6  # the first is 11 s old, the second 6 s
    assert rows_in(path) == {expired.session_id, live.session_id}

    await store.save(live)

    assert rows_in(path) == {live.session_id}  # the expired one is gone from the file
    await store.aclose()


async def test_a_load_takes_no_write_lock_and_deletes_nothing(tmp_path: Path) -> None:
    """A load (and the server's readiness probe) must not wait behind another process's write:
    with another connection holding the write lock, a fresh store still loads at once."""
    clock, path = Clock(), tmp_path / "sessions.sqlite3"
    store = SQLiteSessionStore(path, ttl_s=100, clock=clock)
    expired = await store.create("shop", waiting(TaskInfo(task_prompt="old")))
    clock.now += 50
    live = await store.create("shop", waiting(TaskInfo(task_prompt="live")))
    clock.now += 51
    live = await store.save(live)  # purges the first; the second lives on
    await store.aclose()
    assert rows_in(path) == {live.session_id} and expired.session_id not in rows_in(path)
    clock.now += 101  # now the second has expired too

    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process's write in progress
    try:
        fresh = SQLiteSessionStore(path, ttl_s=100, clock=clock)
        with pytest.raises(UnknownSessionError):
            await asyncio.wait_for(fresh.load(live.session_id), timeout=2)
        await fresh.aclose()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert rows_in(path) == {live.session_id}  # expired, and left for the next write


class Damaging(Wrapping):
    """A plugin's store that reads a damaged row as a plain ``SessionError``, saying nothing of
    whose conversation it was."""

    async def load(self, session_id: str) -> StoredSession:
        await self.inner.load(session_id)
        raise SessionError(f"the stored conversation {session_id!r} is damaged")


async def test_a_plugin_stores_plain_session_error_reaches_no_other_caller(
    tmp_path: Path,
) -> None:
    """Not knowing the owner, the service tells the damage to a caller without a key only (no
    tenants to keep apart); one with a key gets the unknown session an unknown id gets."""
    store = Damaging(SQLiteSessionStore(tmp_path / "sessions.sqlite3"))
    chat = service(store)
    first = await chat.ask("Do you sell kettles?", caller="alice")
    keyless = await chat.ask("Do you sell kettles?")
    assert first.session_id is not None and keyless.session_id is not None

    with pytest.raises(UnknownSessionError):
        await chat.ask("and in red?", session_id=first.session_id, caller="alice")
    with pytest.raises(SessionError, match="is damaged") as told:
        await chat.ask("and in red?", session_id=keyless.session_id)
    assert not isinstance(told.value, UnknownSessionError)
