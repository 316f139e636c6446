"""``toolwire serve`` starts and warms the model as it starts, not at the first question: the
health endpoint answers meanwhile, readiness waits for the model (FastAPI's test client, a fake
model provider standing in for the embedded model)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from server_support.processes import write_config
from toolwire import App
from toolwire.context_buffer import PromptAndContext
from toolwire.errors import ConfigError, ModelError
from toolwire.events import ModelCallFinished, emit
from toolwire.hookspecs import hookimpl
from toolwire.llm.base import CallRecord
from toolwire.llm.profiles import ModelProfile
from toolwire.server import create_app
from toolwire.server import factory as factory_module
from toolwire.server import run as run_module
from toolwire.settings import LLMSettings, ServerSettings
from toolwire.testing import ScriptedModel


class SlowStartingModel(ScriptedModel):
    """Starts when the test says so (or fails to)."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__()
        self.failure = failure
        self.release = threading.Event()
        self.warm_ups = 0

    async def warm_up(self) -> None:
        self.warm_ups += 1
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        if self.failure is not None:
            raise self.failure


class DownUntilFixed(SlowStartingModel):
    """Its answer calls fail as those of a model that does not run, until ``fixed``."""

    fixed = False

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        if not self.fixed:
            record = CallRecord(purpose="answer", model="", ok=False, error="connection refused")
            emit(ModelCallFinished(record=record))
            raise ModelError("answer", "connection refused")
        return await super().answer(question, contexts)


