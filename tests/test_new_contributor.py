"""The new-contributor check (issue 12): a plugin in ``tests/`` (``contributor_plugin.py``),
installed like any distribution, adds a CLI command, a model provider and a session store
through hooks only, and the three work together from YAML and from ``toolwire``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contributor_plugin
from _build_samples import WriteFile, the_only_plugin
from toolwire import App
from toolwire.cli import build_cli
from toolwire.llm import ChatModel

PUBLIC_MODULES = {
    "toolwire",
    "toolwire.cli",
    "toolwire.hookspecs",
    "toolwire.llm",
    "toolwire.sessions",
    "toolwire.settings",
    "toolwire.testing.fake_openai",
}


@pytest.fixture
def installed(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin installed as pip would (a dist-info with its entry point), and the only one
    loaded."""
    the_only_plugin(
        monkeypatch, isolated / "site", "contributor", "contributor_plugin", version="0.1"
    )
    return isolated


@pytest.fixture
def config(installed: Path, write_file: WriteFile) -> Path:
    return write_file(
        "toolwire.yaml",
        "llm:\n  provider: canned\nsessions:\n  store: ledger\ndefault_domain: reminders\n",
    )


def test_the_plugin_uses_public_modules_and_hooks_only() -> None:
    tree = ast.parse(Path(contributor_plugin.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
         for alias in node.names}
    assert {name for name in imported if name and name.startswith("toolwire")} <= PUBLIC_MODULES


async def test_yaml_selects_the_plugins_model_provider_and_session_store(config: Path) -> None:
    app = App.load(config)
    assert [info.name for info in app.plugins] == ["contributor"]
    model, store = app.llm, app.session_store
    assert isinstance(model, ChatModel)
    assert isinstance(model.transport, contributor_plugin.CannedTransport)
    assert isinstance(store, contributor_plugin.LedgerStore)

    first = await app.ask("Remind me to call mom")
    second = await app.ask("Friday", session_id=first.session_id)
    await app.aclose()

    assert (first.kind, first.text) == ("clarification", "For which day?")
    assert second.kind == "answer" and contributor_plugin.CANNED_ANSWER in second.text
    assert {call.model for call in second.model_calls} == {"canned-1"}
    assert store.ledger == ["create", "save"]  # both turns kept in the plugin's store


def test_toolwire_runs_the_plugins_command_with_its_provider_and_store(config: Path) -> None:
    cli = build_cli()
    runner = CliRunner()

    listed = runner.invoke(cli, ["--help"])
    run = runner.invoke(cli, ["--config", str(config), "remind", "call mom", "--day", "Friday"])

    assert listed.exit_code == 0 and "remind" in listed.stdout
    assert run.exit_code == 0, run.output
    assert run.stdout.strip() == (
        f"For which day? -> {contributor_plugin.CANNED_ANSWER}"
    )


def test_toolwire_check_names_a_store_and_a_provider_the_plugin_does_not_register(
    installed: Path, write_file: WriteFile
) -> None:
    config = write_file("toolwire.yaml", "llm:\n  provider: caned\nsessions:\n  store: ledgr\n")
    result = CliRunner().invoke(build_cli(), ["--config", str(config), "check"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{config}:2: llm.provider: unknown model provider 'caned'; registered: canned, "
        "embedded, openai (a plugin adds one with the register_models hook, docs/plugins.md)",
        f"{config}:4: sessions.store: unknown session store 'ledgr'; registered: ledger, "
        "memory, redis, sqlite (a plugin adds one with the register_session_stores hook, "
        "docs/plugins.md)",
    ]
