"""``toolwire ask``/``chat`` watching a question: the status line on stderr follows the step
events, the answer's text streams to stdout once, the embedded model's start leaves lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from orchestration_kit import EchoTool, domain, plugin_of
from toolwire import App
from toolwire.cli import app as cli_app
from toolwire.cli import ask_commands
from toolwire.cli.live import LiveView, watch
from toolwire.context_buffer import PromptAndContext
from toolwire.events import (
    AnswerDelta,
    CoordinatorStarted,
    ModelCallStarted,
    ModelProgress,
    TaskStarted,
    ToolStarted,
)
from toolwire.llm.history import current_history
from toolwire.orchestrator import Answer, TaskTrace
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.run_state import TaskStatus
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.scripted import join_contexts


class Lookup(EchoTool):
    def __init__(self) -> None:
        super().__init__("lookup", "Ibuprofen: 400 mg.")


def consoles(terminal: bool) -> tuple[Console, io.StringIO, Console, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return (
        Console(file=out, force_terminal=terminal, width=100),
        out,
        Console(file=err, force_terminal=terminal, width=100),
        err,
    )


def test_the_status_line_names_each_step_and_the_text_streams_once() -> None:
    out_console, out, err_console, _ = consoles(terminal=True)
    view = LiveView(out_console, err_console, stream_text=True)
    lines = []
    with view:
        for event in (
            TaskStarted(task_no="1", task_prompt="what dose of ibuprofen?"),
            CoordinatorStarted(task_no="1", coordinator_name="pharma.planner"),
            ModelCallStarted(purpose="choice"),
            ToolStarted(task_no="1", tool_name="pharma.dose", reason="suitability"),
        ):
            view.show(event)
            lines.append(view.line)
        assert view.status is not None  # a live status line on a terminal
        for piece in ("Take", " 400", " mg."):
            view.show(AnswerDelta(text=piece))
        assert view.status is None  # the answer's text owns the terminal

    assert lines == [
        "task 1: what dose of ibuprofen?",
        "task 1: coordinator pharma.planner",
        "task 1: asking the model (choice)",
        "task 1: running pharma.dose (suitability)",
    ]
    assert out.getvalue() == "Take 400 mg."
    assert view.text == "Take 400 mg."


def test_the_embedded_models_first_start_leaves_lines_even_without_a_terminal() -> None:
    out_console, _, err_console, err = consoles(terminal=False)
    view = LiveView(out_console, err_console, stream_text=True)
    with view:
        view.show(ModelProgress(model="qwen", stage="assembling", bytes_done=300_000_000,
                                bytes_total=1_117_000_000))  # fmt: skip
        assert view.line == "assembling the embedded model qwen (300 of 1117 MB)"
        view.show(ModelProgress(model="qwen", stage="assembled", bytes_total=1_117_000_000,
                                seconds=8.04))  # fmt: skip
        view.show(ModelProgress(model="qwen", stage="starting"))
        view.show(ModelProgress(model="qwen", stage="ready", seconds=3.5))
    assert view.status is None
    assert err.getvalue().splitlines() == [
        "embedded model qwen assembled (1117 MB) in 8.0 s",
        "embedded model qwen ready in 3.5 s",
    ]


async def test_watch_returns_the_answer_and_keeps_what_was_streamed() -> None:
    model = ScriptedModel().on_suitability(["lookup"]).on_answer()
    service = conversation_for(domain(), Lookup(), model=model)
    out_console, out, err_console, _ = consoles(terminal=False)

    class Asking:  # what watch() needs of an App
        ask_stream = service.ask_stream

    answer = await watch(Asking(), "dose?", None, None, LiveView(out_console, err_console, True))  # type: ignore[arg-type]

    assert answer.text == "Ibuprofen: 400 mg."
    assert out.getvalue() == "Ibuprofen: 400 mg."


def test_show_answer_adds_only_what_the_stream_did_not_show() -> None:
    out_console, out, _, _ = consoles(terminal=False)
    trace = TaskTrace(task_no="1", task_prompt="q", status=TaskStatus.DONE)
    answer = Answer(
        kind="answer",
        text="Interaction: avoid.\n\nComposed text.",
        domain="d",
        guaranteed_contexts=["Interaction: avoid."],
        trace=trace,
    )
    ask_commands.show_answer(out_console, answer, trace=False, streamed="Composed text.")
    assert out.getvalue() == "\n▌ Interaction: avoid.\n"

    out_console, out, _, _ = consoles(terminal=False)
    replaced = answer.model_copy(update={"text": "Something else.", "guaranteed_contexts": []})
    ask_commands.show_answer(out_console, replaced, trace=False, streamed="Compo")
    assert out.getvalue() == "\n(the answer, as it stands:)\nSomething else.\n"


HISTORIES: list[int] = []
"""How many earlier messages each answer of the chat read."""


def remembered(question: str, contexts: list[PromptAndContext]) -> str:
    HISTORIES.append(len(current_history()))
    return join_contexts(question, contexts)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None) -> CliRunner:
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: demo\nsessions:\n  store: memory\n", encoding="utf-8")

    def load_app(ctx: object, given: Path | None) -> App:
        model = ScriptedModel().on_suitability(["lookup"]).on_answer(remembered)
        model.on_extract(StandaloneTask, lambda text, instruction: {"task": text})
        return App.load(
            config, plugins=[plugin_of(domain(), Lookup)], load_entry_points=False, llm=model
        )

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    return CliRunner()


def test_ask_prints_the_streamed_answer_once(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "what dose?"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Ibuprofen: 400 mg.\n"


def test_ask_json_stays_one_object(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "what dose?", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["text"] == "Ibuprofen: 400 mg."


def test_chat_streams_each_answer(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["chat"], input="what dose?\nagain?\n\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("Ibuprofen: 400 mg.\n") == 2


def test_chat_is_one_conversation_until_new(cli: CliRunner) -> None:
    HISTORIES.clear()
    result = cli.invoke(cli_app, ["chat"], input="what dose?\nand for children?\nnew\nhi\n\n")
    assert result.exit_code == 0, result.output
    assert HISTORIES == [0, 2, 0]  # the second line read the first turn; 'new' starts afresh
    assert "(a new conversation)" in result.stdout


def test_a_later_turns_trace_says_what_it_took_from_the_turns_before(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["chat", "--trace"], input="what dose?\nand for children?\n\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("turn 2, reading turn 1") == 1
