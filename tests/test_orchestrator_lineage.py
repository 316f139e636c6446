"""Plugin logs are correlated for free (issue 11 item 11): while a step runs, structlog's context
variables hold its lineage (request id, session, domain, task number, tool, coordinator), so the
events a tool or coordinator logs itself carry them, in its worker thread too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from orchestration_kit import NoParams, domain, plugin_of
from toolwire import (
    AgentCoordinator,
    App,
    Clarification,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolExecutionResult,
)
from toolwire.redaction import session_ref
from toolwire.server import create_app
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel, conversation_for

plugin_log = structlog.get_logger("a_plugin")
MERGED = [structlog.contextvars.merge_contextvars]
"""What toolwire's logging configuration does first; ``capture_logs`` alone would skip it."""


class Planner(OrchestratorActivatedTool[NoParams], AgentCoordinator):
    """A plain coordinator that logs while it decomposes."""

    name = "planner"

    def executable_instruction(self) -> str:
        return "planner: always false"

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        plugin_log.info("planning")
        task.sub_tasks.append(TaskInfo(task_prompt="look it up", required_tool_names={"finder"}))
        return task

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("")


class Finder(OrchestratorActivatedTool[NoParams]):
    """A plain tool (run in a tool thread) that logs."""

    name = "finder"

    def executable_instruction(self) -> str:
        return "finder: always false"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        plugin_log.info("finding")
        return ToolExecutionResult.context("found")


class Asker(OrchestratorActivatedTool[NoParams]):
    """An ``async`` tool that logs, asks once, and logs again when the reply arrives."""

    name = "asker"

    def executable_instruction(self) -> str:
        return "Does the user need the asker?"

    async def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        plugin_log.info("asking")
        return ToolExecutionResult.clarifying_question("Sure?")

    async def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        plugin_log.info("answered")
        return ToolExecutionResult.context("sure")


LINEAGE = ("request_id", "session", "domain", "task_no", "tool", "coordinator")


def lineage(logs: list[dict[str, Any]], event: str) -> dict[str, Any]:
    [entry] = [entry for entry in logs if entry["event"] == event]
    return {key: entry[key] for key in LINEAGE if entry.get(key) is not None}


def scripted() -> ScriptedModel:
    return ScriptedModel().on_suitability(["asker"]).on_answer()


async def test_events_a_plugin_logs_carry_the_lineage_of_their_step() -> None:
    service = conversation_for(domain(), Planner(), Finder(), Asker(), model=scripted())

    with capture_logs(processors=MERGED) as logs:
        question = await service.ask("q")
        assert structlog.contextvars.get_contextvars() == {}  # nothing leaks past the round
        await service.ask("yes", session_id=question.session_id)

    assert lineage(logs, "planning") == {
        "domain": "demo",
        "task_no": "1",
        "coordinator": "demo.planner",
    }
    assert lineage(logs, "finding") == {
        "domain": "demo",
        "task_no": "1.1",
        "tool": "demo.finder",
        "coordinator": "demo.planner",  # the coordinator that made the task
    }
    assert lineage(logs, "asking") == {"domain": "demo", "task_no": "1", "tool": "demo.asker"}
    assert question.session_id is not None
    assert lineage(logs, "answered") == {
        "session": session_ref(question.session_id),
        "domain": "demo",
        "task_no": "1",
        "tool": "demo.asker",
    }
    assert structlog.contextvars.get_contextvars() == {}


def test_over_http_the_request_id_joins_the_lineage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_LOG_LEVEL", "info")  # App.load configures logging
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: demo\n")
    app = App.load(
        config,
        llm=scripted(),
        session_store=MemorySessionStore(),
        plugins=[plugin_of(domain(), Planner, Finder, Asker)],
        load_entry_points=False,
    )
    with TestClient(create_app(app)) as client, capture_logs(processors=MERGED) as logs:
        response = client.post("/v1/ask", json={"message": "q"}, headers={"x-request-id": "req-7"})

    assert response.status_code == 200, response.text
    assert lineage(logs, "finding") == {
        "request_id": "req-7",
        "domain": "demo",
        "task_no": "1.1",
        "tool": "demo.finder",
        "coordinator": "demo.planner",
    }
