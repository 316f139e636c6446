"""External MCP servers as tool sources: ``mcp_servers:`` in YAML (docs/mcp.md, "Consume").

The server is ``mcp_support/notes_server.py``, a small MCP server written with the SDK.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwire import App
from toolwire.cli import app as cli
from toolwire.errors import ConfigError, McpServerError
from toolwire.mcp import McpTool
from toolwire.testing import ScriptedModel
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest
from windowed_model import ANSWER, assert_every_request_fits, gateway, windowed

pytestmark = pytest.mark.requires_extra("mcp")  # the SDK, both ways

NOTES_SERVER = Path(__file__).parent / "mcp_support" / "notes_server.py"
NOTES_COMMAND = json.dumps([sys.executable, str(NOTES_SERVER)])
REPORT_SERVER = NOTES_SERVER.with_name("report_server.py")
REPORT_COMMAND = json.dumps([sys.executable, str(REPORT_SERVER)])
JSON_BODY_SERVER = NOTES_SERVER.with_name("json_body_server.py")
SCHEMA_COMMAND = json.dumps([sys.executable, str(NOTES_SERVER.with_name("schema_server.py"))])
FAILING_COMMAND = json.dumps(
    [sys.executable, "-c", "import sys; sys.stderr.write('cannot open notes.db'); sys.exit(3)"]
)

Factory = Callable[..., App]


def config(servers: str, tools: str = "") -> str:
    """The app's YAML: the ``office`` domain, memory sessions, these servers (and tools)."""
    return (
        "default_domain: office\n"
        "sessions: {store: memory}\n"
        "domains:\n"
        "  - name: office\n"
        "    description: The user's notes.\n"
        f"mcp_servers:\n{servers}"
        + (f"tools:\n{tools}" if tools else "")
    )


NOTES = (
    "  - name: notes\n"
    f"    command: {NOTES_COMMAND}\n"
    "    tools:\n"
    "      - read_note\n"
    "      - {name: listNotes, question: 'Does the user want to know which notes exist?'}\n"
    "      - process_id\n"
    "      - crash\n"
)


@pytest.fixture
def load(toolwire_app_factory: Factory) -> Factory:
    def build(text: str, model: ScriptedModel | None = None, **kwargs: object) -> App:
        return toolwire_app_factory(config=text, llm=model or ScriptedModel(), **kwargs)

    return build


def answer_with_contexts(model: ScriptedModel) -> ScriptedModel:
    return model.on_gatekeeper(True).on_answer()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_declared_server_registers_its_tools_and_no_connection_stays_open(load: Factory) -> None:
    app = load(config(NOTES))
    names = [registration.qualified_name for registration in app.registry.in_domain("office")]
    assert names == ["office.read_note", "office.list_notes", "office.process_id", "office.crash"]
    read_note = app.tool("read_note")
    assert isinstance(read_note, McpTool)
    assert read_note.binding.server == "notes" and read_note.binding.remote_name == "read_note"
    assert read_note.description() == "Read the text of one of the user's notes by its title."
    title = read_note.params_model.model_fields["title"]
    assert title.annotation is str and title.description == "The note's title, e.g. 'groceries'"
    assert read_note.executable_instruction() == (
        "Does the question ask for what this tool does: Read the text of one of the "
        "user's notes by its title?"
    )
    assert app.tool("office.list_notes").executable_instruction() == (
        "Does the user want to know which notes exist?"
    )
    assert app.mcp_problems == []
    assert app.mcp.connected() == []  # listing at load used its own connection, now closed


