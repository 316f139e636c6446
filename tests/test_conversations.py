"""A conversation is the unit (issue 32 item 1): every answer carries the conversation's id, a
message sent with it is the next turn, and the turns before reach that turn's answer. The
conversation lives in the session store (so another store instance on the same file, or another
replica on the same Redis, takes the next turn), within its bounds and time-to-live, bound to its
caller; a damaged stored conversation is a clear error that costs nothing else."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestration_kit import AskingTool, Query, QueryTool
from server_support.redis_server import running_redis
from toolwire import SessionError, UnknownSessionError
from toolwire.context_buffer import PromptAndContext
from toolwire.conversation import TurnContext
from toolwire.events import RoundFinished
from toolwire.llm.history import current_history
from toolwire.orchestrator import Answer, ConversationService
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.orchestrator.streaming import Answered
from toolwire.registry import DomainSpec
from toolwire.server.problems import toolwire_error_status
from toolwire.sessions import (
    MemorySessionStore,
    SessionStore,
    SQLiteSessionStore,
    StoredSession,
    create_session_store,
)
from toolwire.settings import SessionSettings
from toolwire.testing import ScriptedModel, conversation_for

DOMAIN = DomainSpec(name="shop", description="A shop's stock.")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scripted() -> tuple[ScriptedModel, list[list[dict[str, str]]]]:
    """A model whose finder tool takes every message; each answer records the history it read
    and says which question it answers."""
    seen: list[list[dict[str, str]]] = []

    def answer(question: str, contexts: list[PromptAndContext]) -> str:
        seen.append([dict(message) for message in current_history()])
        return f"answer to {question}"

    model = ScriptedModel().on_suitability({"finder": True}).on_extract(StandaloneTask, copied)
    model.on_extract(Query, lambda text, instruction: {"query": str(text)}).on_answer(answer)
    return model, seen


def copied(text: str, instruction: str) -> dict[str, str]:
    """The follow-up rewrite of a message that stands on its own: the message itself."""
    return {"task": text}


def service(model: ScriptedModel, store: SessionStore, **bounds: Any) -> ConversationService:
    sessions = SessionSettings(**bounds) if bounds else None
    return conversation_for(
        DOMAIN, QueryTool("finder"), model=model, store=store, sessions=sessions
    )


def history_of(*turns: tuple[str, str]) -> list[dict[str, str]]:
    return [
        message
        for asked, answered in turns
        for message in (
            {"role": "user", "content": asked},
            {"role": "assistant", "content": answered},
        )
    ]


async def test_every_answer_carries_the_conversation_and_the_next_turn_reads_the_ones_before() -> (
    None
):
    model, seen = scripted()
    chat = service(model, MemorySessionStore())

    first = await chat.ask("Do you sell kettles?")
    second = await chat.ask("and in red?", session_id=first.session_id)
    third = await chat.ask("how much is it?", session_id=first.session_id)

    assert first.session_id and second.session_id == third.session_id == first.session_id
    assert [first.turn, second.turn, third.turn] == [1, 2, 3]
    assert seen[0] == []  # a first message reads no history
    assert seen[1] == history_of(("Do you sell kettles?", "answer to Do you sell kettles?"))
    # append-only: the third turn's history begins with exactly the second turn's
    assert seen[2][: len(seen[1])] == seen[1]
    assert seen[2][len(seen[1]) :] == history_of(("and in red?", "answer to and in red?"))
    stored = await chat.store.load(first.session_id)
    assert [turn.message for turn in stored.conversation.turns] == [
        "Do you sell kettles?", "and in red?", "how much is it?"
    ]  # fmt: skip
    assert stored.conversation.turns[0].findings[0].text == "finder:Do you sell kettles?"


async def test_the_selection_and_parameters_of_a_later_turn_read_the_rewritten_task_alone() -> None:
    histories: dict[str, list[int]] = {"selection": [], "parameters": []}

    def takes(task_prompt: str, names: list[str]) -> list[str]:
        histories["selection"].append(len(current_history()))
        return ["finder"]

    def params(text: str, instruction: str) -> dict[str, str]:
        histories["parameters"].append(len(current_history()))
        return {"query": "kettle"}

    model = ScriptedModel().on_suitability(takes).on_extract(Query, params).on_answer("ok")
    model.on_extract(StandaloneTask, copied)
    chat = service(model, MemorySessionStore())
    first = await chat.ask("Do you sell kettles?")
    await chat.ask("and in red?", session_id=first.session_id)

    assert histories["selection"] and histories["parameters"] == [0, 0]
    assert set(histories["selection"]) == {0}  # the old topic cannot reach a new request's choice


async def test_a_sqlite_file_reopened_by_another_process_continues_the_conversation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    model, seen = scripted()
    first = await service(model, SQLiteSessionStore(path)).ask("Do you sell kettles?")

    other_process = service(model, SQLiteSessionStore(path))  # a new store on the same file
    second = await other_process.ask("and in red?", session_id=first.session_id)

    assert second.turn == 2 and second.session_id == first.session_id
    assert seen[1] == history_of(("Do you sell kettles?", "answer to Do you sell kettles?"))


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


async def test_another_replica_on_the_same_redis_takes_the_next_turn(redis_url: str) -> None:
    from toolwire.sessions.redis import RedisSessionStore

    prefix = f"test:{uuid.uuid4().hex}:"
    model, seen = scripted()
    replica_a = service(model, RedisSessionStore(redis_url, key_prefix=prefix))
    replica_b = service(model, RedisSessionStore(redis_url, key_prefix=prefix))

    first = await replica_a.ask("Do you sell kettles?")
    second = await replica_b.ask("and in red?", session_id=first.session_id)
    third = await replica_a.ask("how much?", session_id=first.session_id)

    assert [second.turn, third.turn] == [2, 3]
    assert seen[2] == history_of(
        ("Do you sell kettles?", "answer to Do you sell kettles?"),
        ("and in red?", "answer to and in red?"),
    )
    await replica_a.store.aclose()
    await replica_b.store.aclose()


async def test_max_turns_keeps_the_latest_turns_and_their_numbers() -> None:
    model, seen = scripted()
    chat = service(model, MemorySessionStore(), max_turns=2)
    first = await chat.ask("one")
    for message in ("two", "three", "four"):
        await chat.ask(message, session_id=first.session_id)

    stored = (await chat.store.load(first.session_id)).conversation
    assert [(turn.number, turn.message) for turn in stored.turns] == [(3, "three"), (4, "four")]
    assert stored.forgotten == 2 and stored.next_number == 5
    assert seen[-1] == history_of(("two", "answer to two"), ("three", "answer to three"))


async def test_max_bytes_drops_old_findings_first_then_old_turns() -> None:
    big = "x" * 3000  # each turn's tool finds about 2 kB (cut to FINDING_CHARS)
    model = ScriptedModel().on_suitability({"finder": True}).on_extract(StandaloneTask, copied)
    model.on_extract(Query, {"query": big}).on_answer("a" * 800)
    chat = service(model, MemorySessionStore(), max_bytes=4096)

    first = await chat.ask("one")
    await chat.ask("two", session_id=first.session_id)
    stored = (await chat.store.load(first.session_id)).conversation
    assert [turn.message for turn in stored.turns] == ["one", "two"]
    assert [len(turn.findings) for turn in stored.turns] == [0, 1]  # the old finding went first

    for message in ("three", "four", "five"):
        await chat.ask(message, session_id=first.session_id)
    stored = (await chat.store.load(first.session_id)).conversation
    assert len(stored.model_dump_json()) <= 4096
    assert stored.turns[-1].message == "five" and stored.forgotten >= 1


async def test_an_idle_conversation_expires_and_each_turn_renews_its_time_to_live() -> None:
    clock = _Clock()
    model, _ = scripted()
    chat = service(model, MemorySessionStore(ttl_s=60, clock=clock))
    first = await chat.ask("one")

    clock.now += 50
    await chat.ask("two", session_id=first.session_id)  # renews: 60 s from now
    clock.now += 50
    third = await chat.ask("three", session_id=first.session_id)
    assert third.turn == 3

    clock.now += 61
    with pytest.raises(UnknownSessionError):
        await chat.ask("four", session_id=first.session_id)


async def test_a_sqlite_conversation_expires_when_idle_though_the_file_is_reopened_every_turn(
    tmp_path: Path,
) -> None:
    """The time-to-live is kept in the file, not in a store object: every turn is taken by a
    new store on the same file (another process), each turn renews the time, and an idle
    conversation is gone for the next one."""
    clock = _Clock()
    path = tmp_path / "sessions.sqlite3"
    model, seen = scripted()

    async def turn(message: str, session_id: str | None = None) -> Answer:
        chat = service(model, SQLiteSessionStore(path, ttl_s=60, clock=clock))
        try:
            return await chat.ask(message, session_id=session_id)
        finally:
            await chat.store.aclose()

    first = await turn("one")
    assert first.session_id is not None
    clock.now += 50
    await turn("two", first.session_id)  # renews: 60 s from now
    clock.now += 50  # 100 s after the first turn, 50 s after the second
    third = await turn("three", first.session_id)
    assert third.turn == 3
    assert seen[2] == history_of(("one", "answer to one"), ("two", "answer to two"))

    clock.now += 61
    with pytest.raises(UnknownSessionError):
        await turn("four", first.session_id)
    assert (await turn("four")).turn == 1  # a new conversation starts as ever


async def test_a_redis_conversation_expires_when_idle_and_each_turn_renews_it(
    redis_url: str,
) -> None:
    """``sessions.ttl_s`` reaches Redis (the key's own expiry, real seconds): two replicas take
    turns, each turn renews the time, and an idle conversation is gone for the next one."""
    settings = SessionSettings(store="redis", redis_url=redis_url, ttl_s=2)
    model, seen = scripted()
    replica_a = service(model, create_session_store(settings))
    replica_b = service(model, create_session_store(settings))
    try:
        first = await replica_a.ask("one")
        await asyncio.sleep(1.2)
        await replica_b.ask("two", session_id=first.session_id)  # renews: 2 s from now
        await asyncio.sleep(1.2)  # 2.4 s after the first turn, 1.2 s after the second
        third = await replica_a.ask("three", session_id=first.session_id)
        assert third.turn == 3
        assert seen[2] == history_of(("one", "answer to one"), ("two", "answer to two"))

        await asyncio.sleep(2.3)
        with pytest.raises(UnknownSessionError):
            await replica_b.ask("four", session_id=first.session_id)
    finally:
        await replica_a.store.aclose()
        await replica_b.store.aclose()


async def test_another_callers_conversation_id_is_refused_and_its_conversation_unchanged() -> None:
    model, _ = scripted()
    chat = service(model, MemorySessionStore())
    first = await chat.ask("Do you sell kettles?", caller="alice")

    with pytest.raises(UnknownSessionError):
        await chat.ask("and in red?", session_id=first.session_id, caller="bob")
    with pytest.raises(UnknownSessionError):
        await chat.ask("and in red?", session_id=first.session_id)  # no caller at all

    stored = await chat.store.load(first.session_id)
    assert [turn.message for turn in stored.conversation.turns] == ["Do you sell kettles?"]
    assert (await chat.ask("and in red?", session_id=first.session_id, caller="alice")).turn == 2


@pytest.mark.parametrize(
    "damaged",
    ['{"format": 3, "conversation": {"turns": [{"number": 0}]}}', "{not json", "null"],
)
async def test_a_corrupted_stored_conversation_is_a_clear_error_and_nothing_else_is_lost(
    tmp_path: Path, damaged: str
) -> None:
    path = tmp_path / "sessions.sqlite3"
    model, _ = scripted()
    chat = service(model, SQLiteSessionStore(path))
    broken = await chat.ask("Do you sell kettles?")
    intact = await chat.ask("Do you sell mugs?")
    connection = sqlite3.connect(path)
    with connection:
        connection.execute(
            "UPDATE toolwire_sessions SET task = ? WHERE session_id = ?",
            (damaged, broken.session_id),
        )
    connection.close()

    with pytest.raises(SessionError) as caught:
        await chat.ask("and in red?", session_id=broken.session_id)
    message = str(caught.value)
    assert f"the stored conversation {broken.session_id!r} cannot be read" in message
    assert "start a new conversation" in message

    assert (await chat.ask("and in blue?", session_id=intact.session_id)).turn == 2
    assert (await chat.ask("Do you sell teapots?")).turn == 1  # a new one starts as ever


async def test_a_conversation_stays_in_its_domain() -> None:
    model, _ = scripted()
    chat = service(model, MemorySessionStore())
    first = await chat.ask("Do you sell kettles?")
    before = await chat.store.load(first.session_id)
    with pytest.raises(SessionError, match="belongs to domain 'shop', not 'garden'"):
        await chat.ask("and in red?", domain="garden", session_id=first.session_id)

    after = await chat.store.load(first.session_id)  # the refused turn left it as it was
    assert (after.version, after.conversation.turns) == (before.version, before.conversation.turns)


async def test_a_streamed_turns_events_say_which_turn_they_belong_to() -> None:
    model, _ = scripted()
    chat = service(model, MemorySessionStore())
    first = await chat.ask("Do you sell kettles?")
    events = [event async for event in chat.ask_stream("and in red?", session_id=first.session_id)]

    [finished] = [event for event in events if isinstance(event, RoundFinished)]
    assert finished.turn == 2
    assert isinstance(events[-1], Answered) and events[-1].answer.turn == 2


def asking() -> tuple[ConversationService, list[list[dict[str, str]]]]:
    """A finder that finds on every round and an asker that asks a clarifying question first;
    each answer records the history it read."""
    seen: list[list[dict[str, str]]] = []

    def answer(question: str, contexts: list[PromptAndContext]) -> str:
        seen.append([dict(message) for message in current_history()])
        return "ok"

    model = ScriptedModel().on_suitability({"finder": True, "asker": True}).on_answer(answer)
    model.on_extract(Query, {"query": "kettle"}).on_extract(StandaloneTask, copied)
    chat = conversation_for(DOMAIN, QueryTool("finder"), AskingTool("asker"), model=model)
    return chat, seen


async def test_the_reply_turn_stores_only_what_its_own_round_found() -> None:
    chat, _ = asking()
    first = await chat.ask("Do you sell kettles?")
    second = await chat.ask("the red one", session_id=first.session_id)

    assert (first.kind, second.kind) == ("clarification", "answer")
    stored = (await chat.store.load(first.session_id)).conversation
    # the finder's result came with the question: stored with that turn, not again with the reply
    assert [[(f.tool_name, f.text) for f in turn.findings] for turn in stored.turns] == [
        [("finder", "finder:kettle")],
        [("asker", "asker resolved kettle")],
    ]


async def test_the_reply_to_a_clarifying_question_says_which_turns_its_answer_read() -> None:
    chat, seen = asking()
    first = await chat.ask("Do you sell kettles?")
    second = await chat.ask("the red one", session_id=first.session_id)

    assert first.context is None  # a first turn reads nothing before it
    assert seen[-1] == history_of(("Do you sell kettles?", first.text))
    assert second.context == TurnContext(turns_read=[1])  # not rewritten: it resumed the task


async def test_a_conversation_that_expires_during_its_turn_is_unknown_not_a_conflict() -> None:
    """The same error as for the next message with the expired id (HTTP 404), not a conflict
    whose "send the message again" would only meet that 404."""
    clock = _Clock()

    def answer(question: str, contexts: list[PromptAndContext]) -> str:
        clock.now += 61  # the turn outlives the conversation's time-to-live
        return "ok"

    model = ScriptedModel().on_suitability({"finder": True}).on_extract(StandaloneTask, copied)
    model.on_extract(Query, {"query": "kettle"}).on_answer(answer)
    chat = service(model, MemorySessionStore(ttl_s=60, clock=clock))
    first = await chat.ask("Do you sell kettles?")

    with pytest.raises(UnknownSessionError) as caught:
        await chat.ask("and in red?", session_id=first.session_id)
    assert caught.value.session_id == first.session_id
    assert toolwire_error_status(caught.value)[:2] == (404, "unknown_session")
    assert "another API key" not in str(caught.value)  # no keys here: none can be meant


class _SlowSavingStore(MemorySessionStore):
    """Saves a turn only after ``release`` is set, in a thread, as the SQLite store does."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    async def save(self, session: StoredSession) -> StoredSession:
        await asyncio.to_thread(self.release.wait, 5)
        return await super().save(session)


async def test_a_turn_whose_time_runs_out_during_its_store_write_is_stored_and_said_so() -> None:
    from toolwire.server.problems import ApiError
    from toolwire.server.questions import question_scope, within_request_time

    model, _ = scripted()
    store = _SlowSavingStore()
    chat = service(model, store)
    store.release.set()
    first = await chat.ask("Do you sell kettles?")
    store.release.clear()
    asyncio.get_running_loop().call_later(0.5, store.release.set)  # after the time limit

    ask = chat.ask("and in red?", session_id=first.session_id)
    with question_scope(first.session_id, None, 0.2) as progress, pytest.raises(ApiError) as raised:
        await within_request_time(ask, 0.2, progress)

    assert raised.value.status == 504
    assert "stored as turn 2 of the conversation" in raised.value.message
    assert "Nothing was stored" not in raised.value.message
    stored = await store.load(first.session_id)
    assert [turn.message for turn in stored.conversation.turns] == [
        "Do you sell kettles?", "and in red?"
    ]  # fmt: skip
