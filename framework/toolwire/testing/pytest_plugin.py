"""toolwire's pytest plugin (the ``pytest11`` entry point): fixtures for plugin authors.

- ``scripted_model``: a fresh :class:`ScriptedModel`; real model requests are blocked meanwhile.
- ``block_model_requests``: any real model request in the test raises.
- ``toolwire_app_factory``: build an ``App`` with plugin objects registered for this test only.

The ini option ``toolwire_block_model_requests = true`` blocks real model requests in every test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from toolwire.testing.guard import block_model_requests as _block_model_requests
from toolwire.testing.scripted import ScriptedModel

if TYPE_CHECKING:
    from toolwire.app import App

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
    installed plugin; ``config`` is YAML text (written to a temporary file) or a path. Every app
    built is closed when the test ends.
    """
    from toolwire.app import App

    built: list[App] = []

    def factory(
        plugins: Sequence[object] = (),
        config: str | Path | None = None,
        **kwargs: Any,
    ) -> App:
        config_path: Path | None = None
        if isinstance(config, Path):
            config_path = config
        elif isinstance(config, str):
            config_path = tmp_path / f"toolwire-{len(built)}.yaml"
            config_path.write_text(config, encoding="utf-8")
        app = App.load(config_path, plugins=plugins, load_entry_points=False, **kwargs)
        built.append(app)
        return app

    yield factory
    for app in built:
        _close(app)


def _close(app: App) -> None:
    import asyncio

    asyncio.run(app.aclose())
