"""What HTTP callers see of internal errors, over real HTTP: a tool's exception holding a
connection string with its password, and a model server's error body echoing the API key.

Callers get a generic reason and an error id; the text stays in the server's log under that id,
with secret shapes masked. ``server.expose_error_details`` shows the (masked) text instead."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_support.fake_model import fake_model_in_thread
from server_support.plugin import NOTHING
from server_support.processes import ServerProcess, write_config
from toolwire.testing.fake_openai import FakeReply, FakeRequest

pytestmark = pytest.mark.requires_extra("server")  # `toolwire serve` processes

ERROR_ID = r"[0-9a-f]{12}"
LEAKED_KEY = "sk-proj-LeakedKey0123456789abcdefXYZ"
UPSTREAM_HOST = "gpu-7.inference.internal.example"


def start(
    workdir: Path,
    *,
    server: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    **top_level: Any,
) -> ServerProcess:
    config = write_config(
        workdir / "toolwire.yaml", sessions={"store": "memory"}, server=server, **top_level
    )
    return ServerProcess(config, workdir / "server.log", env=env or {}).start()


@pytest.fixture(scope="module")
def withheld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start(tmp_path_factory.mktemp("withheld"))
    yield process
    process.stop()


def ask(server: ServerProcess, message: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/ask", json={"message": message}, timeout=30)


def logged(server: ServerProcess, error_id: str) -> dict[str, Any]:
    """The log event that holds the text behind ``error_id``."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for event in server.events():
            if event.get("error_id") == error_id:
                return event
        time.sleep(0.05)
    raise AssertionError(f"no log event carries error id {error_id}")


def test_a_tool_exception_reaches_the_caller_as_a_reason_and_an_error_id(
    withheld: ServerProcess,
) -> None:
    response = ask(withheld, "book city=Oslo fail=db")

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["text"].startswith(NOTHING)
    (failure,) = answer["failures"]
    prefix = "task 1: tool trip.booking failed (error id "
    assert failure.startswith(prefix) and failure.endswith(")")
    error_id = failure.removeprefix(prefix)[:-1]
    (run,) = answer["trace"]["tools"]
    assert (run["outcome"], run["detail"]) == ("error", f"failed (error id {error_id})")
    assert answer["trace"]["failures"] == ["tool trip.booking failed (error id " + error_id + ")"]
    for internal in ("hunter2", "db.internal.example", "postgresql", "ConnectionError"):
        assert internal not in response.text
    event = logged(withheld, error_id)
    assert event["event"] == "error_withheld"
    assert (event["task_no"], event["tool"]) == ("1", "trip.booking")
    assert "could not connect to postgresql://booking:***@db.internal.example" in event["detail"]
    assert "hunter2" not in withheld.log_text()


def test_a_trusted_deployment_may_show_the_details_still_masked(tmp_path: Path) -> None:
    exposed = start(tmp_path, server={"expose_error_details": True})
    try:
        answer = ask(exposed, "book city=Oslo fail=db").json()
    finally:
        exposed.stop()

    assert answer["failures"] == [
        "task 1: tool trip.booking raised ConnectionError: could not connect to "
        "postgresql://booking:***@db.internal.example:5432/tables: connection refused"
    ]
    assert "hunter2" not in str(answer) and "hunter2" not in exposed.log_text()


def upstream_refusal(request: FakeRequest) -> FakeReply:
    """A model server whose error body echoes the key it was sent and names its own host."""
    return FakeReply(
        status=500,
        error=f"Incorrect API key provided: {LEAKED_KEY}; rejected by {UPSTREAM_HOST}",
    )


def test_an_upstream_model_error_body_never_reaches_the_caller(tmp_path: Path) -> None:
    with fake_model_in_thread(upstream_refusal) as upstream:
        server = start(
            tmp_path,
            llm={
                "base_url": upstream.base_url,
                "model": "fake-model",
                "max_retries": 0,
                "timeout_s": 5,
            },
            env={"TOOLWIRE_TEST_REAL_MODEL": "1", "OPENAI_API_KEY": LEAKED_KEY},
        )
        try:
            response = ask(server, "book city=Oslo")
        finally:
            server.stop()
        assert upstream.chat_requests, "the gateway never reached the fake model"

    assert LEAKED_KEY not in response.text and UPSTREAM_HOST not in response.text
    body = response.json()
    if response.status_code == 200:  # a failed model call is recorded, the question goes on
        errors = [call["error"] for call in body["model_calls"] if call["error"]]
        assert errors and all(error.startswith("failed (error id ") for error in errors)
        error_id = errors[0].removeprefix("failed (error id ")[:-1]
    else:  # a dead model is the caller's 502
        assert (response.status_code, body["error"]) == (502, "model_error")
        assert body["message"].startswith("the language model failed (error id ")
        error_id = body["details"]["error_id"]
    event = logged(server, error_id)
    assert UPSTREAM_HOST in str(event)  # the operator gets the whole story
    assert LEAKED_KEY not in server.log_text()  # but never the key
