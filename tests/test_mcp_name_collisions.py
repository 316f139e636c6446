"""A consumed MCP tool whose prefixed name another tool already has (issue 34, section 5): that
tool is left out, reported at its line of the ``mcp_servers:`` declaration and logged as
``mcp_tool_refused`` with the reason, and the app starts with everything else. Before, the
duplicate name was a ``ConfigError`` and ``toolwire serve`` did not start at all.

The servers are declared fully (each tool's ``input_schema`` in the YAML), so no server is
started: the names are known from the YAML alone."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from structlog.testing import capture_logs

from orchestration_kit import EchoTool, plugin_of
from server_support.live import serving
from toolwire import App
from toolwire.mcp import McpTool
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel

SCHEMA = "{type: object, properties: {text: {type: string}}}"


def server(name: str, domain: str, *tools: str) -> str:
    """A fully declared ``mcp_servers:`` entry offering ``tools``, into ``domain``."""
    listed = "".join(
        f"      - {{name: {tool}, description: 'Does {tool}.', input_schema: {SCHEMA}}}\n"
        for tool in tools
    )
    return (
        f"  - name: {name}\n"
        f"    domain: {domain}\n"
        f"    command: {json.dumps([sys.executable, '-c', 'pass'])}  # never started\n"
        f"    tools:\n{listed}"
    )


class ReadNote(EchoTool):
    name = "read_note"

    def __init__(self) -> None:
        super().__init__("read_note", "the plugin's own note")


def test_a_server_tool_named_like_a_plugin_tool_is_left_out_and_the_rest_load(
    toolwire_app_factory: Callable[..., App],
) -> None:
    spec = DomainSpec(name="office", description="Notes (test domain).")
    config = (
        "default_domain: office\n"
        "sessions: {store: memory}\n"
        "mcp_servers:\n"
        + server("notes", "office", "list_notes", "read_note")
        + server("mirror", "office", "list_notes", "search")
    )
    with capture_logs() as logs:
        app = toolwire_app_factory(
            plugins=[plugin_of(spec, ReadNote)], config=config, llm=ScriptedModel()
        )

    names = [registration.qualified_name for registration in app.registry.in_domain("office")]
    assert sorted(names) == [
        "office.list_notes", "office.read_note", "office.search"
    ]  # fmt: skip
    assert isinstance(app.tool("office.read_note"), ReadNote)  # the plugin's, not the server's
    listing = app.tool("office.list_notes")
    assert isinstance(listing, McpTool) and listing.binding.server == "notes"  # the first's
    path = app.config.path
    assert [str(problem) for problem in app.mcp_problems] == [
        f"{path}:9: mcp server 'notes': tool 'read_note' is left out: its name "
        "'office.read_note' is taken by plugin 'DomainPlugin' (ReadNote); give it another "
        "short name with 'as:' in its 'tools:' entry",
        f"{path}:14: mcp server 'mirror': tool 'list_notes' is left out: its name "
        "'office.list_notes' is taken by the tool 'list_notes' of mcp server 'notes'; give it "
        "another short name with 'as:' in its 'tools:' entry",
    ]
    refused = [event for event in logs if event["event"] == "mcp_tool_refused"]
    assert [(e["server"], e["tool"], e["declared_at"]) for e in refused] == [
        ("notes", "read_note", f"{path}:9"),
        ("mirror", "list_notes", f"{path}:14"),
    ]
    assert refused[0]["reason"] == (
        "its name 'office.read_note' is taken by plugin 'DomainPlugin' (ReadNote)"
    )
    assert all(event["log_level"] == "warning" for event in refused)


async def test_a_server_offering_dosage_info_into_pharma_leaves_the_service_up(
    tmp_path: Path,
) -> None:
    """The installed pharma plugin declares ``dosage_info`` in its YAML: the server's tool of
    that name is refused, naming the plugin's file and line, and every domain is served."""
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        "default_domain: pharma\n"
        "sessions: {store: memory}\n"
        "mcp_servers:\n" + server("drugs", "pharma", "dosage_info", "recall_notices")
    )
    app = App.load(config, llm=ScriptedModel())
    try:
        async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            ready = await client.get("/readyz")
            tools = {
                tool["qualified_name"]: tool for tool in (await client.get("/v1/tools")).json()
            }
    finally:
        await app.aclose()

    assert ready.status_code == 200
    assert tools["pharma.dosage_info"]["plugin"] == "pharma"
    assert tools["pharma.dosage_info"]["mcp"] is None
    assert tools["pharma.recall_notices"]["mcp"]["server"] == "drugs"
    assert any(name.startswith("pydocs.") for name in tools)  # the other domains too
    (problem,) = app.mcp_problems
    assert (problem.path, problem.line) == (str(config), 8)  # its line of the allow-list
    assert "tool 'dosage_info' is left out: its name 'pharma.dosage_info' is taken by plugin " in (
        problem.message
    )
    assert json.dumps(problem.message).count("pharma.yaml:") == 1
