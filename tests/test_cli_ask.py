"""``toolwire ask`` and ``toolwire chat`` over a test plugin and a scripted model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

import toolwire
from orchestration_kit import plugin_of
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.cli import app as cli_app
from toolwire.cli import ask_commands
from toolwire.errors import UnknownSessionError
from toolwire.llm.history import current_history
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.registry import DomainSpec
from toolwire.sessions import MemorySessionStore
from toolwire.sessions.base import StoredSession
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

    def load_app(ctx: object, given: Path | None) -> App:
        model = ScriptedModel().on_suitability(["booking"]).on_extract(Booking, _city)
        return App.load(
            config,
            plugins=[plugin_of(DomainSpec(name="trip"), BookingTool)],
            load_entry_points=False,
            llm=model,
        )

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    return CliRunner()


def test_ask_answers_and_draws_the_trace(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["ask", "book a table in Paris", "--trace"])

    assert result.exit_code == 0, result.output
    assert "Table booked in Paris." in result.output
    assert "task 1" in result.output and "trip.booking (suitability) guaranteed" in result.output
    assert "2 model call(s)" in result.output


def test_a_guaranteed_answer_no_model_wrote_is_printed_once(cli: CliRunner) -> None:
    """The tool's guaranteed answer is the whole answer (no text was streamed): shown once, not
    again as a guaranteed context after it."""
    result = cli.invoke(cli_app, ["ask", "book a table in Paris"])

    assert result.exit_code == 0, result.output
    assert result.stdout.count("Table booked in Paris.") == 1


@pytest.mark.parametrize("command", ["ask", "chat"])
def test_the_domain_option_says_a_message_without_it_is_routed(command: str) -> None:
    result = CliRunner().invoke(cli_app, [command, "--help"], env={"COLUMNS": "300"})

    assert result.exit_code == 0
    assert "without it the message is routed to the domain it is about, else default_domain" in (
        result.stdout
    )


def test_ask_json_then_reply_with_the_session(cli: CliRunner) -> None:
    first = cli.invoke(cli_app, ["ask", "book a table", "--json"])
    question = json.loads(first.output)
    assert question["kind"] == "clarification" and question["text"] == "Which city?"

    second = cli.invoke(cli_app, ["ask", "Rome", "--session", question["session_id"], "--json"])

    answer = json.loads(second.output)
    assert answer["kind"] == "answer"
    assert answer["guaranteed_contexts"] == ["Table booked in Rome."]
    assert answer["trace"]["tools"][0]["detail"].startswith("asked 'Which city?', reply 'Rome'")


def _there_is_the_earlier_city(text: str, instruction: str) -> dict[str, str]:
    """The follow-up rewrite: "there" becomes the city the earlier turns booked in (read from
    the history the call carries, as a model would)."""
    booked = re.findall(r"booked in (\w+)", str(current_history()))
    return {"task": text.replace("there", f"in {booked[-1]}") if booked else text}


@pytest.fixture
def follow_up_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> tuple[CliRunner, list[list[dict[str, str]]]]:
    """``toolwire ask`` whose every invocation builds a new app on one SQLite file (as separate
    processes would); the second item records the history each follow-up rewrite read."""
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        f"default_domain: trip\nsessions:\n  store: sqlite\n  path: {tmp_path / 's.sqlite3'}\n",
        encoding="utf-8",
    )
    histories: list[list[dict[str, str]]] = []

    def rewrite(text: str, instruction: str) -> dict[str, str]:
        histories.append([dict(message) for message in current_history()])
        return _there_is_the_earlier_city(text, instruction)

    def load_app(ctx: object, given: Path | None) -> App:
        model = ScriptedModel().on_suitability(["booking"]).on_extract(Booking, _city)
        model.on_extract(StandaloneTask, rewrite)
        return App.load(
            config,
            plugins=[plugin_of(DomainSpec(name="trip"), BookingTool)],
            load_entry_points=False,
            llm=model,
        )

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    return CliRunner(), histories


def test_ask_session_continues_a_conversation_after_an_answer(
    follow_up_cli: tuple[CliRunner, list[list[dict[str, str]]]],
) -> None:
    """Not the reply to a clarifying question: turn 1 was answered, and ``--session`` makes the
    next message turn 2, which reads turn 1 in standard roles and says what it took from it."""
    cli, histories = follow_up_cli
    first = cli.invoke(cli_app, ["ask", "book a table in Paris"])
    assert first.exit_code == 0, first.output
    assert first.stdout == "Table booked in Paris.\n"
    found = re.search(r'Follow up with: toolwire ask "…" --session (\S+)', first.stderr)
    assert found is not None, first.stderr
    session_id = found[1]

    second = cli.invoke(
        cli_app,
        ["ask", "and another table there tomorrow", "--session", session_id, "--trace"],
        env={"COLUMNS": "200"},
    )

    assert second.exit_code == 0, second.output
    assert histories == [
        [
            {"role": "user", "content": "book a table in Paris"},
            {"role": "assistant", "content": "Table booked in Paris."},
        ]
    ]  # the first turn, as the user and the assistant said it; never a pasted transcript
    assert "Table booked in Paris." in second.stdout  # the city came from turn 1
    assert (
        "turn 2, reading turn 1; run as 'and another table in Paris tomorrow'"
        in second.stdout.splitlines()
    )
    assert f"--session {session_id}" in second.stderr  # the same conversation goes on

    third = cli.invoke(cli_app, ["ask", "one more there", "--session", session_id, "--json"])
    answer = json.loads(third.stdout)
    assert (answer["session_id"], answer["turn"]) == (session_id, 3)
    assert answer["context"] == {
        "turns_read": [1, 2],
        "summaries_read": [],
        "standalone": "one more in Paris",
        "notes": [],
    }
    assert answer["guaranteed_contexts"] == ["Table booked in Paris."]
    assert len(histories[1]) == 4  # turns 1 and 2, each the user's and the assistant's message


def test_ask_with_an_unknown_session_or_domain_is_a_clear_error(
    cli: CliRunner, tmp_path: Path
) -> None:
    unknown_session = cli.invoke(cli_app, ["ask", "Rome", "--session", "nope"])
    unknown_domain = cli.invoke(cli_app, ["ask", "hi", "--domain", "moon"])

    assert unknown_session.exit_code == 1
    assert "no conversation is stored under session id 'nope'" in unknown_session.output
    # the file read, which the error's message (sent to remote callers too) does not hold
    assert f"(the session store read: {tmp_path / 's.sqlite3'})" in unknown_session.stderr
    assert unknown_domain.exit_code == 1
    assert "unknown domain 'moon'; installed domains: trip" in unknown_domain.output


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("", "empty"),
        ("  \t ", "only whitespace ('  \\t ')"),
        ("\u200b \u2060", "only whitespace ('\\u200b \\u2060')"),  # invisible: as whitespace
    ],
)
def test_an_empty_or_blank_message_is_refused_before_anything_runs(
    message: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def load_app(ctx: object, given: Path | None) -> App:
        raise AssertionError("the app was built for an empty message")

    monkeypatch.setattr(ask_commands, "load_app", load_app)

    result = CliRunner().invoke(cli_app, ["ask", message])

    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f'the message is {shown}: pass the question as the argument: toolwire ask "your question"\n'
    )


def test_ask_with_no_domain_installed_says_how_to_get_one(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    """A bare ``pip install toolwire``: no plugin, so no domain (it said "several domains")."""

    def load_app(ctx: object, given: Path | None) -> App:
        return App.load(plugins=[], load_entry_points=False, llm=ScriptedModel())

    monkeypatch.setattr(ask_commands, "load_app", load_app)

    result = CliRunner().invoke(cli_app, ["ask", "hi"])

    assert result.exit_code == 1
    assert result.stderr == (
        "no domain is installed, so no question can be answered: install a domain plugin "
        "(pip install toolwire-<domain>) or declare a domain under domains: in "
        "config/toolwire.yaml\n"
    )


class ShopPlugin:
    """A plugin that fails to load: its domain ``shop`` is never declared."""

    @toolwire.hookimpl
    def register_domains(self, register: object) -> None:
        raise RuntimeError("shop catalogue unreachable")


@pytest.mark.parametrize(
    "command", [["ask", "hi", "--domain", "shop"], ["chat", "--domain", "shop"]]
)
def test_an_unknown_domain_names_the_plugin_that_failed_to_load(
    command: list[str], isolated: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    def load_app(ctx: object, given: Path | None) -> App:
        plugins = [plugin_of(DomainSpec(name="trip"), BookingTool), ShopPlugin()]
        return App.load(plugins=plugins, load_entry_points=False, llm=ScriptedModel())

    monkeypatch.setattr(ask_commands, "load_app", load_app)

    result = CliRunner().invoke(cli_app, command, input="")  # chat: before any line is read

    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == (  # after the plugin_failed log line
        "unknown domain 'shop' (plugin 'ShopPlugin' failed to load: raised RuntimeError: shop "
        "catalogue unreachable; see toolwire plugins); installed domains: trip"
    )
    assert "Ask away" not in result.stdout


def test_chat_with_an_unknown_domain_fails_before_the_first_message(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["chat", "--domain", "moon"], input="book a table\n")

    assert result.exit_code == 1
    assert "unknown domain 'moon'; installed domains: trip" in result.stderr
    assert "you>" not in result.stdout and "Ask away" not in result.stdout


def test_chat_shows_the_question_and_the_next_line_resumes(cli: CliRunner) -> None:
    result = cli.invoke(cli_app, ["chat"], input="book a table\nParis\nexit\n")

    assert result.exit_code == 0, result.output
    assert "? Which city?" in result.output
    assert "Table booked in Paris." in result.output


class NoParams(BaseModel):
    pass


class PlannerTool(OrchestratorActivatedTool[NoParams], toolwire.AgentCoordinator):
    """Rewrites the message into JSON and plans a cheap lookup and a conditional full search."""

    name = "planner"

    def executable_instruction(self) -> str:
        return "planner: always false - runs only on coordinator-designated tasks"

    def decompose_into_subtasks(self, task: toolwire.TaskInfo) -> toolwire.TaskInfo:
        task.task_prompt = json.dumps({"city": "Paris"})
        task.sub_tasks = [
            toolwire.TaskInfo(
                task_no="1.1", task_prompt="cheap lookup", required_tool_names={"cheap"}
            ),
            toolwire.TaskInfo(
                task_no="1.2",
                task_prompt="full search",
                required_tool_names={"full"},
                conditional=True,
            ),
        ]
        return task

    def decide_conditional_subtask(
        self,
        parent: toolwire.TaskInfo,
        next_subtask: toolwire.TaskInfo,
        completed_so_far: toolwire.ContextBuffer,
    ) -> toolwire.SubtaskDecision:
        found = any(pac.context for pac in completed_so_far.get("1.1:cheap", []))
        return toolwire.SubtaskDecision.SKIP if found else toolwire.SubtaskDecision.RUN

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("")


class CheapTool(OrchestratorActivatedTool[NoParams]):
    name = "cheap"

    def executable_instruction(self) -> str:
        return "cheap: always false"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("Le Train Bleu has a table at 8 pm.")


class FullTool(CheapTool):
    name = "full"


class BrokenTool(CheapTool):
    name = "broken"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        raise RuntimeError("reviews service is down")


def test_ask_trace_draws_the_task_tree_with_coordinators_decisions_and_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    model = ScriptedModel().on_suitability(["broken"]).on_answer("A table at 8 pm in Paris.")

    planner = plugin_of(DomainSpec(name="trip"), PlannerTool, CheapTool, FullTool, BrokenTool)

    def load_app(ctx: object, given: Path | None) -> App:
        return App.load(None, plugins=[planner], load_entry_points=False, llm=model)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", load_app)

    result = CliRunner().invoke(
        cli_app, ["ask", "a table in Paris tonight?", "--trace"], env={"COLUMNS": "160"}
    )

    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.output.splitlines()]
    expected = [
        "task 1 done  a table in Paris tonight?",
        '├── task prompt after the coordinators: {"city": "Paris"}',
        "├── coordinator trip.planner decomposed: 2 new subtask(s)",
        "├── task 1.1 done  cheap lookup",
        "│   ├── owner trip.planner, required cheap",
        "│   └── tool trip.cheap (required) context — Le Train Bleu has a table at 8 pm.",
        "├── task 1.2 skipped (conditional: skip)  full search",
        "│   ├── owner trip.planner, required full",
        "│   └── conditional: owner decided skip",
        "├── selection retrieve (4 candidate(s), all) → choose → confirm → trip.broken",
        "│   ├── trip.planner (score 0.00): not chosen among the candidates",
        "│   ├── trip.cheap (score 0.00): not chosen among the candidates",
        "│   ├── trip.full (score 0.00): not chosen among the candidates",
        "│   └── trip.broken (score 0.00): named by the choice; confirmed on its question",
        "└── tool trip.broken (suitability) error — tool trip.broken raised RuntimeError: "
        "reviews service is down",
    ]
    start = lines.index(expected[0])
    assert lines[start : start + len(expected)] == expected, "\n".join(lines)
    assert "failed: task 1: tool trip.broken raised RuntimeError" in result.output
    shown = [line for line in lines if "reviews service is down" in line and line[:1] != "{"]
    assert len(shown) == 2  # the answer's failure, the tool in the tree; not again under task 1
    assert model.calls_for(toolwire.llm.Purpose.ANSWER)[0].inputs["question"] == (
        "a table in Paris tonight?"
    )


def test_ask_trace_shows_a_task_read_as_several_requests_its_words_and_second_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    model = ScriptedModel().on_choose(["cheap"]).on_suitability(["cheap", "full"])
    model.on_answer("ok")
    plugin = plugin_of(DomainSpec(name="trip"), CheapTool, FullTool, BrokenTool)
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        "orchestrator:\n  selection:\n    steps: [retrieve, decisive_words, choose, confirm, "
        "english.several_requests]\n"
    )

    def load_app(ctx: object, given: Path | None) -> App:
        return App.load(config, plugins=[plugin], load_entry_points=False, llm=model)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", load_app)

    message = "a cheap lookup, and then a full search?"
    result = CliRunner().invoke(cli_app, ["ask", message, "--trace"], env={"COLUMNS": "160"})

    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.output.splitlines()]
    assert (
        "├── selection retrieve (3 candidate(s), all) → decisive_words → "
        "english.several_requests (read as several requests) → trip.full, trip.cheap" in lines
    ), "\n".join(lines)
    [first] = [line for line in lines if line.startswith("│   ├── trip.full (score")]
    assert first.endswith("its words decided, confirmed on its question")
    [second] = [line for line in lines if line.startswith("│   ├── trip.cheap (score")]
    assert second.endswith("named by the second choice, confirmed on its question")


@pytest.mark.parametrize("json_output", [False, True])
def test_without_trace_a_failure_shows_an_error_id_and_the_log_has_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None, json_output: bool
) -> None:
    model = ScriptedModel().on_suitability(["broken"]).on_answer("No table tonight.")
    plugin = plugin_of(DomainSpec(name="trip"), BrokenTool)

    def load_app(ctx: object, given: Path | None) -> App:
        return App.load(None, plugins=[plugin], load_entry_points=False, llm=model)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", load_app)

    options = ["--json"] if json_output else []
    result = CliRunner().invoke(cli_app, ["ask", "a table in Paris?", *options])

    assert result.exit_code == 0, result.output
    assert "reviews service is down" not in result.stdout
    found = re.search(r"task 1: tool trip.broken failed \(error id ([0-9a-f]{12})\)", result.stdout)
    assert found is not None, result.stdout
    if json_output:
        assert json.loads(result.stdout)["failures"] == [found[0]]
    else:
        assert f"failed: {found[0]}" in result.stdout
    withheld = [json.loads(line) for line in result.stderr.splitlines() if "error_withheld" in line]
    assert withheld[0]["error_id"] == found[1]
    assert "RuntimeError: reviews service is down" in withheld[0]["detail"]


def test_trace_shows_each_model_calls_cached_tokens() -> None:
    """Issue 10 item 4: what the server took from its cache, per call and in all."""
    from rich.console import Console

    from toolwire.llm import CallRecord
    from toolwire.orchestrator import Answer, TaskTrace
    from toolwire.run_state import TaskStatus

    calls = [
        CallRecord(purpose="gatekeeper", model="m", latency_ms=9000, prompt_tokens=1400,
                   cached_prompt_tokens=240, completion_tokens=12, shared_prefix_chars=900),
        CallRecord(purpose="answer", model="m", latency_ms=4000, prompt_tokens=1450,
                   cached_prompt_tokens=1380, completion_tokens=80, shared_prefix_chars=5600,
                   truncated=True),
    ]  # fmt: skip
    answer = Answer(
        kind="answer",
        text="Use sort_keys=True.",
        domain="pydocs",
        trace=TaskTrace(task_no="1", task_prompt="q", status=TaskStatus.DONE),
        model_calls=calls,
        usage=toolwire.llm.Usage.of(calls),
    )
    console = Console(record=True, width=200)
    ask_commands.show_answer(console, answer, trace=True)
    printed = console.export_text()

    assert "model gatekeeper: 9000 ms, 1400 prompt (240 cached = 17%, 900 chars" in printed
    assert "model answer: 4000 ms, 1450 prompt (1380 cached = 95%, 5600 chars" in printed
    assert "80 completion (cut off at the limit)" in printed
    assert "12 completion (cut off" not in printed
    assert "2 model call(s), 2850 prompt tokens (1620 cached = 57%), 92 completion" in printed


def _trip_app(model: ScriptedModel) -> Callable[[object, Path | None], App]:
    """A ``load_app`` for the CLI: the trip domain's booking tool on ``model``, no config."""

    def load_app(ctx: object, given: Path | None) -> App:
        plugins = [plugin_of(DomainSpec(name="trip"), BookingTool)]
        return App.load(None, plugins=plugins, load_entry_points=False, llm=model)

    return load_app


