"""The memory and SQLite session stores, and a clarification surviving a restart."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from orchestration_kit import AskingTool, Query, domain
from toolwire import (
    SessionConflictError,
    SessionStoreUnavailableError,
    TaskInfo,
    UnknownSessionError,
)
from toolwire.conversation import waiting
from toolwire.errors import SessionError
from toolwire.run_state import Clarification, TaskStatus
from toolwire.sessions import (
    SESSION_FORMAT,
    MemorySessionStore,
    SessionStore,
    SQLiteSessionStore,
    create_session_store,
    task_payload,
)
from toolwire.settings import SessionSettings
from toolwire.testing import ScriptedModel, conversation_for


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(clock: Clock | None = None, ttl_s: float = 60) -> SessionStore:
        kwargs = {"clock": clock} if clock else {}
        if request.param == "memory":
            return MemorySessionStore(ttl_s, **kwargs)
        return SQLiteSessionStore(tmp_path / "state" / "sessions.sqlite3", ttl_s, **kwargs)

    return make


async def test_create_load_save_delete_round_trip(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    task = TaskInfo(task_prompt="q", applied_coordinator_names={"demo.c"})

    created = await store.create("demo", waiting(task))
    loaded = await store.load(created.session_id)

    assert created.version == loaded.version == 1
    assert loaded.task == task and loaded.domain == "demo"
    loaded.task.task_prompt = "changed"
    saved = await store.save(loaded)
    assert saved.version == 2
    assert (await store.load(created.session_id)).task.task_prompt == "changed"
    await store.delete(created.session_id)
    await store.delete(created.session_id)  # already gone: no error
    with pytest.raises(UnknownSessionError):
        await store.load(created.session_id)


async def test_session_ids_are_unguessable_and_distinct(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    ids = {
        (await store.create("demo", waiting(TaskInfo(task_prompt="q")))).session_id
        for _ in range(20)
    }
    assert len(ids) == 20
    assert all(len(session_id) >= 32 for session_id in ids)


async def test_a_stale_version_is_a_conflict_and_the_winner_stays(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    created = await store.create("demo", waiting(TaskInfo(task_prompt="q")))
    replica_a = await store.load(created.session_id)
    replica_b = await store.load(created.session_id)

    replica_a.task.task_prompt = "a"
    replica_b.task.task_prompt = "b"
    await store.save(replica_a)
    with pytest.raises(SessionConflictError, match="expected version 1, found 2"):
        await store.save(replica_b)
    assert (await store.load(created.session_id)).task.task_prompt == "a"


async def test_concurrent_saves_of_one_round_let_exactly_one_win(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    created = await store.create("demo", waiting(TaskInfo(task_prompt="q")))
    copies = [await store.load(created.session_id) for _ in range(5)]

    outcomes = await asyncio.gather(*(store.save(c) for c in copies), return_exceptions=True)

    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(o, SessionConflictError) for o in failures)


async def test_sessions_are_isolated_from_each_other_and_from_callers(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    one = await store.create("demo", waiting(TaskInfo(task_prompt="one")))
    two = await store.create("demo", waiting(TaskInfo(task_prompt="two")))
    one.task.task_prompt = "changed by the caller after create"

    assert (await store.load(one.session_id)).task.task_prompt in {"one"}
    assert (await store.load(two.session_id)).task.task_prompt == "two"


async def test_unknown_and_expired_sessions_are_clear_errors(make_store) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    store = make_store(clock, ttl_s=10)
    created = await store.create("demo", waiting(TaskInfo(task_prompt="q")))

    with pytest.raises(UnknownSessionError, match="no conversation is stored under session id"):
        await store.load("not-a-session")
    with pytest.raises(UnknownSessionError):
        await store.save(created.model_copy(update={"session_id": "not-a-session"}))
    clock.now += 11
    with pytest.raises(UnknownSessionError):
        await store.load(created.session_id)


async def test_the_memory_store_forgets_expired_conversations_nobody_asks_for() -> None:
    """Expired rows were dropped only when their own id was asked for: every unanswered
    clarification of a long-running server stayed in memory for the life of the process."""
    clock = Clock()
    store = MemorySessionStore(ttl_s=10, clock=clock)
    for _ in range(1_000):
        await store.create("demo", waiting(TaskInfo(task_prompt="q")))
    clock.now += 11
    live = [await store.create("demo", waiting(TaskInfo(task_prompt="q"))) for _ in range(100)]

    assert len(store._rows) <= 2 * len(live)
    for session in live:  # the ones within their time are all still there
        assert (await store.load(session.session_id)).version == 1


def damage(store: SessionStore, session_id: str, column: str, value: object) -> None:
    """Overwrite one stored column (``task`` or ``version``) behind the store's back."""
    if isinstance(store, MemorySessionStore):
        store._rows[session_id] = dataclasses.replace(store._rows[session_id], **{column: value})
        return
    assert isinstance(store, SQLiteSessionStore)
    connection = sqlite3.connect(store.path)
    with connection:
        connection.execute(
            f"UPDATE toolwire_sessions SET {column} = ? WHERE session_id = ?", (value, session_id)
        )
    connection.close()