async def test_the_orchestrator_selects_an_mcp_tool_and_reuses_one_connection(
    load: Factory,
) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["read_note"]))
    app = load(config(NOTES), model)
    model.on_extract(app.tool("read_note").params_model, {"title": "groceries"})
    answer = await app.ask("What is on my groceries note?")
    assert answer.text == "milk, eggs, three lemons" and answer.failures == []
    assert [run.tool_name for run in answer.trace.tools] == ["office.read_note"]
    assert answer.trace.selection is not None
    assert [c.tool_name for c in answer.trace.selection.candidates] == [
        "office.read_note", "office.list_notes", "office.process_id", "office.crash"
    ]

    process_id = app.tool("process_id")
    assert isinstance(process_id, McpTool)
    first, second = await process_id.call(), await process_id.call()
    assert first.text == second.text  # one server process served every call
    assert app.mcp.connected() == ["notes"]
    await app.aclose()
    assert app.mcp.connected() == []
    deadline = time.monotonic() + 10
    while pid_alive(int(first.text)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not pid_alive(int(first.text)), "App.aclose() stops the server it started"


async def test_an_mcp_tool_named_in_required_tool_names_runs_without_a_suitability_test(
    load: Factory,
) -> None:
    tools = (
        "  - name: notes_coordinator\n"
        "    class: mcp_support.notes_tools:NotesCoordinator\n"
        "    domain: office\n"
    )
    model = answer_with_contexts(ScriptedModel().on_suitability([]))
    app = load(config(NOTES, tools), model)
    answer = await app.ask("Which notes do I have?")
    subtask = answer.trace.sub_tasks[0]
    assert [(run.tool_name, run.reason) for run in subtask.tools] == [
        ("office.list_notes", "required")
    ]
    assert answer.text == "groceries, meeting"


async def test_an_mcp_tool_is_injected_into_plugin_tools_as_a_typed_proxy(load: Factory) -> None:
    tools = (
        "  - name: note_digest\n"
        "    class: mcp_support.notes_tools:NoteDigestTool\n"
        "    inject: {read_note: office.read_note}\n"
        "  - name: plain_digest\n"
        "    class: mcp_support.notes_tools:PlainDigestTool\n"
        "    inject: {read_note: read_note}\n"
    )
    from mcp_support.notes_tools import DigestParams

    model = answer_with_contexts(ScriptedModel().on_suitability(["note_digest", "plain_digest"]))
    model.on_extract(DigestParams, {"title": "meeting"})
    # both digests run: the choice names them both (the default steps have no decisive words)
    app = load(config(NOTES, tools), model)
    assert app.container.graph()["office.note_digest"] == ["office.read_note"]
    answer = await app.ask("How long is my meeting note?")
    assert answer.guaranteed_contexts == ["'meeting' has 8 words."]
    assert "'meeting' has 45 characters." in answer.text
    assert [run.tool_name for run in answer.trace.tools] == [
        "office.note_digest", "office.plain_digest"
    ]  # the MCP tool itself was not activated: the plugin tools called it directly
    read_note = app.tool("read_note")
    assert isinstance(read_note, McpTool)
    with pytest.raises(ValueError, match="title"):
        await read_note.call(titel="meeting")  # arguments are validated before any call


async def test_a_server_crashing_mid_call_is_a_recorded_failure_and_the_answer_is_composed(
    load: Factory,
) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["crash", "read_note"]))
    app = load(config(NOTES), model)
    model.on_extract(app.tool("read_note").params_model, {"title": "meeting"})
    model.on_extract(app.tool("crash").params_model, {"reason": "test api_key=hunter2hunter2"})
    answer = await app.ask("Crash, then read my meeting note")
    assert answer.kind == "answer"
    assert answer.text.startswith("Thursday 10:00 with the pharmacy team, room 4")
    [failure] = answer.failures
    assert failure.startswith(
        "task 1: tool office.crash raised McpServerError: mcp server 'notes' failed during a "
        "call of 'crash': "
    )
    # the end of the server's stderr, secrets of known shapes masked
    assert "its stderr ended with: notes server crashing on purpose: test api_key=***" in failure
    assert failure.endswith("the connection was closed and the next call starts it again")
    process_id = app.tool("process_id")
    assert isinstance(process_id, McpTool)
    assert (await process_id.call()).text.isdigit()  # a new server process took over


async def test_an_error_result_of_an_mcp_tool_is_a_recorded_tool_failure(load: Factory) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["read_note"]))
    app = load(config(NOTES), model)
    model.on_extract(app.tool("read_note").params_model, {"title": "diary"})
    answer = await app.ask("Read my diary note")
    failure = answer.failures[0]  # then the answer composer finds nothing to compose
    assert "MCP tool 'read_note' of server 'notes' reported an error" in failure
    assert "no note titled 'diary'" in failure
    assert app.mcp.connected() == ["notes"]  # an error result is no reason to reconnect