def test_a_dead_model_makes_ask_fail_with_exit_code_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    """Issue 11 item 2, the CLI's side of the 502: a question the model could not answer is a
    failure for scripts too, not a printed apology with exit code 0."""
    down = toolwire.ModelError("answer", "cannot connect to the model server")
    model = ScriptedModel().on_suitability(toolwire.ModelError("suitability", "down"))
    model.on_answer(down)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", _trip_app(model))
    result = CliRunner().invoke(cli_app, ["ask", "book a table in Paris"])

    assert result.exit_code == 1
    assert "model call for 'answer' failed: cannot connect to the model server" in result.output


def test_a_failed_turn_is_one_line_and_the_chat_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    model = ScriptedModel().on_suitability([])
    model.on_answer(toolwire.ModelError("answer", "the model server went away"), times=1)
    model.on_answer("Hello! Where would you like to eat?")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", _trip_app(model))
    result = CliRunner().invoke(cli_app, ["chat"], input="hello there\nhello there\n")

    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert result.stderr.splitlines()[-1] == (  # after the model_call_failed log line
        "model call for 'answer' failed: the model server went away (after 1 attempt(s))"
    )
    assert "Hello! Where would you like to eat?" in result.stdout
    assert result.stdout.count("you> ") == 3  # two turns, then the end of the input


