"""``GET /v1/domains`` and ``GET /v1/tools`` in process (FastAPI's test client): where each domain
came from, and the tool records ``toolwire tools --json`` prints, served unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from _build_samples import AnswerTool, LookupTool, WriteFile, make_plugin
from toolwire import App
from toolwire.cli import app as cli
from toolwire.server import create_app
from toolwire.testing import ScriptedModel


def serve(app: App) -> Iterator[TestClient]:
    with TestClient(create_app(app)) as client:
        yield client


def get(client: TestClient, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def test_domains_name_the_plugin_that_registered_them(
    isolated: Path, write_file: WriteFile
) -> None:
    shipped = write_file("shipped/own.yaml", "domains: [{name: refined, description: own}]\n")
    yaml_only = write_file("shipped/yaml_only.yaml", "domains: [{name: from_yaml}]\n")
    app_yaml = write_file("app.yaml", (
        "default_domain: hooked\n"
        "sessions: {store: memory}\n"
        "domains:\n"
        "  - {name: hooked, description: refined by the app}\n"
        "  - {name: from_app}\n"
    ))
    plugins = [
        make_plugin("hook_plugin", domains=("hooked",), tools=(LookupTool,)),
        make_plugin("refining_plugin", domains=("refined",), config_files=(str(shipped),)),
        make_plugin("yaml_plugin", config_files=(str(yaml_only),)),
    ]
    app = App.load(app_yaml, plugins=plugins, llm=ScriptedModel(), load_entry_points=False)

    for client in serve(app):
        domains = {d["name"]: d for d in get(client, "/v1/domains")}

    assert {name: d["plugin"] for name, d in domains.items()} == {
        "hooked": "hook_plugin",  # refined by the app's YAML, still the plugin's
        "refined": "refining_plugin",
        "from_yaml": "yaml_plugin",
        "from_app": "config",
    }
    assert domains["hooked"]["description"] == "refined by the app"
    assert domains["hooked"]["default"] is True
    assert domains["hooked"]["tools"] == ["hooked.lookup"]


def test_tools_serve_the_cli_records_plus_the_suitability_question(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_yaml = write_file("app.yaml", (
        "default_domain: shop\n"
        "sessions: {store: memory}\n"
        "tools:\n"
        "  - {name: answer, domain: shop, priority: 3}\n"
        "  - {name: extra, class: '_build_samples:AnswerTool', domain: shop, enabled: false}\n"
    ))
    shop = make_plugin("shop", domains=("shop",), tools=(LookupTool, AnswerTool))
    app = App.load(app_yaml, plugins=[shop], llm=ScriptedModel(), load_entry_points=False)
    cli_records = cli_tool_records(app_yaml, shop, monkeypatch)

    for client in serve(app):
        served = get(client, "/v1/tools")

    assert [record["qualified_name"] for record in served] == [
        "shop.lookup", "shop.answer", "shop.extra"
    ]
    for record, cli_record in zip(served, cli_records, strict=True):
        assert list(record)[: len(cli_record)] == list(cli_record)  # same fields, same order
        assert {key: record[key] for key in cli_record} == cli_record
    assert [(r["enabled"], r["priority"]) for r in served] == [(True, 100), (True, 3), (False, 100)]
    assert served[1]["injects"] == ["shop.lookup"]
    assert served[1]["instruction"] == app.tool("shop.answer").executable_instruction()
    assert served[0]["instruction"] is None  # not orchestrator-activated: never asked
    assert served[2]["instruction"] is None  # disabled: never built


def cli_tool_records(
    config: Path, plugin: object, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """``toolwire tools --json`` over the same plugin (installed plugins are replaced by it)."""
    real_load = App.load

    def load_with_plugin(config_path: Any = None, **kwargs: Any) -> App:
        kwargs.update(plugins=[plugin], load_entry_points=False)
        return real_load(config_path, **kwargs)

    monkeypatch.setattr(App, "load", staticmethod(load_with_plugin))
    result = CliRunner().invoke(cli, ["--config", str(config), "tools", "--json"])
    assert result.exit_code == 0, result.output
    records: list[dict[str, Any]] = json.loads(result.stdout)
    assert list(records[0]) == [
        "name", "qualified_name", "domain", "priority", "plugin", "kinds", "injects", "mcp"
    ]
    return records