def test_a_server_that_fails_to_start_is_reported_at_its_declaration_and_the_rest_loads(
    load: Factory, tmp_path: Path
) -> None:
    servers = (
        "  - name: broken\n"
        f"    command: {FAILING_COMMAND}\n"
        "    timeout_s: 20\n" + NOTES
    )
    app = load(config(servers))
    [problem] = app.mcp_problems
    assert problem.path is not None and problem.path.endswith(".yaml")
    assert problem.line == 7  # the "- name: broken" line
    assert problem.message.startswith("mcp server 'broken': cannot list its tools (")
    assert "its stderr ended with: cannot open notes.db" in problem.message
    assert "office.read_note" in app.tools  # the other server's tools are there


def test_a_reference_to_a_tool_of_a_failed_server_lists_the_server_first(load: Factory) -> None:
    servers = f"  - name: broken\n    command: {FAILING_COMMAND}\n"
    tools = (
        "  - name: note_digest\n"
        "    class: mcp_support.notes_tools:NoteDigestTool\n"
        "    inject: {read_note: office.read_note}\n"
    )
    with pytest.raises(ConfigError) as raised:
        load(config(servers, tools))
    first, second = [problem.message for problem in raised.value.problems]
    assert first.startswith("mcp server 'broken': cannot list its tools")
    assert "unknown tool 'office.read_note'" in second


@pytest.mark.parametrize(
    ("entry", "line", "message"),
    [
        (
            "  - {name: both, command: [x], url: 'http://127.0.0.1:1/mcp'}\n",
            7,
            "mcp_servers[0]: Value error, give exactly one of 'command' (a server started over "
            "stdio) or 'url' (a streamable HTTP server)",
        ),
        (
            "  - name: typo\n    comand: [python]\n",
            8,
            "unknown key 'comand'; did you mean 'command'? allowed keys: name, domain, command, "
            "url, env, cwd, bearer_token_env, tools, priority, timeout_s, max_result_bytes",
        ),
        (
            "  - name: quoted\n    command: \"python 'server.py\"\n",
            8,
            "mcp_servers[0].command: Value error, cannot be split into a command line (No "
            "closing quotation); check its quotes, or give it as a list",
        ),
        (
            "  - name: bracket\n    url: 'http://[::1/mcp'\n",
            8,
            "mcp_servers[0].url: Value error, is not a URL (Invalid IPv6 URL)",
        ),
    ],
)
def test_a_malformed_declaration_is_a_located_config_error(
    load: Factory, entry: str, line: int, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(config(entry))
    [problem] = raised.value.problems
    assert (problem.line, problem.message) == (line, message)


def test_declaration_mistakes_found_without_starting_are_located(load: Factory) -> None:
    servers = (
        "  - name: missing\n"
        "    command: [no-such-mcp-server-here]\n"
        "  - name: web\n"
        "    url: ftp://127.0.0.1/mcp\n"
        "  - name: odd\n"
        f"    command: {NOTES_COMMAND}\n"
        "    tools: ['2fa', read_note, not_offered]\n"
    )
    app = load(config(servers))
    assert [(problem.line, problem.message) for problem in app.mcp_problems] == [
        (8, "mcp server 'missing': command 'no-such-mcp-server-here' is not an executable on "
            "PATH; give its full path or install it"),
        (10, "mcp server 'web': url 'ftp://127.0.0.1/mcp' is not an http(s) URL"),
        (13, "mcp server 'odd': tool '2fa' becomes '2fa', which is not lower snake case; give "
             "it a name with 'as: <short_name>'"),
    ]
    assert app.registry.in_domain("office") == []


def test_an_allow_listed_tool_the_server_lacks_is_reported(load: Factory) -> None:
    servers = (
        "  - name: notes\n"
        f"    command: {NOTES_COMMAND}\n"
        "    tools: [read_note, {name: delete_note, as: remove}]\n"
    )
    app = load(config(servers))
    [problem] = app.mcp_problems
    assert problem.line == 9
    assert problem.message == (
        "mcp server 'notes': the server offers no tool 'delete_note'; it offers: crash, "
        "listNotes, process_id, read_note"
    )
    assert [reg.short_name for reg in app.registry.in_domain("office")] == ["read_note"]


def test_without_an_allow_list_every_tool_joins_under_a_snake_case_name(load: Factory) -> None:
    app = load(config(f"  - name: notes\n    command: {NOTES_COMMAND}\n    priority: 40\n"))
    registrations = app.registry.in_domain("office")
    assert [reg.short_name for reg in registrations] == [
        "read_note", "list_notes", "process_id", "crash"
    ]
    assert {reg.priority for reg in registrations} == {40}


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Write the app's YAML for a CLI command (no installed plugin loads)."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "")

    def write(text: str) -> Path:
        path = tmp_path / "toolwire.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_check_validates_declarations_without_starting_servers(
    config_file: Callable[[str], Path],
) -> None:
    servers = f"  - name: broken\n    command: {FAILING_COMMAND}\n    tools: [read_note]\n"
    tools = (
        "  - name: note_digest\n"
        "    class: mcp_support.notes_tools:NoteDigestTool\n"
        "    inject: {read_note: office.read_note}\n"
    )
    path = config_file(config(servers, tools))
    checked = CliRunner().invoke(cli, ["check", "--config", str(path)])
    assert checked.exit_code == 0, checked.output  # the allow-listed tool stands in
    assert "1 MCP servers (not started)" in checked.output
    connected = CliRunner().invoke(cli, ["check", "--config", str(path), "--connect"])
    assert connected.exit_code == 1
    assert f"{path}:7: mcp server 'broken': cannot list its tools" in connected.output


