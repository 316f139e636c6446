"""Fixtures of the pharma plugin's tests: the installed plugin in an App with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import toolwire_pharma.plugin
from pharma_testkit import AppFactory

from toolwire import App
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No project configuration and no environment override reaches the app."""
    monkeypatch.chdir(tmp_path)
    for name in ("TOOLWIRE_CONFIG", "TOOLWIRE_PLUGINS", "TOOLWIRE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
async def pharma_app(isolated: Path) -> AsyncIterator[AppFactory]:
    """``pharma_app(model)``: the pharma plugin alone, loaded as a plugin object."""
    built: list[App] = []

    def factory(model: ScriptedModel) -> App:
        app = App.load(
            plugins=[toolwire_pharma.plugin],
            load_entry_points=False,
            llm=model,
            session_store=MemorySessionStore(),
        )
        built.append(app)
        return app

    yield factory
    for app in built:
        await app.aclose()
