"""``toolwire ask`` and ``toolwire chat`` over a test plugin and a scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

import toolwire
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.cli import app as cli_app
from toolwire.cli import ask_commands
from toolwire.plugins import RegisterDomain, RegisterTool
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel


class Booking(BaseModel):
    city: str | None = None


class BookingTool(OrchestratorActivatedTool[Booking]):
    name = "booking"

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_result(self, params: Booking, text: str) -> ToolExecutionResult:
        if params.city is None:
            return ToolExecutionResult.clarifying_question("Which city?")
        return ToolExecutionResult.as_guaranteed_context(f"Table booked in {params.city}.")


class TripPlugin:
    @toolwire.hookimpl
    def register_domains(self, register: RegisterDomain) -> None:
        register(DomainSpec(name="trip"))

    @toolwire.hookimpl
    def register_tools(self, register: RegisterTool) -> None:
        register(BookingTool, domain="trip")


def _city(text: str, instruction: str) -> Booking:
    found = re.findall(r"\b(Paris|Rome)\b", text)
    return Booking(city=found[-1] if found else None)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None) -> CliRunner:
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        f"default_domain: trip\nsessions:\n  store: sqlite\n  path: {tmp_path / 's.sqlite3'}\n",
        encoding="utf-8",
    )

    def load_app(ctx: object) -> App:
        model = ScriptedModel().on_suitability(["booking"]).on_extract(Booking, _city)
        return App.load(config, plugins=[TripPlugin()], load_entry_points=False, llm=model)

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    return CliRunner()


def test_ask_answers_and_draws_the_trace(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "book a table in Paris", "--trace"])

    assert result.exit_code == 0, result.output
    assert "Table booked in Paris." in result.output
    assert "task 1" in result.output and "trip.booking (suitability) guaranteed" in result.output
    assert "2 model call(s)" in result.output


def test_ask_json_then_reply_with_the_session(cli: CliRunner) -> None:
    first = cli.invoke(cli_app, ["ask", "book a table", "--json"])
    question = json.loads(first.output)
    assert question["kind"] == "clarification" and question["text"] == "Which city?"

    second = cli.invoke(cli_app, ["ask", "Rome", "--session", question["session_id"], "--json"])

    answer = json.loads(second.output)
    assert answer["kind"] == "answer"
    assert answer["guaranteed_contexts"] == ["Table booked in Rome."]
    assert answer["trace"]["tools"][0]["detail"].startswith("asked 'Which city?', reply 'Rome'")


def test_ask_with_an_unknown_session_or_domain_is_a_clear_error(cli: CliRunner) -> None:
    unknown_session = cli.invoke(cli_app, ["ask", "Rome", "--session", "nope"])
    unknown_domain = cli.invoke(cli_app, ["ask", "hi", "--domain", "moon"])

    assert unknown_session.exit_code == 1
    assert "no conversation is stored under session id 'nope'" in unknown_session.output
    assert unknown_domain.exit_code == 1
    assert "unknown domain 'moon'; installed domains: trip" in unknown_domain.output


def test_chat_shows_the_question_and_the_next_line_resumes(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["chat"], input="book a table\nParis\nexit\n")

    assert result.exit_code == 0, result.output
    assert "? Which city?" in result.output
    assert "Table booked in Paris." in result.output
