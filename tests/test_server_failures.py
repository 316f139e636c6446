"""Failure paths of the HTTP service in process (FastAPI's test client): a session store that is
down, one that crashes, plugin code that exits, a stored conversation that no longer parses."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from server_support import plugin as trip_plugin
from server_support.processes import write_config
from toolwire import App, SessionStoreUnavailableError
from toolwire.catalogue import ToolRecord, tool_records
from toolwire.llm import ChatModel, ChatReply, ChatRequest, LanguageModel
from toolwire.server import create_app
from toolwire.sessions import MemorySessionStore, StoredSession
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel


class FailingStore(MemorySessionStore):
    """Creates sessions, then fails every load with ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def load(self, session_id: str) -> StoredSession:
        raise self.error


def client_for(tmp_path: Path, store: MemorySessionStore) -> Iterator[TestClient]:
    config = write_config(tmp_path / "toolwire.yaml", sessions={"store": "memory"})
    app = App.load(
        config,
        llm=trip_plugin.scripted_model(),
        session_store=store,
        plugins=[trip_plugin],
        load_entry_points=False,
    )
    with TestClient(create_app(app)) as client:
        yield client


def test_an_unreachable_store_makes_the_server_unready_and_the_resume_503(
    tmp_path: Path,
) -> None:
    store = FailingStore(SessionStoreUnavailableError("redis at 10.1.2.3:6379 refused"))
    with capture_logs() as events:
        for client in client_for(tmp_path, store):
            ready = client.get("/readyz")
            resumed = client.post("/v1/ask", json={"message": "city=Rome", "session_id": "s-1"})

    assert ready.status_code == 503
    assert ready.json()["status"] == "unavailable"
    assert resumed.status_code == 503
    body = resumed.json()
    assert body["error"] == "session_store_unavailable"
    assert body["request_id"] == resumed.headers["x-request-id"]
    error_id = body["details"]["error_id"]
    assert body["message"] == (
        f"the session store cannot be reached; nothing was changed, retry later (error id "
        f"{error_id}); the server's log has the details under this id"
    )
    # where the store lives is for the operator: in the log, under the id the caller got
    assert "10.1.2.3" not in ready.text + resumed.text
    logged = {e["error_id"]: e for e in events if "error_id" in e}
    assert "10.1.2.3" in logged[error_id]["message"]
    ready_id = ready.json()["detail"].removeprefix("session store unreachable (error id ")[:-1]
    assert logged[ready_id]["event"] == "readiness_failed"


def test_a_crash_is_a_json_500_naming_the_request(tmp_path: Path) -> None:
    store = FailingStore(RuntimeError("a bug in a store"))
    for client in client_for(tmp_path, store):
        response = client.post(
            "/v1/ask",
            json={"message": "city=Rome", "session_id": "s-1"},
            headers={"x-request-id": "req-42"},
        )
        ready = client.get("/readyz")

    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-42"
    assert response.json() == {
        "error": "internal_error",
        "message": "the server failed while handling this request; the request id finds the "
        "traceback in the server's log",
        "request_id": "req-42",
        "details": {},
    }
    assert ready.status_code == 503
    assert "a bug in a store" not in ready.text


