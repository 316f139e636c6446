"""RedisSessionStore against a real redis-server started on a free loopback port."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from server_support.redis_server import free_port, running_redis
from toolwire import (
    SessionConflictError,
    SessionStoreUnavailableError,
    TaskInfo,
    UnknownSessionError,
)
from toolwire.conversation import waiting
from toolwire.errors import SessionError
from toolwire.run_state import Clarification, TaskStatus
from toolwire.sessions import SessionStore
from toolwire.sessions.redis import RedisSessionStore
from toolwire.settings import SessionSettings


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisSessionStore]:
    store = RedisSessionStore(redis_url, ttl_s=60, key_prefix=f"test:{uuid.uuid4().hex}:")
    yield store
    await store.aclose()


def waiting_task(question: str = "Which city?") -> TaskInfo:
    task = TaskInfo(task_prompt="book a table", required_tool_names={"demo.booking"})
    task.run.status = TaskStatus.WAITING_FOR_USER
    task.run.clarifications.append(
        Clarification(tool_name="demo.booking", question=question, execution_text="book a table")
    )
    return task


async def test_is_a_session_store(store: RedisSessionStore) -> None:
    assert isinstance(store, SessionStore)


async def test_create_then_load_round_trips_the_task(store: RedisSessionStore) -> None:
    created = await store.create("demo", waiting(waiting_task()))
    loaded = await store.load(created.session_id)

    assert created.version == 1
    assert loaded == created
    assert loaded.task.run.pending_clarification is not None
    assert loaded.task.required_tool_names == {"demo.booking"}


async def test_session_ids_are_fresh_and_unguessable(store: RedisSessionStore) -> None:
    ids = {(await store.create("demo", waiting(waiting_task()))).session_id for _ in range(20)}
    assert len(ids) == 20
    assert all(len(session_id) >= 32 for session_id in ids)


async def test_save_applies_a_round_and_bumps_the_version(store: RedisSessionStore) -> None:
    session = await store.create("demo", waiting(waiting_task()))
    session.task.task_prompt = "book a table in Szeged"

    saved = await store.save(session)

    assert saved.version == 2
    reloaded = await store.load(session.session_id)
    assert reloaded.version == 2
    assert reloaded.task.task_prompt == "book a table in Szeged"


async def test_a_stale_round_conflicts_and_keeps_the_winner(store: RedisSessionStore) -> None:
    session = await store.create("demo", waiting(waiting_task()))
    first = session.model_copy(deep=True)
    second = session.model_copy(deep=True)
    first.task.task_prompt = "winner"
    second.task.task_prompt = "loser"
    await store.save(first)

    with pytest.raises(SessionConflictError) as caught:
        await store.save(second)

    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert "the other request's turn was stored" in str(caught.value)
    assert "send this message again with the same session id" in str(caught.value)
    stored = await store.load(session.session_id)
    assert (stored.version, stored.task.task_prompt) == (2, "winner")


async def test_concurrent_saves_from_two_clients_apply_exactly_one(redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    replicas = [RedisSessionStore(redis_url, ttl_s=60, key_prefix=prefix) for _ in range(2)]
    try:
        session = await replicas[0].create("demo", waiting(waiting_task()))
        attempts = []
        for n in range(10):
            attempt = (await replicas[n % 2].load(session.session_id)).model_copy(deep=True)
            attempt.task.task_prompt = f"round by {n}"
            attempts.append((replicas[n % 2], attempt))

        outcomes = await asyncio.gather(
            *(replica.save(attempt) for replica, attempt in attempts), return_exceptions=True
        )

        saved = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        conflicts = [o for o in outcomes if isinstance(o, SessionConflictError)]
        assert len(saved) == 1 and len(conflicts) == 9
        stored = await replicas[1].load(session.session_id)
        assert stored.version == 2
        assert stored.task.task_prompt == saved[0].task.task_prompt
    finally:
        for replica in replicas:
            await replica.aclose()


async def test_unknown_and_deleted_sessions(store: RedisSessionStore) -> None:
    with pytest.raises(UnknownSessionError, match="omit the session id"):
        await store.load("no-such-session")

    session = await store.create("demo", waiting(waiting_task()))
    await store.delete(session.session_id)
    await store.delete(session.session_id)  # already gone: no error

    with pytest.raises(UnknownSessionError):
        await store.load(session.session_id)
    with pytest.raises(UnknownSessionError):
        await store.save(session)


async def test_a_stored_task_that_no_longer_parses_is_a_session_error(
    store: RedisSessionStore,
) -> None:
    created = await store.create("demo", waiting(waiting_task()))
    await store._client.hset(store._key(created.session_id), "task", "{not json")

    with pytest.raises(SessionError, match="cannot be read") as caught:
        await store.load(created.session_id)

    assert not isinstance(caught.value, UnknownSessionError)
    assert created.session_id in str(caught.value)


@pytest.mark.parametrize(
    ("damaged", "named"), [("abc", "its version is 'abc'"), ("0", "its version is '0'")]
)
async def test_a_damaged_version_is_a_session_error_on_load_and_save(
    store: RedisSessionStore, damaged: str, named: str
) -> None:
    created = await store.create("demo", waiting(waiting_task()))
    await store._client.hset(store._key(created.session_id), "version", damaged)

    with pytest.raises(SessionError, match="cannot be read") as loaded:
        await store.load(created.session_id)
    assert named in str(loaded.value) and created.session_id in str(loaded.value)
    if damaged == "abc":  # a round loaded before the damage: the save names it too
        with pytest.raises(SessionError, match="version is not a number") as saved:
            await store.save(created)
        assert not isinstance(saved.value, SessionConflictError)


async def test_a_missing_column_is_a_session_error(store: RedisSessionStore) -> None:
    created = await store.create("demo", waiting(waiting_task()))
    await store._client.hdel(store._key(created.session_id), "domain")

    with pytest.raises(SessionError, match="its domain is missing"):
        await store.load(created.session_id)


async def test_the_owner_is_kept_through_rounds(store: RedisSessionStore) -> None:
    owned = await store.create("demo", waiting(waiting_task()), owner="tenant-a")
    anonymous = await store.create("demo", waiting(waiting_task()))

    saved = await store.save(await store.load(owned.session_id))

    assert (await store.load(owned.session_id)).owner == saved.owner == "tenant-a"
    assert (await store.load(anonymous.session_id)).owner is None


async def test_every_write_renews_the_time_to_live(redis_url: str) -> None:
    store = RedisSessionStore(redis_url, ttl_s=1, key_prefix=f"test:{uuid.uuid4().hex}:")
    try:
        session = await store.create("demo", waiting(waiting_task()))
        key = store._key(session.session_id)
        await asyncio.sleep(0.5)
        left_before = await store._client.pttl(key)
        session = await store.save(session)
        left_after = await store._client.pttl(key)
        # Renewed to a full second (compared, not timed, so a busy machine cannot fail it).
        assert 0 < left_before < left_after <= 1000

        await asyncio.sleep(1.1)
        with pytest.raises(UnknownSessionError):
            await store.load(session.session_id)
    finally:
        await store.aclose()


async def test_an_unreachable_redis_is_a_clear_session_error() -> None:
    url = f"redis://user:secret@127.0.0.1:{free_port()}/0"
    store = RedisSessionStore(url, ttl_s=60)
    try:
        with pytest.raises(SessionStoreUnavailableError, match="Redis is running") as caught:
            await store.load("anything")
        assert "secret" not in str(caught.value)
        assert "user:***@127.0.0.1" in str(caught.value)
    finally:
        await store.aclose()


def test_from_settings_uses_url_and_ttl() -> None:
    settings = SessionSettings(store="redis", redis_url="redis://127.0.0.1:1/3", ttl_s=42)
    store = RedisSessionStore.from_settings(settings)
    assert store.ttl_s == 42
    assert store._url == "redis://127.0.0.1:1/3"
    with pytest.raises(ValueError, match="ttl_s must be positive"):
        RedisSessionStore(ttl_s=0)


def test_the_redis_store_imported_without_the_extra_names_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "redis.asyncio", raising=False)
    monkeypatch.delitem(sys.modules, "toolwire.sessions.redis")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'toolwire\[redis\]'"):
        importlib.import_module("toolwire.sessions.redis")


async def test_a_redis_that_accepts_but_never_answers_is_unavailable_within_the_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # holds the connection, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisSessionStore(f"redis://127.0.0.1:{port}/0", ttl_s=60, timeout_s=0.3)
    try:
        async with asyncio.timeout(5):  # without a timeout the load would wait forever
            with pytest.raises(SessionStoreUnavailableError, match="Timeout"):
                await store.load("anything")
    finally:
        await store.aclose()
        server.close()


async def test_a_key_of_another_redis_type_is_that_conversation_damaged_not_redis_down(
    store: RedisSessionStore,
) -> None:
    kept = await store.create("demo", waiting(waiting_task()))
    await store._client.set(store._key("plain"), "x")

    for attempt in (
        store.load("plain"),
        store.save(kept.model_copy(update={"session_id": "plain"})),
    ):
        with pytest.raises(SessionError, match="another kind of Redis value") as caught:
            await attempt
        assert not isinstance(caught.value, SessionStoreUnavailableError)
    assert await store.load(kept.session_id) == kept  # nothing else lost


async def test_a_field_that_is_not_utf8_is_that_conversation_damaged(
    store: RedisSessionStore,
) -> None:
    kept = await store.create("demo", waiting(waiting_task()))
    await store._client.hset(
        store._key("bytes"), mapping={"domain": "demo", "task": b"\xff\xfe", "version": 1}
    )

    with pytest.raises(SessionError, match="cannot be read") as caught:
        await store.load("bytes")
    assert not isinstance(caught.value, SessionStoreUnavailableError)
    assert await store.load(kept.session_id) == kept