class ForgetfulStore(MemorySessionStore):
    """Every conversation is gone by its next turn (expired, say)."""

    async def load(self, session_id: str) -> StoredSession:
        raise UnknownSessionError(session_id)


def test_chat_starts_a_new_conversation_when_its_conversation_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    """The error says to omit the session id, which a chat user cannot do: the chat drops it,
    so the line after the failed one is answered instead of failing the same way."""
    model = ScriptedModel().on_suitability([]).on_answer("Hello! Where would you like to eat?")

    def load_app(ctx: object, given: Path | None) -> App:
        plugins = [plugin_of(DomainSpec(name="trip"), BookingTool)]
        store = ForgetfulStore()
        return App.load(
            None, plugins=plugins, load_entry_points=False, llm=model, session_store=store
        )

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ask_commands, "load_app", load_app)
    result = CliRunner().invoke(cli_app, ["chat"], input="hello\nhello again\nand again\n")

    assert result.exit_code == 0, result.output
    assert result.stderr.count("no conversation is stored under session id") == 1
    assert "(a new conversation starts with your next message)" in result.stdout
    assert result.stdout.count("Hello! Where would you like to eat?") == 2  # turns 1 and 3


@pytest.mark.parametrize(
    "message", ["book a table in Paris", "book a table"], ids=["answer", "clarification"]
)
def test_ask_with_the_memory_store_offers_no_session_to_continue(
    message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_model_requests: None
) -> None:
    """A memory store's conversation ends with the process: a ``--session`` hint would send the
    user to an unknown session; the line says which setting keeps it instead."""
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: trip\nsessions: {store: memory}\n", encoding="utf-8")

    def load_app(ctx: object, given: Path | None) -> App:
        model = ScriptedModel().on_suitability(["booking"]).on_extract(Booking, _city)
        plugin = plugin_of(DomainSpec(name="trip"), BookingTool)
        return App.load(config, plugins=[plugin], load_entry_points=False, llm=model)

    monkeypatch.setattr(ask_commands, "load_app", load_app)
    result = CliRunner().invoke(cli_app, ["ask", message])

    assert result.exit_code == 0, result.output
    assert "Reply with" not in result.output and "Follow up with" not in result.output
    assert result.stderr.splitlines()[-1] == (
        "(the conversation is not kept: sessions.store is 'memory', this process only; "
        "sessions.store: sqlite keeps it for toolwire ask --session)"
    )
