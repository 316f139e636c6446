"""The pages the HTTP service serves besides the API, in process (FastAPI's test client): the
interactive API pages (``/docs``, ``/redoc``) are off unless ``server.api_docs`` turns them on,
since they load their scripts and styles from a CDN; ``/openapi.json`` is always there. The chat
page's files name each other and the API by relative URLs (a proxy may serve it under a path
prefix) and are revalidated before each use (no old script after an upgrade); in a browser:
``test_web_page.py``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from fastapi.testclient import TestClient
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

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


ROOT_ABSOLUTE = re.compile(r"""(?:href|src|action)\s*=\s*["']/|\bapi\(\s*["'`]/|fetch\(\s*["'`]/""")
"""A URL the page or its script names from the server's root: dead under a path prefix."""


def test_the_chat_page_names_its_files_and_the_api_by_relative_urls(app: App) -> None:
    with TestClient(create_app(app)) as client:
        page = client.get("/")
        script = client.get("/web/app.js")
    assert page.status_code == script.status_code == 200
    assert ROOT_ABSOLUTE.findall(page.text) == []
    assert ROOT_ABSOLUTE.findall(script.text) == []
    assert re.findall(r'(?:href|src)="([^"]+)"', page.text) == [
        "web/favicon.svg", "web/style.css", "web/app.js"
    ]  # fmt: skip
    assert {'api("v1/domains")', 'api("v1/ask", {'} <= {
        match.group(0) for match in re.finditer(r'api\("[^"]*"(?:, \{)?\)?', script.text)
    }


class PrefixProxy:
    """A proxy serving the server under ``/chat/`` (as nginx's ``location /chat/ { proxy_pass
    http://upstream/; }``): the prefix stripped, every other path not routed (404)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and not path.startswith("/chat/"):
            await PlainTextResponse("not routed", 404)(scope, receive, send)
            return
        if scope["type"] == "http":
            scope = {**scope, "path": path[len("/chat") :], "raw_path": None}
        await self.app(scope, receive, send)


def referenced_urls(page_url: str, page: str, script: str) -> list[str]:
    """What a browser asks for after the page: its ``href`` and ``src`` files, and the API paths
    its script calls, each resolved against the page's URL."""
    files = re.findall(r'(?:href|src)="([^"]+)"', page)
    calls = re.findall(r'api\("([^"]+)"', script)
    return [urljoin(page_url, reference) for reference in [*files, *calls]]


@pytest.mark.parametrize(
    ("page_url", "wrapped"),
    [
        ("http://testserver", False),  # the bare URL: a browser asks for / (and resolves so)
        ("http://testserver/", False),
        ("http://testserver/chat/", True),  # behind a proxy, under a prefix
    ],
)
def test_every_url_the_chat_page_names_is_served_at_the_root_and_under_a_prefix(
    app: App, page_url: str, wrapped: bool
) -> None:
    api = create_app(app)
    with TestClient(PrefixProxy(api) if wrapped else api) as client:
        page = client.get(page_url)
        assert page.status_code == 200
        script_url = urljoin(page_url, "web/app.js")
        assert script_url in referenced_urls(page_url, page.text, "")
        script = client.get(script_url).text
        urls = referenced_urls(page_url, page.text, script)
        assert urljoin(page_url, "v1/ask") in urls
        for url in urls:
            if url.endswith("/v1/ask"):  # reached: an empty body is refused by the API itself
                refused = client.post(url, json={})
                assert (refused.status_code, refused.json()["error"]) == (422, "invalid_request")
            else:
                assert client.get(url).status_code == 200, url


def test_the_chat_page_files_are_revalidated_before_each_use(app: App) -> None:
    """Without ``Cache-Control`` a browser may reuse an old ``app.js`` against a new API after
    an upgrade; with ``no-cache`` it asks first, and an unchanged file costs a 304."""
    with TestClient(create_app(app)) as client:
        for path in ("/", "/web/app.js", "/web/style.css", "/web/favicon.svg"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers.get("cache-control") == "no-cache", path
            assert response.headers.get("x-content-type-options") == "nosniff", path
        etag = client.get("/web/app.js").headers["etag"]
        unchanged = client.get("/web/app.js", headers={"if-none-match": etag})
    assert unchanged.status_code == 304
    assert unchanged.headers.get("cache-control") == "no-cache"