@asynccontextmanager
async def in_this_loop(
    tmp_path: Path, store: MemorySessionStore, llm: LanguageModel | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service run in the test's own event loop (no lifespan: the app is given),
    so that what would stop the server's loop ends the test at once."""
    config = write_config(tmp_path / "toolwire.yaml", sessions={"store": "memory"})
    app = App.load(
        config,
        llm=llm or trip_plugin.scripted_model(),
        session_store=store,
        plugins=[trip_plugin],
        load_entry_points=False,
    )
    transport = httpx.ASGITransport(create_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://toolwire.test") as client:
        yield client


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_store_that_exits_fails_the_question_not_the_server(
    tmp_path: Path, stream: bool
) -> None:
    """asyncio raises a task's SystemExit out of its event loop: the server would stop."""
    resume = {"message": "city=Rome", "session_id": "s-1", "stream": stream}
    async with in_this_loop(tmp_path, FailingStore(SystemExit(3))) as client:
        failed = await client.post("/v1/ask", json=resume)
        after = await client.post("/v1/ask", json={"message": "book city=Rome"})

    if stream:
        assert failed.status_code == 200 and "event: error" in failed.text, failed.text
        error = json.loads(failed.text.rpartition("data: ")[2])
    else:
        assert failed.status_code == 500, failed.text
        error = failed.json()
    assert error["error"] == "toolwire_error"
    assert error["message"].startswith("the server failed (error id ")
    assert after.status_code == 200 and after.json()["kind"] == "answer", after.text


async def test_a_model_that_exits_while_tools_are_prepared_fails_the_question_not_the_server(
    tmp_path: Path,
) -> None:
    """Parameters are extracted in tasks of their own (one per tool), outside the question's."""

    def exiting(_text: str, _instruction: str) -> None:
        sys.exit(4)

    model = (
        ScriptedModel()
        .on_suitability(lambda _prompt, names: names)
        .on_extract(trip_plugin.BookingParams, exiting)
    )
    with capture_logs() as events:
        async with in_this_loop(tmp_path, MemorySessionStore(), model) as client:
            failed = await client.post("/v1/ask", json={"message": "book city=Rome"})
            after = await client.get("/v1/tools")

    assert failed.status_code == 500, failed.text
    assert after.status_code == 200
    logged = [e["message"] for e in events if e.get("error") == "toolwire_error"]
    assert logged == [
        f"plugin code raised SystemExit: 4 at {__file__}:{exiting.__code__.co_firstlineno + 1} "
        "while answering a question; the question was stopped: plugin code should raise an "
        "exception, not exit"
    ]


class ExitingTransport:
    """A model provider's transport that calls ``sys.exit()`` on every request."""

    async def send(self, request: ChatRequest) -> ChatReply:
        sys.exit(5)

    async def aclose(self) -> None:
        pass


async def test_a_transport_that_exits_while_tools_are_confirmed_fails_the_question_not_the_server(
    tmp_path: Path,
) -> None:
    """Each tool's yes/no question is sent in a task of its own, outside the question's."""
    model = ChatModel(ExitingTransport(), LLMSettings())
    async with in_this_loop(tmp_path, MemorySessionStore(), model) as client:
        failed = await client.post("/v1/ask", json={"message": "book city=Rome"})
        after = await client.get("/v1/tools")

    assert failed.status_code == 500, failed.text
    assert failed.json()["error"] == "toolwire_error"
    assert after.status_code == 200


@pytest.mark.parametrize("damaged", ['{"task_prompt": 42}', "not json"])
def test_a_stored_conversation_that_no_longer_parses_is_a_clear_400(
    tmp_path: Path, damaged: str
) -> None:
    store = MemorySessionStore()
    for client in client_for(tmp_path, store):
        first = client.post("/v1/ask", json={"message": "book a table"}).json()
        assert first["kind"] == "clarification", first
        session_id = first["session_id"]
        store._rows[session_id] = dataclasses.replace(store._rows[session_id], task=damaged)
        response = client.post("/v1/ask", json={"message": "city=Rome", "session_id": session_id})

    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "session_error"
    assert session_id in body["message"] and "start a new conversation" in body["message"]


def test_the_catalogue_is_described_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolwire.server import factory

    calls: list[str] = []

    def counting(app: App) -> list[ToolRecord]:
        calls.append("tool_records")
        return tool_records(app)

    monkeypatch.setattr(factory, "tool_records", counting)
    for client in client_for(tmp_path, MemorySessionStore()):
        first, second = client.get("/v1/tools").json(), client.get("/v1/tools").json()

    assert first == second and [tool["qualified_name"] for tool in first] == ["trip.booking"]
    assert calls == ["tool_records"]