@pytest.mark.parametrize(
    ("column", "damaged", "named"),
    [
        ("task", '{"format": 2, "task": {"task_prompt": 42}}', "problem(s) in its conversation"),
        (
            "task",
            '{"format": 2, "task": {"task_prompt": "q", "run": {"status": 7}}}',
            "problem(s) in its conversation",
        ),
        ("task", "{not json", "problem(s) in its conversation"),
        ("version", "abc", "its version is 'abc'"),
        ("version", 0, "its version is 0"),
        ("version", 1.5, "its version is 1.5"),
        ("version", b"\x00", "its version is b'\\x00'"),
    ],
)
async def test_a_stored_row_that_no_longer_reads_is_a_session_error(  # type: ignore[no-untyped-def]
    make_store, column: str, damaged: object, named: str
) -> None:
    store = make_store()
    created = await store.create("demo", waiting(TaskInfo(task_prompt="q")))
    damage(store, created.session_id, column, damaged)

    with pytest.raises(SessionError, match="cannot be read") as caught:
        await store.load(created.session_id)

    assert not isinstance(caught.value, UnknownSessionError)
    assert created.session_id in str(caught.value)
    assert named in str(caught.value)
    assert "start a new conversation" in str(caught.value)


# A task as toolwire stored it before the run state (session format 1): the orchestrator's
# fields beside the SPEC's on the bare task.
FORMAT_1_TASK = json.dumps(
    {
        "task_no": "1",
        "task_prompt": "Which dose?",
        "important_words": [],
        "prompt_type": "",
        "sub_tasks": [],
        "required_tool_names": ["demo.asker"],
        "conditional": False,
        "owner_coordinator_name": None,
        "applied_coordinator_names": [],
        "prompt_context": None,
        "user_message": "Which dose?",
        "status": "waiting_for_user",
        "results": [],
        "pending_clarification": {
            "tool_name": "demo.asker",
            "question": "Which one?",
            "execution_text": "Which dose?",
            "reply": None,
            "earlier": [],
        },
        "clarifications": [],
        "tool_runs": [
            {
                "tool_name": "demo.asker",
                "reason": "required",
                "outcome": "clarification",
                "detail": "",
                "params": {},
            }
        ],
        "coordinator_runs": [],
        "selection": None,
        "decision": None,
        "gatekeeper_missing": [],
        "failures": [],
        "notes": [],
    }
)


async def test_a_session_stored_by_the_previous_format_is_refused_clearly(  # type: ignore[no-untyped-def]
    make_store,
) -> None:
    store = make_store()
    created = await store.create("demo", waiting(TaskInfo(task_prompt="q")))
    damage(store, created.session_id, "task", FORMAT_1_TASK)

    with pytest.raises(SessionError) as caught:
        await store.load(created.session_id)

    assert str(caught.value) == (
        f"the stored conversation {created.session_id!r} was saved by an earlier toolwire "
        "(session format 1, before the orchestrator's state moved to TaskInfo.run): it cannot be "
        "resumed; start a new conversation"
    )


async def test_a_session_of_a_later_format_is_refused_and_the_current_one_reads(  # type: ignore[no-untyped-def]
    make_store,
) -> None:
    store = make_store()
    asking = TaskInfo(task_prompt="Which dose?", required_tool_names={"demo.asker"})
    asking.run.status = TaskStatus.WAITING_FOR_USER
    asking.run.clarifications.append(
        Clarification(tool_name="demo.asker", question="Which one?", execution_text="Which dose?")
    )
    created = await store.create("demo", waiting(asking))

    loaded = await store.load(created.session_id)  # the current format: read back whole
    assert loaded.task == asking and loaded.task.run.pending_clarification is not None
    stored = json.loads(task_payload(asking))
    assert stored["format"] == SESSION_FORMAT == 3
    pending = stored["conversation"]["pending"]
    assert pending["run"]["clarifications"][0]["question"] == "Which one?"

    # a session of the format before conversations (a task waiting for its reply) still reads
    damage(store, created.session_id, "task", json.dumps({"format": 2, "task": pending}))
    assert (await store.load(created.session_id)).task == asking

    damage(store, created.session_id, "task", json.dumps({**stored, "format": 4}))
    with pytest.raises(SessionError, match="was saved in session format 4; this toolwire reads 3"):
        await store.load(created.session_id)


async def test_sqlite_sessions_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    created = await SQLiteSessionStore(path).create("demo", waiting(TaskInfo(task_prompt="q")))

    after_restart = SQLiteSessionStore(path)  # a new process: a new store on the same file

    assert (await after_restart.load(created.session_id)).task.task_prompt == "q"


