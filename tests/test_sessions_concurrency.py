"""Two replicas resuming one conversation at the same moment, over each session store (memory,
SQLite, Redis): exactly one round is applied, the other gets ``SessionConflictError`` (409 over
HTTP), and the conversation stays resumable with nothing lost."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from server_support.redis_server import running_redis
from toolwire import (
    OrchestratorActivatedTool,
    SessionConflictError,
    ToolExecutionResult,
)
from toolwire.orchestrator import Answer, ConversationService
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore, SessionStore, SQLiteSessionStore
from toolwire.sessions.redis import RedisSessionStore
from toolwire.testing import ScriptedModel, conversation_for


class Reply(BaseModel):
    city: str | None = None
    ask: str | None = None


def extract(text: str, _instruction: str = "") -> Reply:
    """The last ``city=`` of the text (the user's latest reply comes last), and ``ask=`` of the
    latest reply only: it asks for one more round, not for every round after it."""
    city = re.findall(r"\bcity=(\w+)", text)
    ask = re.findall(r"\bask=(\w+)", text.rpartition("User's reply:")[2])
    return Reply(city=city[-1] if city else None, ask=ask[-1] if ask else None)


class Booking(OrchestratorActivatedTool[Reply]):
    """Asks which city until it has one; ``ask=again`` asks once more. With a barrier set, every
    round waits at it, so two replicas are inside the same round before either stores it."""

    name = "booking"

    def __init__(self) -> None:
        self.barrier: asyncio.Barrier | None = None

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    async def execute_with_result(self, params: Reply, text: str) -> ToolExecutionResult:
        if self.barrier is not None:
            async with asyncio.timeout(5):
                await self.barrier.wait()
        if params.city is None or params.ask == "again":
            return ToolExecutionResult.clarifying_question("Which city?")
        return ToolExecutionResult.context(f"Booked in {params.city}.")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """The store as two replicas see it (one object for memory, which cannot be shared)."""
    if request.param == "memory":
        memory = MemorySessionStore()
        pair: tuple[SessionStore, SessionStore] = (memory, memory)
    elif request.param == "sqlite":
        path = tmp_path / "sessions.sqlite3"
        pair = (SQLiteSessionStore(path), SQLiteSessionStore(path))
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test:{uuid.uuid4().hex}:"
        pair = (
            RedisSessionStore(url, ttl_s=60, key_prefix=prefix),
            RedisSessionStore(url, ttl_s=60, key_prefix=prefix),
        )
    yield pair
    for store in set(pair):
        await store.aclose()


def replicas(
    stores: tuple[SessionStore, SessionStore], tool: Booking
) -> tuple[ConversationService, ConversationService]:
    model = (
        ScriptedModel()
        .on_suitability(lambda _prompt, names: names)
        .on_extract(Reply, extract)
        .on_answer()
    )
    domain = DomainSpec(name="trip")
    a, b = (conversation_for(domain, tool, model=model, store=store) for store in stores)
    return a, b


async def resume_together(
    services: tuple[ConversationService, ConversationService], tool: Booking, session_id: str,
    message: str,
) -> tuple[Answer, SessionConflictError]:
    tool.barrier = asyncio.Barrier(2)
    outcomes = await asyncio.gather(
        *(service.ask(message, session_id=session_id) for service in services),
        return_exceptions=True,
    )
    tool.barrier = None
    answers = [o for o in outcomes if isinstance(o, Answer)]
    conflicts = [o for o in outcomes if isinstance(o, SessionConflictError)]
    assert (len(answers), len(conflicts)) == (1, 1), outcomes
    return answers[0], conflicts[0]


async def test_a_round_resumed_twice_at_once_is_applied_once_and_stays_resumable(
    stores: tuple[SessionStore, SessionStore],
) -> None:
    tool = Booking()
    a, b = replicas(stores, tool)
    first = await a.ask("book a table")
    assert first.kind == "clarification" and first.session_id is not None

    winner, conflict = await resume_together((a, b), tool, first.session_id, "city=X ask=again")

    assert winner.kind == "clarification" and winner.session_id == first.session_id
    assert (conflict.expected_version, conflict.actual_version) == (1, 2)
    assert "send this message again with the same session id" in str(conflict)
    stored = await stores[1].load(first.session_id)
    assert stored.version == 2  # the winner's round, and only it
    # The loser's user sends the message again, on either replica: the conversation finishes.
    answer = await b.ask("city=Oslo", session_id=first.session_id)
    assert answer.kind == "answer" and "Booked in Oslo." in answer.text


async def test_a_round_finished_twice_at_once_answers_once(
    stores: tuple[SessionStore, SessionStore],
) -> None:
    tool = Booking()
    a, b = replicas(stores, tool)
    first = await a.ask("book a table")
    assert first.session_id is not None

    winner, conflict = await resume_together((a, b), tool, first.session_id, "city=Rome")

    assert winner.kind == "answer" and "Booked in Rome." in winner.text
    assert conflict.session_id == first.session_id
    # the winner's turn alone was applied: the question, then one answer; nothing waits
    stored = await a.store.load(first.session_id)
    assert [turn.kind for turn in stored.conversation.turns] == ["clarification", "answer"]
    assert stored.task is None
