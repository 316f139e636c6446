"""``toolwire mcp serve --http`` behind a load balancer or a proxy, in process on 127.0.0.1:
``/healthz`` and ``/readyz`` answer ``GET`` and ``HEAD`` without a token (every ``GET`` was a 405
and every path behind the bearer gate, so nothing could probe it), for exactly those paths; and
a proxy on the same host that keeps the client's ``Host`` is accepted when
``server.mcp_allowed_hosts`` names it (it got the SDK's bare 421 ``Invalid Host header``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from orchestration_kit import plugin_of
from server_support.gated import Gated
from server_support.live import serving_asgi
from toolwire import App
from toolwire.mcp.server import DomainMcpServer
from toolwire.mcp.transports import MCP_PATH, http_app, transport_security
from toolwire.registry import DomainSpec
from toolwire.server.auth import ApiKey
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel

pytestmark = pytest.mark.requires_extra("mcp")

TOKEN = "probe-test-token"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def mcp_server(
    tmp_path: Path, keys: list[ApiKey], **server: Any
) -> AsyncIterator[tuple[str, App]]:
    """The MCP HTTP application of a one-tool domain, served; its base URL and its app."""
    config = tmp_path / "toolwire.yaml"
    settings = {"host": "127.0.0.1", **server}
    body = {"default_domain": "demo", "sessions": {"store": "memory"}, "server": settings}
    config.write_text(json.dumps(body), encoding="utf-8")
    spec = DomainSpec(name="demo", description="One tool (test domain).")
    app = App.load(
        config, llm=ScriptedModel(), plugins=[plugin_of(spec, Gated)], load_entry_points=False
    )
    settings_model = app.config.server
    try:
        asgi = http_app(DomainMcpServer(app, "demo"), settings_model, keys)
        async with serving_asgi(asgi, settings_model) as url:
            yield url, app
    finally:
        await app.aclose()


async def test_health_endpoints_answer_get_and_head_without_a_token(tmp_path: Path) -> None:
    async with (
        mcp_server(tmp_path, [ApiKey("default", TOKEN)]) as (url, _app),
        httpx.AsyncClient(timeout=5) as client,
    ):
        health = await client.get(f"{url}/healthz")
        ready = await client.get(f"{url}/readyz")
        heads = [await client.head(f"{url}{path}") for path in ("/healthz", "/readyz")]
        posted = await client.post(f"{url}/healthz")
        gated = await client.post(f"{url}{MCP_PATH}", json=PING, headers=ACCEPT)
        others = [await client.get(f"{url}{path}") for path in ("/healthz/x", "/readyzz", "/")]
        authorised = await client.post(
            f"{url}{MCP_PATH}", json=PING, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        )

    assert (health.status_code, health.json()) == (200, {"status": "ok", "detail": ""})
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    assert ready.json()["detail"] == "session store: memory"
    assert health.headers["x-request-id"]  # the request ids and access log hold for probes too
    assert [(head.status_code, head.content) for head in heads] == [(200, b""), (200, b"")]
    assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")
    assert posted.json()["error"] == "method_not_allowed"
    assert gated.status_code == 401  # /mcp still needs the token
    assert [other.status_code for other in others] == [401, 401, 401]  # those paths only
    assert authorised.status_code == 200


async def test_readiness_says_when_the_session_store_does_not_answer(tmp_path: Path) -> None:
    async with (
        mcp_server(tmp_path, []) as (url, app),
        httpx.AsyncClient(timeout=5) as client,
    ):

        async def broken(session_id: str) -> Any:
            raise OSError("redis: connection refused")

        app.session_store.load = broken  # type: ignore[method-assign]
        ready = await client.get(f"{url}/readyz")
        health = await client.get(f"{url}/healthz")

    assert (ready.status_code, ready.json()["status"]) == (503, "unavailable")
    assert ready.json()["detail"].startswith("session store unreachable (error id ")
    assert health.status_code == 200


async def post_ping_as(url: str, host: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.post(
            f"{url}{MCP_PATH}", json=PING, headers={**ACCEPT, "Host": host, **headers}
        )


async def test_a_host_named_in_mcp_allowed_hosts_is_accepted_and_another_refused_in_json(
    tmp_path: Path,
) -> None:
    allowed = ["mcp.example.com", "tools.example.com:*"]
    async with mcp_server(tmp_path, [], mcp_allowed_hosts=allowed) as (url, _app):
        port = url.rsplit(":", 1)[1]
        kept = await post_ping_as(url, "mcp.example.com")
        any_port = await post_ping_as(url, "tools.example.com:8443")
        loopback = await post_ping_as(url, f"127.0.0.1:{port}")
        from_the_site = await post_ping_as(url, "mcp.example.com", Origin="https://mcp.example.com")
        other = await post_ping_as(url, "evil.example.com")

    assert [r.status_code for r in (kept, any_port, loopback, from_the_site)] == [200] * 4
    assert other.status_code == 421
    assert other.headers["content-type"] == "application/json"
    body = other.json()
    assert body["error"] == "misdirected_request"
    assert body["details"] == {"host": "evil.example.com"}
    assert "server.mcp_allowed_hosts" in body["message"]
    assert body["request_id"] == other.headers["x-request-id"]


async def test_without_the_setting_a_proxy_keeping_its_host_is_refused(tmp_path: Path) -> None:
    async with mcp_server(tmp_path, []) as (url, _app):
        refused = await post_ping_as(url, "mcp.example.com")

    assert (refused.status_code, refused.json()["error"]) == (421, "misdirected_request")


@pytest.mark.parametrize(
    "value", ["https://mcp.example.com", "mcp.example.com/mcp", "", "mcp example.com", "a:b:c"]
)
def test_mcp_allowed_hosts_takes_host_header_values_only(value: str) -> None:
    with pytest.raises(ValidationError, match="is not a Host header value"):
        ServerSettings(mcp_allowed_hosts=[value])


def test_mcp_allowed_hosts_takes_names_addresses_and_ports() -> None:
    hosts = ["mcp.example.com", "mcp.example.com:8443", "mcp.example.com:*", "10.0.0.5", "[::1]:*"]
    assert ServerSettings(mcp_allowed_hosts=hosts).mcp_allowed_hosts == hosts


def test_an_any_port_host_accepts_a_browser_on_the_default_port() -> None:
    """A browser on https's default port sends ``Origin: https://mcp.example.com``, without a
    port, which the SDK's ``:*`` does not match."""
    security = transport_security(
        ServerSettings(host="127.0.0.1", mcp_allowed_hosts=["mcp.example.com:*"])
    )

    assert security is not None
    assert {"https://mcp.example.com", "https://mcp.example.com:*"} <= set(
        security.allowed_origins
    )
    assert "https://example.com" not in security.allowed_origins
