"""Two server processes sharing one session store (SQLite file, then a real redis-server):
a conversation moves freely between replicas, survives a replica killed mid-round, and two
replicas resuming it at the same moment cannot both apply the round."""

from __future__ import annotations

import concurrent.futures
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from server_support.processes import ServerProcess, write_config
from server_support.redis_server import running_redis
from toolwire.sessions.redis import DEFAULT_KEY_PREFIX


@dataclass
class Replicas:
    """Servers A and B on one store; a killed one is started again for the next test."""

    config: Path
    workdir: Path
    servers: dict[str, ServerProcess]
    sessions: dict[str, Any]
    """The shared store's ``sessions`` configuration."""
    starts: int = 0

    def start(self, name: str) -> ServerProcess:
        self.starts += 1
        server = ServerProcess(
            self.config,
            self.workdir / f"{name}-{self.starts}.log",
            env={"TOOLWIRE_TEST_SIGNAL_DIR": str(self.signals)},
        ).start()
        self.servers[name] = server
        return server

    @property
    def signals(self) -> Path:
        return self.workdir / "signals"

    def __getitem__(self, name: str) -> ServerProcess:
        server = self.servers.get(name)
        if server is None or server.process is None or server.process.poll() is not None:
            server = self.start(name)
        return server

    def reset_signals(self) -> None:
        for path in self.signals.iterdir():
            path.unlink()

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    def damage(self, session_id: str, column: str, value: str) -> None:
        """Overwrite one column of a stored conversation behind the servers' backs."""
        if self.sessions["store"] == "sqlite":
            connection = sqlite3.connect(self.sessions["path"])
            with connection:
                connection.execute(
                    f"UPDATE toolwire_sessions SET {column} = ? WHERE session_id = ?",
                    (value, session_id),
                )
            connection.close()
            return
        client = redis.Redis.from_url(self.sessions["redis_url"])
        try:
            assert client.hset(f"{DEFAULT_KEY_PREFIX}{session_id}", column, value) == 0
        finally:
            client.close()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    workdir = tmp_path_factory.mktemp(f"replicas-{request.param}")
    (workdir / "signals").mkdir()

    def pair(sessions: dict[str, Any]) -> Replicas:
        config = write_config(workdir / "toolwire.yaml", sessions=sessions)
        group = Replicas(config, workdir, {}, sessions)
        for name in ("A", "B"):
            group.start(name)
        return group

    if request.param == "sqlite":
        group = pair({"store": "sqlite", "path": str(workdir / "shared.sqlite3")})
        yield group
        group.stop()
    else:
        with running_redis(workdir) as url:
            group = pair({"store": "redis", "redis_url": url})
            yield group
            group.stop()


def ask(server: ServerProcess, message: str, session_id: str | None = None) -> httpx.Response:
    body = {"message": message, "session_id": session_id}
    return httpx.post(f"{server.url}/v1/ask", json=body, timeout=30)


def pid_of(server: ServerProcess) -> int:
    assert server.process is not None
    return server.process.pid


def start_conversation(server: ServerProcess) -> str:
    answer = ask(server, "book a table").json()
    assert answer["kind"] == "clarification", answer
    session_id: str = answer["session_id"]
    return session_id


def test_a_clarification_asked_on_one_replica_is_answered_on_the_other(
    replicas: Replicas,
) -> None:
    session_id = start_conversation(replicas["A"])

    answer = ask(replicas["B"], "city=Szeged", session_id).json()

    assert answer["kind"] == "answer"
    assert f"Table booked in Szeged (pid {pid_of(replicas['B'])})" in answer["text"]


def test_a_replica_killed_mid_round_loses_nothing(replicas: Replicas) -> None:
    replicas.reset_signals()
    session_id = start_conversation(replicas["A"])
    victim = replicas["A"]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(ask, victim, "city=Rome wait=hang", session_id)
        hanging = replicas.signals / f"hanging-{pid_of(victim)}"
        deadline = time.monotonic() + 20
        while not hanging.exists():
            assert time.monotonic() < deadline, "the round never reached the tool"
            time.sleep(0.02)
        victim.kill()
        with pytest.raises(httpx.HTTPError):
            in_flight.result(timeout=10)

    answer = ask(replicas["B"], "city=Rome", session_id).json()
    assert answer["kind"] == "answer", answer
    assert f"Table booked in Rome (pid {pid_of(replicas['B'])})" in answer["text"]


def resume_on_both(replicas: Replicas, reply: str) -> tuple[str, list[httpx.Response]]:
    """Start a conversation on A, then send ``reply`` (``{n}`` numbers the replica) to A and B at
    once; both rounds wait for each other inside the tool, then both try to store their round."""
    replicas.reset_signals()
    a, b = replicas["A"], replicas["B"]
    session_id = start_conversation(a)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(ask, server, reply.format(n=n), session_id)
            for n, server in enumerate((a, b))
        ]
        return session_id, [future.result(timeout=30) for future in futures]


def test_two_replicas_resuming_at_once_apply_the_round_once(replicas: Replicas) -> None:
    session_id, responses = resume_on_both(replicas, "city=X{n} wait=barrier ask=again")
    a, b = replicas["A"], replicas["B"]

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200, 409], [r.text for r in responses]
    winner = next(r for r in responses if r.status_code == 200).json()
    loser = next(r for r in responses if r.status_code == 409).json()
    assert winner["kind"] == "clarification" and winner["session_id"] == session_id
    assert loser["error"] == "session_conflict"
    assert "send this message again with the same session id" in loser["message"]
    assert loser["details"]["session_id"] == session_id

    # Nothing is lost: the conversation still waits, and either replica can finish it.
    loser_server = a if responses[0].status_code == 409 else b
    answer = ask(loser_server, "city=Oslo ask=no wait=no", session_id).json()
    assert answer["kind"] == "answer", answer
    assert "Table booked in Oslo" in answer["text"]


def test_two_replicas_finishing_at_once_answer_once(replicas: Replicas) -> None:
    session_id, responses = resume_on_both(replicas, "city=Y{n} wait=barrier")

    assert sorted(r.status_code for r in responses) == [200, 409], [r.text for r in responses]
    winner = next(r for r in responses if r.status_code == 200).json()
    assert winner["kind"] == "answer"
    later = ask(replicas["A"], "city=Z", session_id)  # the conversation goes on, once
    assert later.status_code == 200, later.text
    assert later.json()["turn"] == 3


@pytest.mark.parametrize(
    ("column", "value", "named"),
    [("version", "abc", "its version is 'abc'"), ("task", "{not json", "in its conversation")],
)
def test_a_damaged_stored_column_is_a_clear_400(
    replicas: Replicas, column: str, value: str, named: str
) -> None:
    session_id = start_conversation(replicas["A"])
    replicas.damage(session_id, column, value)

    response = ask(replicas["B"], "city=Rome", session_id)

    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "session_error"
    assert named in body["message"] and "start a new conversation" in body["message"]
