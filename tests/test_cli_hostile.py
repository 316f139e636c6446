"""``toolwire ask`` and ``chat`` under hostile text: escape sequences in what the model, a tool or
an error says are shown, never run; text that is not UTF-8 is refused with a sentence; a Ctrl-C
at the chat prompt ends the chat at once."""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import structlog
from pydantic import BaseModel
from rich.console import Console
from typer.testing import CliRunner

from orchestration_kit import plugin_of
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.cli import app as cli_app
from toolwire.cli import ask_commands
from toolwire.cli.live import LiveView
from toolwire.events import AnswerDelta
from toolwire.logging import configure_logging
from toolwire.printable import printable
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel

CLEAR_SCREEN = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x1b\\"
"""OSC 52: a terminal that runs it writes "evil" to the clipboard, unseen."""
RIGHT_TO_LEFT = "\u202e"
HOSTILE = f"Take 400 mg.{CLEAR_SCREEN}{CLIPBOARD} Done{RIGHT_TO_LEFT}gnp.exe"


class NoParams(BaseModel):
    pass


class PageTool(OrchestratorActivatedTool[NoParams]):
    """Returns a page that carries escape sequences, or fails quoting one."""

    name = "page"

    def executable_instruction(self) -> str:
        return "Does the user want the page?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        if "fail" in text:
            raise RuntimeError(f"the page said {CLEAR_SCREEN}no")
        return ToolExecutionResult.context(HOSTILE)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None) -> CliRunner:
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: web\nsessions: {store: memory}\n", encoding="utf-8")

    def load_app(ctx: object, given: Path | None) -> App:
        model = ScriptedModel().on_suitability(["page"]).on_answer(HOSTILE)
        plugin = plugin_of(DomainSpec(name="web"), PageTool)
        return App.load(config, plugins=[plugin], load_entry_points=False, llm=model)

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    return CliRunner()


def assert_shown_not_run(output: str) -> None:
    assert "\x1b" not in output and RIGHT_TO_LEFT not in output
    assert "\\x1b[2J" in output and "\\x1b]52;c;ZXZpbA==\\x1b\\" in output
    assert "\\u202egnp.exe" in output


def test_escape_sequences_in_the_answer_are_shown_not_run(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "show me the page", "--trace"])

    assert result.exit_code == 0, result.output
    assert_shown_not_run(result.stdout)
    assert "Take 400 mg." in result.stdout


def test_escape_sequences_in_a_failure_are_shown_not_run(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "fail on the page", "--trace"])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout
    assert "the page said \\x1b[2Jno" in result.stdout


def test_streamed_pieces_are_shown_not_run_even_when_a_sequence_is_split() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=200), Console(file=io.StringIO()),
                    stream_text=True)  # fmt: skip
    for piece in ("Dose: 400 mg", "\x1b", "]52;c;ZXZpbA==", "\x1b\\", " daily"):
        view.show(AnswerDelta(text=piece))

    assert "\x1b]52" not in out.getvalue()
    assert "Dose: 400 mg\\x1b]52;c;ZXZpbA==\\x1b\\ daily" in out.getvalue()
    assert view.text == "Dose: 400 mg\x1b]52;c;ZXZpbA==\x1b\\ daily"  # kept as it came


def test_log_events_on_a_terminal_show_escape_sequences() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    try:
        configure_logging(stream=stream, force=True)
        log = structlog.get_logger("test")
        log.warning("tool_failed", detail=f"page said {CLIPBOARD}", page=f"x{CLEAR_SCREEN}")
    finally:
        configure_logging(force=True)

    shown = stream.getvalue()  # the renderer's own colours are CSI sequences; nothing else is
    assert "\x1b]52" not in shown and CLEAR_SCREEN not in shown
    assert "x1b]52;c;ZXZpbA==" in shown and "x\\x1b[2J" in shown


def test_printable_keeps_newlines_and_tabs_and_every_other_character() -> None:
    assert printable("a\tb\r\nc\nd") == "a\tb\nc\nd"
    assert printable("bell\x07 del\x7f csi\x9b nul\x00") == "bell\\x07 del\\x7f csi\\x9b nul\\x00"
    assert printable("Szeged, 20 °C, ünnep") == "Szeged, 20 °C, ünnep"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        # Python keeps a command line's bytes that are not UTF-8 as lone surrogates: they were a
        # UnicodeEncodeError traceback from the model client (message) or the log (session)
        (["ask", "dose of ibuprofen \udcff"], "the message is not UTF-8 text (byte 0xff at"),
        (["ask", "Paris", "--session", "\udcff"], "--session: this is not a session id"),
        (["ask", "Paris", "--session", "a b"], "--session: this is not a session id"),
    ],
    ids=["message", "session", "session-with-space"],
)
def test_text_that_cannot_be_used_is_refused_with_a_sentence(
    cli: CliRunner, args: list[str], says: str
) -> None:
    result = cli.invoke(cli_app, args)

    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def chat_command(folder: Path) -> tuple[list[str], dict[str, str]]:
    """``toolwire chat`` as a user starts it (the console script) over the pharma domain, with
    a model that is never asked, and its environment."""
    script = shutil.which("toolwire", path=str(Path(sys.executable).parent))
    assert script is not None, "run scripts/setup.sh: the toolwire console script is missing"
    config = folder / "toolwire.yaml"
    config.write_text(
        json.dumps(
            {
                "default_domain": "pharma",
                "sessions": {"store": "memory"},
                "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "none"},  # never asked
            }
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "TOOLWIRE_PLUGINS": "pharma", "OPENAI_API_KEY": "unused"}
    return [script, "--config", str(config), "chat"], env


def _interruptible() -> None:
    """In the child before exec: SIGINT back to its default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_at_the_chat_prompt_ends_the_chat_at_once(tmp_path: Path) -> None:
    """The prompt was read in a worker thread: Ctrl-C stopped the chat, but the process then
    waited for that thread, i.e. for the user to press Enter."""
    command, env = chat_command(tmp_path)
    chat = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,  # held open: the prompt waits for a line that never comes
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        # As at a terminal: a test run started in the background (`cmd &` in a script) hands its
        # children SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
        preexec_fn=_interruptible,
    )
    try:
        assert chat.stdout is not None
        seen = b""
        deadline = time.monotonic() + 60
        while b"you> " not in seen and time.monotonic() < deadline:
            if select.select([chat.stdout], [], [], 1)[0]:
                seen += os.read(chat.stdout.fileno(), 4096)
        assert b"you> " in seen, seen
        chat.send_signal(signal.SIGINT)
        code = chat.wait(timeout=10)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    assert code != 0
    assert chat.stderr is not None
    assert b"Traceback" not in chat.stderr.read()


def test_a_line_at_the_chat_prompt_that_is_not_utf8_is_refused_and_the_chat_goes_on(
    tmp_path: Path,
) -> None:
    command, env = chat_command(tmp_path)

    chat = subprocess.run(
        command,
        input=b"\xff\xfe hello\n",  # then end of input: the chat ends
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )

    shown = " ".join(chat.stdout.decode("utf-8", "replace").split())
    assert "that line is not UTF-8 text (byte 0xff at character 1)" in shown, shown
    assert shown.count("you>") == 2  # asked again after the refusal
    assert chat.returncode == 0 and b"Traceback" not in chat.stderr