async def test_a_clarification_is_answered_after_a_restart(
    tmp_path: Path, scripted_model: ScriptedModel
) -> None:
    path = tmp_path / "sessions.sqlite3"
    scripted_model.on_extract(Query, {"query": "red"}).on_answer()
    before = conversation_for(
        domain(), AskingTool("asker"), model=scripted_model, store=SQLiteSessionStore(path)
    )
    root = TaskInfo(task_prompt="q", required_tool_names={"asker"})
    question_round = await before.orchestrator(None).run_round(root)
    stored = await before.store.create("demo", waiting(root))
    assert question_round.kind == "clarification"

    restarted_tool = AskingTool("asker")
    after = conversation_for(
        domain(), restarted_tool, model=scripted_model, store=SQLiteSessionStore(path)
    )
    answer = await after.ask("the red one", session_id=stored.session_id)

    assert answer.text == "asker resolved red"
    assert restarted_tool.runs == []  # resumed, not re-run
    kept = await after.store.load(stored.session_id)  # the conversation goes on, nothing waits
    assert kept.task is None and [turn.answer for turn in kept.conversation.turns] == [
        "asker resolved red"
    ]


async def test_an_unusable_sqlite_file_is_a_session_error(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"this is not a database" * 100)

    with pytest.raises(SessionError, match=r"session store .* failed"):
        await SQLiteSessionStore(path).create("demo", waiting(TaskInfo(task_prompt="q")))


def test_create_session_store_follows_the_settings(tmp_path: Path) -> None:
    assert isinstance(create_session_store(SessionSettings(store="memory")), MemorySessionStore)
    sqlite = create_session_store(SessionSettings(store="sqlite", path=str(tmp_path / "s.db")))
    assert isinstance(sqlite, SQLiteSessionStore)
    assert sqlite.path == tmp_path / "s.db"


async def test_two_processes_on_one_sqlite_file_cannot_both_apply_a_round(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    replica_a, replica_b = SQLiteSessionStore(path), SQLiteSessionStore(path)
    created = await replica_a.create("demo", waiting(TaskInfo(task_prompt="q")))
    round_a = await replica_a.load(created.session_id)
    round_b = await replica_b.load(created.session_id)

    outcomes = await asyncio.gather(
        replica_a.save(round_a), replica_b.save(round_b), return_exceptions=True
    )

    assert sorted(type(o).__name__ for o in outcomes) == ["SessionConflictError", "StoredSession"]
    await replica_a.aclose()
    await replica_b.aclose()


class FailingCommit:
    """A connection whose next COMMIT fails (a full disk, an I/O error)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.fail_next_commit = True

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.fail_next_commit:
            self.fail_next_commit = False
            raise sqlite3.OperationalError("disk I/O error")
        return self.connection.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


async def test_a_failed_commit_neither_wedges_the_store_nor_locks_out_other_processes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    store, other_process = SQLiteSessionStore(path), SQLiteSessionStore(path)
    flaky = FailingCommit(store._open())
    store._open = lambda: flaky  # type: ignore[assignment,method-assign,return-value]

    with pytest.raises(SessionError, match="disk I/O error"):
        await store.create("demo", waiting(TaskInfo(task_prompt="lost")))

    # The failed round released the write lock: another process writes at once (no 10 s wait)
    created = await asyncio.wait_for(
        other_process.create("demo", waiting(TaskInfo(task_prompt="q"))), 2
    )
    # and this store carries on, seeing nothing of the failed round.
    loaded = await store.load(created.session_id)
    assert (await store.save(loaded)).version == 2
    await store.aclose()
    await other_process.aclose()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_sqlite_database_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sessions.sqlite3"
    store = SQLiteSessionStore(path)
    await store.create(
        "demo", waiting(TaskInfo(task_prompt="q"))
    )  # the connection stays open: WAL files

    assert mode_of(path.parent) == 0o700
    for name in ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"):
        assert mode_of(path.parent / name) == 0o600, name
    await store.aclose()


async def test_a_readable_database_of_an_earlier_version_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    created = await SQLiteSessionStore(path).create("demo", waiting(TaskInfo(task_prompt="q")))
    path.chmod(0o644)
    tmp_path.chmod(0o755)

    with capture_logs() as events:
        loaded = await SQLiteSessionStore(path).load(created.session_id)

    assert loaded.task.task_prompt == "q"
    assert mode_of(path) == 0o600
    assert mode_of(tmp_path) == 0o755  # an existing directory is the operator's choice
    tightened = [e for e in events if e["event"] == "session_store_permissions_tightened"]
    assert tightened[0]["path"] == str(path) and tightened[0]["mode"] == "0o644"


async def test_a_database_path_that_cannot_be_created_is_a_session_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the directory should be")

    with pytest.raises(SessionStoreUnavailableError, match="taken"):
        await SQLiteSessionStore(tmp_path / "taken" / "s.sqlite3").create(
            "d", waiting(TaskInfo(task_prompt="q"))
        )


def test_the_docs_quote_the_stored_format_this_toolwire_writes() -> None:
    """docs/orchestrator.md's Sessions section shows the payload as the stores write it."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "orchestrator.md").read_text()
    payload = json.loads(task_payload(TaskInfo(task_prompt="q")))

    assert f'{{"format": {SESSION_FORMAT}, "{sorted(payload)[0]}": …}}' in page
    assert "its session is deleted" not in page  # no toolwire code deletes a conversation
