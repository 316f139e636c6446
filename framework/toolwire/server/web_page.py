"""The chat page at ``/``: static files shipped in the package (``web/``), no build step and
nothing fetched from elsewhere; it talks to ``/v1`` like any client, with the same API key."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parent / "web"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page loads only its own files and talks only to its own server."""


def install_web_page(api: FastAPI) -> None:
    """Serve the page at ``/`` and its script and style under ``/web``."""

    @api.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(
            WEB_DIR / "index.html",
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-cache",
            },
        )

    api.mount("/web", StaticFiles(directory=WEB_DIR), name="web")
