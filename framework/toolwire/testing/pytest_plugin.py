"""toolwire's pytest plugin (the ``pytest11`` entry point): fixtures for plugin authors.

- ``scripted_model``: a fresh :class:`ScriptedModel`; real model requests are blocked meanwhile.
- ``block_model_requests``: any real model request in the test raises.
- ``toolwire_app_factory``: build an ``App`` with plugin objects registered for this test only.

The ini option ``toolwire_block_model_requests = true`` blocks real model requests in every test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from toolwire.testing.guard import block_model_requests as _block_model_requests
from toolwire.testing.scripted import ScriptedModel

if TYPE_CHECKING:
    from toolwire.app import App
    from toolwire.sessions.base import SessionStore

AppFactory = Callable[..., "App"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "toolwire_block_model_requests",
        "block real language-model requests in every test",
        type="bool",
        default=False,
    )


@pytest.fixture(autouse=True)
def _toolwire_blocks_model_requests_when_configured(
    request: pytest.FixtureRequest,
) -> Iterator[None]:
    if request.config.getini("toolwire_block_model_requests"):
        with _block_model_requests():
            yield
    else:
        yield


@pytest.fixture
def block_model_requests() -> Iterator[None]:
    """Any real model request made during the test raises ``ModelRequestsBlockedError``."""
    with _block_model_requests():
        yield


@pytest.fixture
def scripted_model(block_model_requests: None) -> ScriptedModel:
    """A fresh scripted model; real model requests are blocked while the test runs."""
    return ScriptedModel()


@pytest.fixture
def toolwire_app_factory(tmp_path: Path) -> Iterator[AppFactory]:
    """Build apps whose plugins are exactly the given objects, for this test only.

    ``toolwire_app_factory(plugins=[MyPlugin()], config="domains: ...", llm=model)`` loads no
    installed plugin; ``config`` is YAML text (written to a temporary file) or a path. Without
    it the app has the built-in defaults: ``$TOOLWIRE_CONFIG`` and ``./config/toolwire.yaml``
    are never read. Conversations are kept in memory unless the configuration names a
    ``sessions.store`` (or ``session_store=`` is given), so none leaks into the working
    directory or the next test. Every app built is closed when the test ends.
    """
    from toolwire.app import App
    from toolwire.config import parse_app_config
    from toolwire.sessions.factory import memory_store

    built: list[App] = []
    stores: list[SessionStore] = []

    def factory(
        plugins: Sequence[object] = (),
        config: str | Path | None = None,
        **kwargs: Any,
    ) -> App:
        if isinstance(config, Path):
            config_path = config
        else:
            config_path = tmp_path / f"toolwire-{len(built)}.yaml"
            config_path.write_text(config or "", encoding="utf-8")
        if kwargs.get("session_store") is None:
            sessions = parse_app_config(config_path)[0].sessions
            if "store" not in sessions.model_fields_set:
                store = memory_store(sessions)
                stores.append(store)
                kwargs["session_store"] = store
        app = App.load(config_path, plugins=plugins, load_entry_points=False, **kwargs)
        built.append(app)
        return app

    yield factory
    asyncio.run(_close(built, stores))


async def _close(apps: list[App], stores: list[SessionStore]) -> None:
    for app in apps:
        await app.aclose()
    for store in stores:  # an app does not close a store it was given
        await store.aclose()
