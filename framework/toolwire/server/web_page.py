"""The chat page at ``/``: static files shipped in the package (``web/``), no build step and
nothing fetched from elsewhere; it talks to ``/v1`` like any client, with the same API key.

Every file it serves says ``X-Content-Type-Options: nosniff`` (a browser takes a script or a
style only as the type it is sent as) and ``Cache-Control: no-cache`` (a browser asks again, with
the ETag, before it uses a copy: after an upgrade no old script runs against the new API); the
page itself also has a strict Content-Security-Policy.

The page names its files and the API by relative URLs (``web/app.js``, ``v1/ask``), so it works
where a proxy serves the server under a path prefix (``/chat/`` → ``/``), when opened with the
prefix's trailing slash.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

WEB_DIR = Path(__file__).resolve().parent / "web"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page loads only its own files and talks only to its own server."""

NOSNIFF = {"X-Content-Type-Options": "nosniff"}
NO_CACHE = {"Cache-Control": "no-cache"}
"""A copy may be kept but is checked with the server (ETag, 304) before each use."""


def install_web_page(api: FastAPI) -> None:
    """Serve the page at ``/``, its script, style and icon under ``/web``, and the icon at
    ``/favicon.ico`` too (where a browser looks when a page names none)."""

    @api.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(
            WEB_DIR / "index.html",
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                **NOSNIFF,
                **NO_CACHE,
            },
        )

    @api.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(WEB_DIR / "favicon.svg", media_type="image/svg+xml", headers=NOSNIFF)

    api.mount("/web", _WithHeaders(StaticFiles(directory=WEB_DIR)), name="web")


class _WithHeaders:
    """An ASGI app's responses, each with ``X-Content-Type-Options: nosniff`` and
    ``Cache-Control: no-cache``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update({**NOSNIFF, **NO_CACHE})
            await send(message)

        await self.app(scope, receive, with_header)