def test_check_connect_lists_what_each_server_offers(config_file: Callable[[str], Path]) -> None:
    path = config_file(config(NOTES))
    result = CliRunner().invoke(cli, ["check", "--config", str(path), "--connect"])
    assert result.exit_code == 0, result.output
    assert "mcp server 'notes' offers: read_note, listNotes, process_id, crash" in result.output
    assert "1 MCP servers (started and listed)" in result.output


def test_tools_shows_where_an_mcp_tool_comes_from(config_file: Callable[[str], Path]) -> None:
    path = config_file(config(NOTES))
    result = CliRunner().invoke(cli, ["--config", str(path), "tools", "--json"])
    assert result.exit_code == 0, result.output
    records = {record["qualified_name"]: record for record in json.loads(result.stdout)}
    assert records["office.list_notes"]["mcp"] == {
        "server": "notes",
        "tool": "listNotes",
        "transport": "stdio",
        "target": f"{sys.executable} {NOTES_SERVER}",
    }
    table = CliRunner().invoke(cli, ["--config", str(path), "tools"], env={"COLUMNS": "200"})
    assert "mcp notes: listNotes" in table.output


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def over_http(server: Path, tmp_path: Path, *flags: str, port: int | None = None) -> Iterator[str]:
    """A test MCP server on streamable HTTP (127.0.0.1, ``port`` or a free one; ``flags`` after
    the port): its URL."""
    port = port or free_port()
    log_path = tmp_path / f"{server.stem}-http.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, str(server), "--http", str(port), *flags], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, log_path.read_text()
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture
def notes_over_http(tmp_path: Path) -> Iterator[str]:
    """The notes server on streamable HTTP: its URL."""
    with over_http(NOTES_SERVER, tmp_path) as url:
        yield url


async def test_a_server_reached_over_streamable_http(load: Factory, notes_over_http: str) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["read_note"]))
    servers = f"  - name: notes\n    url: {notes_over_http}\n    tools: [read_note]\n"
    app = load(config(servers), model)
    model.on_extract(app.tool("read_note").params_model, {"title": "groceries"})
    answer = await app.ask("What is on my groceries note?")
    assert answer.text == "milk, eggs, three lemons"
    assert app.tool("read_note").binding.transport == "http"  # type: ignore[attr-defined]


