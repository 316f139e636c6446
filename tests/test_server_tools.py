"""Tools that misbehave behind real HTTP with real SQLite sessions (issue 11 items 4 and 5): a
server process whose tool threads are all stuck stays ready and keeps its sessions; a tool that
calls ``sys.exit()`` costs a recorded failure, not a plain-text 500."""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_support.processes import ServerProcess, write_config

pytestmark = pytest.mark.requires_extra("server")  # `toolwire serve` processes

TOOL_THREADS = 2
STUCK_QUESTIONS = min(32, (os.cpu_count() or 1) + 4) + 2
"""More than the default executor's threads: with tools on it, the store would wait behind them."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("tool-faults")
    config = write_config(
        workdir / "toolwire.yaml",
        sessions={"store": "sqlite", "path": str(workdir / "sessions.sqlite3")},
        server={"request_timeout_s": 20, "max_concurrent_questions": STUCK_QUESTIONS + 2},
        orchestrator={"tool_threads": TOOL_THREADS, "tool_timeout_s": 1},
    )
    process = ServerProcess(
        config, workdir / "server.log", env={"TOOLWIRE_TEST_SIGNAL_DIR": str(workdir)}
    ).start()
    yield process
    (workdir / "release").touch()
    process.stop()


def ask(server: ServerProcess, message: str, session_id: str | None = None) -> httpx.Response:
    body = {"message": message, "session_id": session_id}
    return httpx.post(f"{server.url}/v1/ask", json=body, timeout=30)


def tool_failures(server: ServerProcess) -> list[str]:
    return [str(e["problem"]) for e in server.events() if e.get("event") == "tool_failed"]


def test_a_tool_calling_sys_exit_is_a_recorded_failure_and_the_server_carries_on(
    server: ServerProcess,
) -> None:
    response = ask(server, "city=Rome exit=3")

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert answer["kind"] == "answer" and answer["failures"]
    assert tool_failures(server)[-1] == "tool trip.booking raised SystemExit: 3"
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert ask(server, "city=Rome").json()["text"].startswith("Table booked in Rome")


def test_stuck_tools_hold_only_the_tool_threads(server: ServerProcess) -> None:
    waiting = ask(server, "book a table").json()
    assert waiting["kind"] == "clarification", waiting  # a session in SQLite

    earlier = len(tool_failures(server))
    begin = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(STUCK_QUESTIONS) as pool:
        stuck = list(
            pool.map(lambda n: ask(server, f"city=C{n} wait=stuck"), range(STUCK_QUESTIONS))
        )
    elapsed = time.monotonic() - begin

    assert [response.status_code for response in stuck] == [200] * STUCK_QUESTIONS
    answers: list[dict[str, Any]] = [response.json() for response in stuck]
    assert all(answer["kind"] == "answer" and answer["failures"] for answer in answers)
    assert elapsed < 10, f"the stuck questions took {elapsed:.1f} s (tool limit 1 s)"
    timed_out = "tool trip.booking did not finish within 1 s (orchestrator.tool_timeout_s)"
    not_run = "tool trip.booking was not run: all 2 tool threads are held by calls that ran out"
    problems = tool_failures(server)[earlier:]
    assert len(problems) == STUCK_QUESTIONS
    assert problems.count(timed_out) >= TOOL_THREADS  # late arrivals find the threads held
    assert all(problem == timed_out or problem.startswith(not_run) for problem in problems)

    # Both tool threads are still held by stuck calls: the store and readiness do not care.
    ready = httpx.get(f"{server.url}/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    held = ask(server, "city=Rome", waiting["session_id"])
    assert held.status_code == 200
    assert held.json()["failures"], held.json()  # ran from SQLite; the tool could not run
    assert not_run in tool_failures(server)[-1]
    stored = ask(server, "city=Rome", waiting["session_id"]).json()  # the round finished
    assert stored["turn"] == 3  # the next message is the conversation's next turn

    (Path(server.config).parent / "release").touch()
    deadline = time.monotonic() + 10
    while not (answer := ask(server, "city=Oslo").json())["text"].startswith("Table booked"):
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    assert answer["failures"] == []
