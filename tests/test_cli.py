"""The build-time commands: plugins, tools, check, graph (in-process and as the console script)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import WriteFile
from toolwire.cli import app

runner = CliRunner()


@pytest.fixture
def pharma_only(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only the bundled pharma plugin loads, whatever else is installed."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma")
    return isolated


def test_plugins_json(pharma_only: Path) -> None:
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"name": "pharma", "version": "0.1.0", "domains": ["pharma"], "error": None}
    ]


def test_plugins_table_shows_failures(pharma_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma,ghost")
    result = runner.invoke(app, ["plugins"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "pharma" in result.stdout and "ghost" in result.stdout
    assert "no installed plugin" in result.stdout


def test_tools_json(pharma_only: Path) -> None:
    result = runner.invoke(app, ["tools", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"name": "substance_lookup", "qualified_name": "pharma.substance_lookup",
         "domain": "pharma", "priority": 50, "plugin": "pharma", "kinds": [], "injects": []},
        {"name": "interaction_analysis", "qualified_name": "pharma.interaction_analysis",
         "domain": "pharma", "priority": 10, "plugin": "pharma",
         "kinds": ["activated", "coordinator", "context_consumer", "clarifiable"],
         "injects": ["pharma.substance_lookup"]},
        {"name": "dosage_info", "qualified_name": "pharma.dosage_info",
         "domain": "pharma", "priority": 20, "plugin": "pharma", "kinds": ["activated"],
         "injects": ["pharma.substance_lookup"]},
    ]


def test_tools_filtered_by_domain(pharma_only: Path) -> None:
    result = runner.invoke(app, ["tools", "--domain", "pharma"])
    assert result.exit_code == 0
    assert "pharma.interaction_analysis" in result.stdout
    unknown = runner.invoke(app, ["tools", "--domain", "astro", "--json"])
    assert unknown.exit_code == 1
    assert "unknown domain 'astro'; domains: pharma" in unknown.stderr


def test_check_ok(pharma_only: Path, write_file: WriteFile) -> None:
    path = write_file("ok.yaml", "default_domain: pharma\n")
    result = runner.invoke(app, ["check", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 1 plugins, 1 domains, 3 tools")


def test_check_prints_every_problem_with_its_line(pharma_only: Path, write_file: WriteFile) -> None:
    write_file("broken.yaml", "default_domain: pharma\ntools:\n  - name: x\n    clas: a:B\n")
    result = runner.invoke(app, ["check", "--config", "broken.yaml"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "broken.yaml:4: unknown key 'clas'; did you mean 'class'? allowed keys: name, class, "
        "domain, priority, enabled, settings, inject",
    ]


def test_global_config_option_applies_to_commands(pharma_only: Path, write_file: WriteFile) -> None:
    write_file("bad.yaml", "default_domain: nowhere\n")
    result = runner.invoke(app, ["--config", "bad.yaml", "tools"])
    assert result.exit_code == 1
    assert "bad.yaml:1: default_domain 'nowhere' is not a declared domain" in result.stderr
    assert runner.invoke(app, ["--config", "bad.yaml", "check"]).exit_code == 1


def test_check_fails_on_a_broken_plugin(pharma_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma,ghost")
    result = runner.invoke(app, ["check"])
    assert result.exit_code == 1
    assert "plugin 'ghost' failed to load" in result.stderr


def test_graph_text_and_mermaid(pharma_only: Path) -> None:
    text = runner.invoke(app, ["graph"])
    assert text.exit_code == 0
    assert text.stdout.splitlines() == [
        "pharma.substance_lookup",
        "pharma.interaction_analysis -> pharma.substance_lookup",
        "pharma.dosage_info -> pharma.substance_lookup",
    ]
    mermaid = runner.invoke(app, ["graph", "--mermaid"])
    assert mermaid.stdout.splitlines() == [
        "flowchart LR",
        '    pharma-substance_lookup["pharma.substance_lookup"]',
        '    pharma-interaction_analysis["pharma.interaction_analysis"]',
        '    pharma-dosage_info["pharma.dosage_info"]',
        "    pharma-interaction_analysis --> pharma-substance_lookup",
        "    pharma-dosage_info --> pharma-substance_lookup",
    ]


def test_the_installed_console_script(pharma_only: Path, write_file: WriteFile) -> None:
    script = shutil.which("toolwire", path=str(Path(__file__).parents[1] / ".venv" / "bin"))
    assert script is not None, "run scripts/setup.sh: the toolwire console script is missing"
    env = {k: v for k, v in os.environ.items() if k != "TOOLWIRE_PLUGINS"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], capture_output=True, text=True, env=env,
                              cwd=pharma_only, timeout=60, check=False)

    plugins = run("plugins", "--json")
    assert plugins.returncode == 0, plugins.stderr
    listed = {p["name"]: (p["domains"], p["error"]) for p in json.loads(plugins.stdout)}
    assert listed == {"pharma": (["pharma"], None), "pydocs": (["pydocs"], None)}
    tools = run("tools", "--json")
    qualified = {t["qualified_name"] for t in json.loads(tools.stdout)}
    assert {"pharma.substance_lookup", "pharma.interaction_analysis"} <= qualified
    assert "pydocs.docs_search" in qualified
    write_file("broken.yaml", "default_domain: pharma\nllm:\n  timeout_s: soon\n")
    check = run("check", "--config", "broken.yaml")
    assert check.returncode == 1
    assert check.stderr.startswith("broken.yaml:3: llm.timeout_s: Input should be a valid number")
    assert check.stdout == ""