def test_a_missing_bearer_token_variable_is_reported_at_the_declaration(
    load: Factory, notes_over_http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTES_TOKEN", raising=False)
    servers = (
        f"  - name: notes\n    url: {notes_over_http}\n    bearer_token_env: NOTES_TOKEN\n"
    )
    app = load(config(servers))
    [problem] = app.mcp_problems
    assert problem.message == (
        "mcp server 'notes': the environment variable NOTES_TOKEN (bearer_token_env) is not "
        "set; set it to the server's token"
    )


def test_a_bearer_token_read_from_a_file_is_sent_without_its_newline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token variable set from a file ends in a newline, which no header can carry."""
    from toolwire.mcp.connections import _auth_headers
    from toolwire.mcp.declarations import McpServerEntry

    monkeypatch.setenv("NOTES_TOKEN", "token-of-notes\n")
    entry = McpServerEntry(
        name="notes", url="http://127.0.0.1:9/mcp", bearer_token_env="NOTES_TOKEN"
    )

    assert _auth_headers(entry) == {"Authorization": "Bearer token-of-notes"}


def test_call_sync_refuses_a_running_event_loop(load: Factory) -> None:
    app = load(config(NOTES))
    tool = app.tool("read_note")
    assert isinstance(tool, McpTool)

    async def inside_a_loop() -> None:
        tool.call_sync(title="groceries")

    with pytest.raises(RuntimeError, match=r"use 'await tool\.call"):
        asyncio.run(inside_a_loop())
    assert tool.call_sync(title="groceries").text == "milk, eggs, three lemons"


def test_a_call_to_an_undeclared_server_is_a_clear_error() -> None:
    from toolwire.mcp.connections import McpConnections

    connections = McpConnections()
    try:
        with pytest.raises(McpServerError, match="no MCP server 'ghost' is declared"):
            connections.call_sync("ghost", "x", {})
    finally:
        connections.close()


READ_NOTE_DECLARED = (
    "    tools:\n"
    "      - name: read_note\n"
    "        description: Read one of the user's notes.\n"
    "        input_schema:\n"
    "          type: object\n"
    "          properties: {title: {type: string, description: The note's title}}\n"
    "          required: [title]\n"
)


async def test_a_server_whose_tools_the_yaml_declares_starts_only_at_the_first_call(
    load: Factory,
) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["read_note"]))
    app = load(config(f"  - name: notes\n    command: {NOTES_COMMAND}\n" + READ_NOTE_DECLARED),
               model)
    assert app.mcp_discovery.listed == {}  # App.load asked no server
    read_note = app.tool("read_note")
    assert read_note.params_model.model_fields["title"].description == "The note's title"
    assert read_note.executable_instruction() == (
        "Does the question ask for what this tool does: Read one of the user's notes?"
    )
    model.on_extract(read_note.params_model, {"title": "groceries"})
    assert app.mcp.connected() == []
    answer = await app.ask("What is on my groceries note?")
    assert answer.text == "milk, eggs, three lemons"
    assert app.mcp.connected() == ["notes"]


async def test_a_declared_server_that_cannot_start_fails_at_its_first_call(load: Factory) -> None:
    model = answer_with_contexts(ScriptedModel().on_suitability(["read_note"]))
    app = load(config(f"  - name: broken\n    command: {FAILING_COMMAND}\n" + READ_NOTE_DECLARED),
               model)
    assert app.mcp_problems == []  # not started at load, so nothing to report yet
    model.on_extract(app.tool("read_note").params_model, {"title": "groceries"})
    answer = await app.ask("What is on my groceries note?")
    failure = answer.failures[0]
    assert failure.startswith(
        "task 1: tool office.read_note raised McpServerError: mcp server 'broken' ("
    )
    assert ") did not start: " in failure
    assert failure.endswith("its stderr ended with: cannot open notes.db")
    assert app.mcp.connected() == []


async def test_a_huge_mcp_result_is_cut_for_the_prompts_and_the_answer_names_the_cut(
    toolwire_app_factory: Factory,
) -> None:
    """5 MB from an MCP tool (300 times the window) is context like any tool's result: the
    prompts get the part the window allows, with a marker, and the answer lists the cut."""
    servers = f"  - name: reports\n    command: {REPORT_COMMAND}\n"
    answers = windowed()

    def reply(request: FakeRequest) -> FakeReply:
        if "megabytes" in (request.output_schema or {}).get("properties", {}):
            return FakeReply(text='{"megabytes": 5}')
        return answers(request)

    async with FakeOpenAIServer(reply) as server:
        app = toolwire_app_factory(config=config(servers), llm=gateway(server))
        answer = await app.ask("What is in the full sales report?")
        await app.aclose()

    assert answer.kind == "answer" and answer.text.startswith(ANSWER)
    assert_every_request_fits(server)
    assert [(run.tool_name, run.outcome) for run in answer.trace.tools] == [
        ("office.full_report", "context")
    ]
    (cut,) = answer.failures
    assert cut.startswith("task 1: the context of full_report was cut for the model: 16,")
    assert " of 5,000,000 characters sent (llm.max_part_tokens: " in cut
    assert "[cut by toolwire: the last " in server.chat_requests[-1].messages[1]["content"]


async def test_a_result_over_max_result_bytes_fails_that_tool_at_once_and_the_question_goes_on(
    load: Factory,
) -> None:
    """50 MB of text (a 100 MB message: the SDK server sends it as text and as structured
    content) ran into the 30 s timeout, reading quadratically, and cost the connection. Now the
    reading stops counting at the default max_result_bytes and the call fails with its size."""
    servers = f"  - name: reports\n    command: {REPORT_COMMAND}\n"
    model = answer_with_contexts(ScriptedModel().on_suitability(["full_report"]))
    app = load(config(servers), model)
    report = app.tool("full_report")
    model.on_extract(report.params_model, {"megabytes": 50})

    answer = await app.ask("What is in the full sales report?")

    assert answer.kind == "answer"
    [failure] = answer.failures
    assert failure.startswith(
        "task 1: tool office.full_report raised McpServerError: MCP tool 'full_report' of server "
        "'reports' returned 101,886,"
    )
    assert failure.endswith(
        " bytes, more than max_result_bytes allows (32,000,000); ask the tool for less, or raise "
        "max_result_bytes of the mcp server 'reports'"
    )
    assert app.mcp.connected() == ["reports"]  # the same server answers the next call
    assert isinstance(report, McpTool)
    assert len((await report.call(megabytes=1)).text) == 1_000_000


def test_max_result_bytes_is_set_per_server(load: Factory) -> None:
    servers = f"  - name: reports\n    command: {REPORT_COMMAND}\n    max_result_bytes: 1500000\n"
    app = load(config(servers))
    report = app.tool("full_report")
    assert isinstance(report, McpTool)
    too_large = r"returned 2,0\d\d,\d{3} bytes, more than max_result_bytes allows \(1,500,000\)"
    with pytest.raises(McpServerError, match=too_large):
        report.call_sync(megabytes=1)


def test_over_http_max_result_bytes_bounds_an_event_stream_answer(
    load: Factory, tmp_path: Path
) -> None:
    """The SDK's own bound on one server-sent event, 1 MiB, failed every larger result."""
    with over_http(REPORT_SERVER, tmp_path) as url:
        app = load(config(f"  - name: reports\n    url: {url}\n"))
        report = app.tool("full_report")
        assert isinstance(report, McpTool)
        assert len(report.call_sync(megabytes=2).text) == 2_000_000

        limited = f"  - name: reports\n    url: {url}\n    max_result_bytes: 1000000\n"
        bounded = load(config(limited))
        report = bounded.tool("full_report")
        assert isinstance(report, McpTool)
        with pytest.raises(McpServerError, match="exceeded the 1000000 byte limit"):
            report.call_sync(megabytes=2)


def test_over_http_max_result_bytes_bounds_a_plain_json_answer(
    load: Factory, tmp_path: Path
) -> None:
    """A server may answer with one JSON body, which the SDK reads whole: one whose
    Content-Length is over the limit is refused unread, and the session goes on."""
    with over_http(REPORT_SERVER, tmp_path, "--json") as url:
        app = load(config(f"  - name: reports\n    url: {url}\n    max_result_bytes: 3000000\n"))
        report = app.tool("full_report")
        assert isinstance(report, McpTool)
        too_large = (
            r"^MCP tool 'full_report' of server 'reports' returned 4,0\d\d,\d{3} bytes, more than "
            r"max_result_bytes allows \(3,000,000\); ask the tool for less, or raise "
            r"max_result_bytes of the mcp server 'reports'$"
        )
        with pytest.raises(McpServerError, match=too_large):
            report.call_sync(megabytes=2)
        assert app.mcp.connected() == ["reports"]
        assert len(report.call_sync(megabytes=1).text) == 1_000_000


def test_an_endless_or_compressed_json_answer_fails_at_the_limit_and_the_session_goes_on(
    load: Factory, tmp_path: Path
) -> None:
    """A body that never ends (no Content-Length) is read up to the limit only, and fails long
    before timeout_s; a small gzip body is counted as decoded."""
    with over_http(JSON_BODY_SERVER, tmp_path) as url:
        servers = f"  - name: warehouse\n    url: {url}\n    max_result_bytes: 1000000\n"
        app = load(config(servers))
        dump = app.tool("dump")
        assert isinstance(dump, McpTool)
        refused = (
            "MCP tool 'dump' of server 'warehouse' returned more than max_result_bytes allows "
            "(1,000,000); ask the tool for less, or raise max_result_bytes of the mcp server "
            "'warehouse'"
        )
        started = time.monotonic()
        with pytest.raises(McpServerError) as endless:
            dump.call_sync(answer="endless")
        assert time.monotonic() - started < 5  # timeout_s is 30
        assert str(endless.value) == refused
        with pytest.raises(McpServerError) as compressed:
            dump.call_sync(answer="gzip")
        assert str(compressed.value) == refused
        assert dump.call_sync(answer="short").text == "a short answer"
        assert app.mcp.connected() == ["warehouse"]


def test_over_http_a_call_the_server_refuses_for_a_forgotten_session_goes_to_a_new_one(
    load: Factory, tmp_path: Path
) -> None:
    """A restarted server (or one that dropped an idle session) answers 404 for the session:
    every later call failed, as the tool refusing, until toolwire restarted. The MCP spec says
    the client starts a new session; the request never ran, so it is sent again."""
    port = free_port()
    with over_http(NOTES_SERVER, tmp_path, port=port) as url:
        app = load(config(f"  - name: notes\n    url: {url}\n"))
        process_id = app.tool("process_id")
        assert isinstance(process_id, McpTool)
        first = process_id.call_sync().text
    with over_http(NOTES_SERVER, tmp_path, port=port):  # the same URL, a server new to us
        second = process_id.call_sync().text
        assert second.isdigit() and second != first
        assert process_id.call_sync().text == second  # the new session is kept
        assert app.mcp.connected() == ["notes"]


async def test_a_result_that_does_not_match_its_output_schema_fails_that_call_only(
    load: Factory,
) -> None:
    """The SDK checks a result against the tool's output schema and raises RuntimeError, which
    was taken for a crashed transport: the server was stopped and started again."""
    app = load(config(f"  - name: schemas\n    command: {SCHEMA_COMMAND}\n"))
    process_id, count_notes, list_titles = (
        app.tool(name) for name in ("process_id", "count_notes", "list_titles")
    )
    assert isinstance(process_id, McpTool)
    assert isinstance(count_notes, McpTool) and isinstance(list_titles, McpTool)
    pid = (await process_id.call()).text
    with pytest.raises(McpServerError) as mismatch:
        await count_notes.call()
    assert str(mismatch.value) == (
        "MCP tool 'count_notes' of server 'schemas' returned a result that does not match its "
        "output schema: Invalid structured content returned by tool count_notes: 'many' is not "
        "of type 'integer'"
    )
    with pytest.raises(McpServerError, match=r"did not return structured content$"):
        await list_titles.call()
    assert app.mcp.connected() == ["schemas"]
    assert (await process_id.call()).text == pid  # the same server process, not restarted


async def test_a_stdio_server_that_exited_while_idle_is_started_again_by_the_next_call(
    load: Factory,
) -> None:
    """Its connection stayed marked open, and the next call failed at once (connection closed)
    as the tool's failure, although nothing was sent."""
    app = load(config(NOTES))
    process_id = app.tool("process_id")
    assert isinstance(process_id, McpTool)
    first = int((await process_id.call()).text)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (pid_alive(first) or app.mcp.connected()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not pid_alive(first)
    assert app.mcp.connected() == []  # its stdout closed: the connection knows it is gone
    second = int((await process_id.call()).text)
    assert second != first
    assert app.mcp.connected() == ["notes"]
    await app.aclose()
