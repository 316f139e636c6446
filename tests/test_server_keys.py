"""Several named API keys over real HTTP: a conversation belongs to the key that started it.

One server process with two tenants' keys and a SQLite session store; the binding is checked in
the store as well (SQLite, including a database written before sessions had owners)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.security import HTTPAuthorizationCredentials

from server_support.processes import ServerProcess, write_config
from toolwire import ConfigError, TaskInfo
from toolwire.conversation import waiting
from toolwire.server.auth import ApiKey, authenticate, read_api_keys
from toolwire.sessions import SQLiteSessionStore, task_payload
from toolwire.settings import ApiKeySettings, ServerSettings

TOKENS = {"TENANT_A_KEY": "token-of-tenant-a", "TENANT_B_KEY": "token-of-tenant-b"}
KEYS = [
    {"name": "tenant-a", "token_env": "TENANT_A_KEY"},
    {"name": "tenant-b", "token_env": "TENANT_B_KEY"},
]


def as_tenant(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer token-of-{name}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("keys")
    config = write_config(
        workdir / "toolwire.yaml",
        sessions={"store": "sqlite", "path": str(workdir / "sessions.sqlite3")},
        server={"api_keys": KEYS},
    )
    env = {**TOKENS, "TOOLWIRE_TEST_SIGNAL_DIR": str(workdir)}
    process = ServerProcess(config, workdir / "server.log", env=env).start()
    yield process
    process.stop()


def ask(server: ServerProcess, tenant: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/ask", json=body, headers=as_tenant(tenant), timeout=10)


def test_each_key_is_accepted_and_no_other(server: ServerProcess) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        assert httpx.get(f"{server.url}/v1/domains", headers=as_tenant(tenant)).status_code == 200
    refused = httpx.get(f"{server.url}/v1/domains", headers=as_tenant("tenant-c"))
    assert refused.status_code == 401


def test_another_key_cannot_continue_a_conversation_and_it_stays_intact(
    server: ServerProcess,
) -> None:
    started = ask(server, "tenant-a", {"message": "book a table"}).json()
    session_id = started["session_id"]

    stolen = ask(server, "tenant-b", {"message": "city=Oslo", "session_id": session_id})
    missing = ask(server, "tenant-b", {"message": "city=Oslo", "session_id": "no-such-session"})
    resumed = ask(server, "tenant-a", {"message": "city=Rome", "session_id": session_id})

    assert stolen.status_code == 404, stolen.text
    body = stolen.json()
    assert body["error"] == "unknown_session"
    # the refusal says no more than a missing session would: nothing tells that it exists
    assert body["message"] == missing.json()["message"].replace("no-such-session", session_id)
    assert resumed.status_code == 200, resumed.text
    assert "Table booked in Rome" in resumed.json()["text"]


def test_the_log_names_the_caller_and_the_refused_one(server: ServerProcess) -> None:
    started = ask(server, "tenant-b", {"message": "book a table"}).json()
    ask(server, "tenant-a", {"message": "city=Oslo", "session_id": started["session_id"]})

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        events = server.events()
        mismatches = [e for e in events if e["event"] == "session_owner_mismatch"]
        if mismatches:
            break
        time.sleep(0.05)
    assert mismatches[-1]["owner"] == "tenant-b" and mismatches[-1]["caller"] == "tenant-a"
    started_event = next(e for e in events if e["event"] == "server_started")
    assert started_event["api_keys"] == ["tenant-a", "tenant-b"]
    assert all(token not in server.log_text() for token in TOKENS.values())


def test_a_key_whose_variable_is_unset_stops_the_server(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "toolwire.yaml", sessions={"store": "memory"}, server={"api_keys": KEYS}
    )
    process = ServerProcess(config, tmp_path / "server.log", env={"TENANT_A_KEY": "x" * 16})
    with pytest.raises(
        RuntimeError,
        match=r"API key 'tenant-b': the environment variable "
        r"TENANT_B_KEY is not set",
    ):
        process.start(timeout_s=20)
    process.stop()


def test_reading_the_keys_reports_every_problem_at_once() -> None:
    settings = ServerSettings(
        api_keys=[
            ApiKeySettings(name="a", token_env="KEY_A"),
            ApiKeySettings(name="a", token_env="KEY_A2"),
            ApiKeySettings(name="b", token_env="KEY_B"),
            ApiKeySettings(name="c", token_env="KEY_C"),
            ApiKeySettings(name="d", token_env="KEY_D"),
        ]
    )
    environ = {"KEY_A": "same", "KEY_A2": "other", "KEY_B": "same", "KEY_C": "  "}

    with pytest.raises(ConfigError) as raised:
        read_api_keys(settings, environ)

    assert [str(problem) for problem in raised.value.problems] == [
        "API key 'c': the environment variable KEY_C is set but empty; set it to the key's "
        "token, or unset it",
        "API key 'd': the environment variable KEY_D is not set; set it to the key's token, or "
        "remove the key from server.api_keys",
        "two API keys are named 'a'; give each key its own name",
        "API keys 'a' and 'b' have the same token; give each key its own token, so that a "
        "token says who is calling",
    ]


def test_the_default_key_and_named_keys_combine() -> None:
    settings = ServerSettings(api_keys=[ApiKeySettings(name="ops", token_env="OPS_KEY")])
    keys = read_api_keys(settings, {"TOOLWIRE_API_TOKEN": "t1", "OPS_KEY": "t2"})
    assert keys == [ApiKey("default", "t1"), ApiKey("ops", "t2")]
    assert "t1" not in repr(keys)
    assert read_api_keys(ServerSettings(), {}) == []  # no key: no authentication


def test_white_space_around_a_token_is_not_part_of_it() -> None:
    """A secret made from a file ends in a newline: it was accepted at start, and then no client
    could send it (every request got 401)."""
    settings = ServerSettings(api_keys=[ApiKeySettings(name="ops", token_env="OPS_KEY")])
    environ = {"TOOLWIRE_API_TOKEN": "t1\n", "OPS_KEY": "  t2\r\n"}

    keys = read_api_keys(settings, environ)

    assert keys == [ApiKey("default", "t1"), ApiKey("ops", "t2")]
    sent = HTTPAuthorizationCredentials(scheme="Bearer", credentials="t1")
    assert authenticate(keys, sent) == "default"
    with pytest.raises(ConfigError) as raised:  # one token, once stripped
        read_api_keys(settings, {"TOOLWIRE_API_TOKEN": "same\n", "OPS_KEY": "same"})
    assert [str(problem) for problem in raised.value.problems] == [
        "API keys 'default' and 'ops' have the same token; give each key its own token, so "
        "that a token says who is calling"
    ]


async def test_the_sqlite_store_keeps_the_owner(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    created = await store.create("trip", waiting(TaskInfo(task_prompt="q")), owner="tenant-a")
    loaded = await SQLiteSessionStore(tmp_path / "s.sqlite3").load(created.session_id)
    assert created.owner == loaded.owner == "tenant-a"
    assert (await store.save(loaded)).owner == "tenant-a"


async def test_a_database_written_before_owners_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    with connection:
        connection.execute(
            "CREATE TABLE toolwire_sessions (session_id TEXT PRIMARY KEY, domain TEXT NOT NULL, "
            "task TEXT NOT NULL, version INTEGER NOT NULL, expires_at REAL NOT NULL)"
        )
        connection.execute(
            "INSERT INTO toolwire_sessions VALUES ('old', 'trip', ?, 1, ?)",
            (task_payload(TaskInfo(task_prompt="q")), time.time() + 60),
        )
    connection.close()
    store = SQLiteSessionStore(path)

    old = await store.load("old")
    new = await store.create("trip", waiting(TaskInfo(task_prompt="q")), owner="tenant-a")

    assert old.owner is None
    assert (await store.load(new.session_id)).owner == "tenant-a"
