"""The chat page at ``/``: static files shipped in the package (``web/``), no build step and
nothing fetched from elsewhere; it talks to ``/v1`` like any client, with the same API key.

Every file it serves says ``X-Content-Type-Options: nosniff`` (a browser takes a script or a
style only as the type it is sent as); the page itself also has a strict Content-Security-Policy.
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
                "Cache-Control": "no-cache",
            },
        )

    @api.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(WEB_DIR / "favicon.svg", media_type="image/svg+xml", headers=NOSNIFF)

    api.mount("/web", _Nosniff(StaticFiles(directory=WEB_DIR)), name="web")


class _Nosniff:
    """An ASGI app's responses, each with ``X-Content-Type-Options: nosniff``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(NOSNIFF)
            await send(message)

        await self.app(scope, receive, with_header)