class FailsToStart(SlowStartingModel):
    """Its start fails ``failures`` times (as an embedded model whose server exits), then
    succeeds; the test holds no release (it starts at once)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.release.set()

    async def warm_up(self) -> None:
        self.warm_ups += 1
        if self.warm_ups <= self.failures:
            raise ModelError("local", f"the embedded model server exited (start {self.warm_ups})")


class FakeProvider:
    """A plugin whose model provider, ``slow``, builds the model the test holds."""

    def __init__(self, model: SlowStartingModel) -> None:
        self.model = model

    @hookimpl
    def register_models(self, register: Any) -> None:
        def build(settings: LLMSettings, environ: Any, profile: ModelProfile) -> ScriptedModel:
            return self.model

        register("slow", build)


def load(tmp_path: Path, model: SlowStartingModel) -> App:
    config = write_config(
        tmp_path / "toolwire.yaml",
        sessions={"store": "memory"},
        domains=[{"name": "desk"}],
        default_domain="desk",
        llm={"provider": "slow"},
    )
    return App.load(config, plugins=[FakeProvider(model)], load_entry_points=False)


def ready_after(client: TestClient, timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        ready = client.get("/readyz")
        if ready.status_code != 503 or ready.json()["status"] != "starting":
            return ready
        assert time.monotonic() < deadline, "the model never finished starting"
        time.sleep(0.02)


def test_serve_starts_the_model_at_startup_and_is_ready_once_it_is_up(tmp_path: Path) -> None:
    model = SlowStartingModel()
    with TestClient(create_app(load(tmp_path, model), start_model=True)) as client:
        assert client.get("/healthz").status_code == 200  # not blocked by the model's start
        starting = client.get("/readyz")
        assert model.warm_ups == 1  # before any question
        model.release.set()
        ready = ready_after(client)

    assert (starting.status_code, starting.json()) == (
        503,
        {"status": "starting", "detail": "the model is starting"},
    )
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready"


def test_a_model_that_fails_to_start_makes_the_server_unready_naming_an_error_id(
    tmp_path: Path,
) -> None:
    model = SlowStartingModel(ModelError("local", "the embedded model server exited with code 2"))
    model.release.set()
    with (
        capture_logs() as logs,
        TestClient(create_app(load(tmp_path, model), start_model=True)) as client,
    ):
        ready = ready_after(client)
        health = client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json()["status"] == "unavailable"
    (failed,) = [event for event in logs if event["event"] == "model_start_failed"]
    assert ready.json()["detail"] == f"the model did not start (error id {failed['error_id']})"
    assert "exited with code 2" in failed["detail"]
    assert "exited" not in ready.text  # the reason is the operator's, in the log
    assert health.status_code == 200


def test_readiness_recovers_once_a_question_starts_the_model_after_a_failed_start(
    tmp_path: Path,
) -> None:
    model = DownUntilFixed(ModelError("local", "the embedded model server exited with code 2"))
    model.release.set()
    model.on_answer("hello to you")
    with (
        capture_logs() as logs,
        TestClient(create_app(load(tmp_path, model), start_model=True)) as client,
    ):
        failed = ready_after(client)
        unanswered = client.post("/v1/ask", json={"message": "hello"})
        still_failed = client.get("/readyz")
        model.fixed = True
        answered = client.post("/v1/ask", json={"message": "hello"})
        recovered = client.get("/readyz")

    assert failed.json()["status"] == "unavailable"
    assert unanswered.status_code == 502  # a question whose model call failed proves nothing
    assert still_failed.json() == failed.json()
    assert answered.status_code == 200, answered.text
    assert answered.json()["text"] == "hello to you"
    assert (recovered.status_code, recovered.json()["status"]) == (200, "ready")
    (start_failed,) = [event for event in logs if event["event"] == "model_start_failed"]
    (recovery,) = [event for event in logs if event["event"] == "model_recovered"]
    assert recovery["failed_start_error_id"] == start_failed["error_id"]


def ready_or_failing_after(client: TestClient, timeout_s: float = 5.0) -> Any:
    """``/readyz`` once it is no longer 503 (``starting`` or ``unavailable``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ready = client.get("/readyz")
        if ready.status_code != 503:
            return ready
        assert time.monotonic() < deadline, f"never ready: {ready.json()}"
        time.sleep(0.02)


def test_a_failed_start_is_tried_again_with_a_growing_pause_until_the_server_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unready, a replica behind a load balancer gets no questions, so no question would ever
    start the model: the server tries the start again itself (2, 4, … s, at most 60 s)."""
    monkeypatch.setattr(factory_module, "MODEL_RETRY_FIRST_DELAY_S", 0.01)
    monkeypatch.setattr(factory_module, "MODEL_RETRY_MAX_DELAY_S", 0.04)
    model = FailsToStart(failures=4)  # the start at startup, then three retries, fail
    with (
        capture_logs() as logs,
        TestClient(create_app(load(tmp_path, model), start_model=True)) as client,
    ):
        ready = ready_or_failing_after(client)
        health = client.get("/healthz")

    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    assert health.status_code == 200
    assert model.warm_ups == 5
    (failed,) = [event for event in logs if event["event"] == "model_start_failed"]
    retries = [event for event in logs if event["event"] == "model_start_retry_failed"]
    assert [(e["attempt"], e["retry_in_s"]) for e in retries] == [
        (1, 0.02), (2, 0.04), (3, 0.04)  # doubled, then capped
    ]  # fmt: skip
    assert "start 2" in retries[0]["detail"]
    assert {e["failed_start_error_id"] for e in retries} == {failed["error_id"]}
    (recovered,) = [event for event in logs if event["event"] == "model_recovered"]
    assert (recovered["attempt"], recovered["failed_start_error_id"]) == (4, failed["error_id"])


class NotInstalled(FailsToStart):
    """Its start fails for the install (the runtime missing), which no retry mends."""

    async def warm_up(self) -> None:
        self.warm_ups += 1
        raise ConfigError("the embedded model's runtime (xllamacpp) is not installed")


def test_a_start_that_fails_for_the_install_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(factory_module, "MODEL_RETRY_FIRST_DELAY_S", 0.01)
    model = NotInstalled(failures=0)
    with (
        capture_logs() as logs,
        TestClient(create_app(load(tmp_path, model), start_model=True)) as client,
    ):
        deadline = time.monotonic() + 5
        while not any(e["event"] == "model_start_not_retried" for e in logs):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
        status = client.get("/readyz").json()["status"]

    assert status == "unavailable"
    assert model.warm_ups == 2  # the start at startup and one retry, no more


def test_a_start_tried_again_is_cancelled_at_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(factory_module, "MODEL_RETRY_FIRST_DELAY_S", 0.01)
    monkeypatch.setattr(factory_module, "MODEL_RETRY_MAX_DELAY_S", 0.01)
    model = FailsToStart(failures=1_000_000)  # never starts
    with TestClient(create_app(load(tmp_path, model), start_model=True)) as client:
        while model.warm_ups < 3:  # tried again, and again
            time.sleep(0.01)
        assert client.get("/readyz").json()["status"] == "unavailable"
        stopping = time.monotonic()
    took = time.monotonic() - stopping
    stopped = model.warm_ups
    time.sleep(0.1)

    assert took < 5
    assert model.warm_ups == stopped  # no start tried after the shutdown


def test_with_error_details_exposed_readiness_says_why_the_model_did_not_start(
    tmp_path: Path,
) -> None:
    model = SlowStartingModel(ModelError("local", "the embedded model server exited with code 2"))
    model.release.set()
    settings = ServerSettings(expose_error_details=True)
    with TestClient(create_app(load(tmp_path, model), settings, start_model=True)) as client:
        ready = ready_after(client)

    assert ready.json()["detail"] == (
        "the model did not start: model call for 'local' failed: the embedded model server "
        "exited with code 2"
    )


def test_without_start_model_the_model_waits_for_the_first_question(tmp_path: Path) -> None:
    model = SlowStartingModel()
    with TestClient(create_app(load(tmp_path, model))) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200
    assert model.warm_ups == 0


def test_a_server_stopped_while_the_model_starts_shuts_down(tmp_path: Path) -> None:
    model = SlowStartingModel()  # never released
    with TestClient(create_app(load(tmp_path, model), start_model=True)) as client:
        assert client.get("/readyz").json()["status"] == "starting"
    assert model.warm_ups == 1  # cancelled at shutdown, not waited for


def test_toolwire_serve_starts_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[FastAPI] = []

    async def serve_asgi(asgi: FastAPI, *args: object, **kwargs: object) -> None:
        served.append(asgi)

    monkeypatch.setattr(run_module, "serve_asgi", serve_asgi)
    asyncio.run(run_module.serve(load(tmp_path, SlowStartingModel())))

    with TestClient(served[0]) as client:
        assert client.get("/readyz").json()["status"] == "starting"
