"""The interactive API pages, ``/docs`` (Swagger UI) and ``/redoc``: off unless
``server.api_docs`` is true.

FastAPI's pages load their scripts and styles from a CDN: blank offline, and code from another
host on the server's own origin. So they are served only where that is wanted; ``/openapi.json``
describes the API in every case (any OpenAPI viewer reads it).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

from toolwire.server.problems import ApiError

OPENAPI_URL = "/openapi.json"


def install_api_pages(api: FastAPI, enabled: Callable[[], bool]) -> None:
    """``/docs`` and ``/redoc``, each a 404 that says how to turn it on while ``enabled()`` is
    false (it is asked at every request: the settings may come only at startup)."""

    @api.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        _check(enabled(), "/docs")
        return get_swagger_ui_html(
            openapi_url=OPENAPI_URL, title=f"{api.title} - API", oauth2_redirect_url=None
        )

    @api.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        _check(enabled(), "/redoc")
        return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{api.title} - API")


def _check(enabled: bool, path: str) -> None:
    if not enabled:
        raise ApiError(
            404,
            "not_found",
            f"{path} is off: the API pages load their scripts from a CDN (set server.api_docs: "
            f"true to serve them); {OPENAPI_URL} describes the API",
        )
