"""The pages the HTTP service serves besides the API, in process (FastAPI's test client): the
interactive API pages (``/docs``, ``/redoc``) are off unless ``server.api_docs`` turns them on,
since they load their scripts and styles from a CDN; ``/openapi.json`` is always there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from orchestration_kit import EchoTool, domain, plugin_of
from toolwire import App
from toolwire.server import create_app
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel


class Lookup(EchoTool):
    def __init__(self) -> None:
        super().__init__("lookup", "found")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    config = tmp_path / "toolwire.yaml"
    config.write_text("default_domain: demo\nsessions:\n  store: memory\n", encoding="utf-8")
    plugins = [plugin_of(domain(), Lookup)]
    yield App.load(config, plugins=plugins, load_entry_points=False, llm=ScriptedModel())


def test_the_api_pages_are_off_by_default_and_say_how_to_turn_them_on(app: App) -> None:
    with TestClient(create_app(app)) as client:
        for path in ("/docs", "/redoc"):
            response = client.get(path)
            assert response.status_code == 404, path
            assert "server.api_docs: true" in response.json()["message"]
            assert "<script" not in response.text  # an error body, not a page
        spec = client.get("/openapi.json")
        assert spec.status_code == 200
        assert "/v1/ask" in spec.json()["paths"]
        assert not {"/docs", "/redoc", "/favicon.ico"} & set(spec.json()["paths"])


def test_server_api_docs_serves_both_pages(app: App) -> None:
    with TestClient(create_app(app, ServerSettings(api_docs=True))) as client:
        docs = client.get("/docs")
        redoc = client.get("/redoc")
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    assert "/openapi.json" in docs.text
    assert redoc.status_code == 200 and "redoc" in redoc.text.lower()


def test_api_docs_is_a_server_setting_off_by_default() -> None:
    assert ServerSettings().api_docs is False
    assert ServerSettings.model_validate({"api_docs": True}).api_docs is True
