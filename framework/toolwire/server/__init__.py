"""The HTTP service (``toolwire[server]``): FastAPI over one shared toolwire ``App``.

``create_app(app, settings)`` builds the ASGI application; ``serve(app)`` runs it with uvicorn
(what ``toolwire serve`` does). Endpoints: ``POST /v1/ask``, ``GET /v1/domains``,
``GET /v1/tools``, ``/healthz``, ``/readyz``, and the OpenAPI document at ``/openapi.json``.

Importing this package imports neither FastAPI nor uvicorn: its names are imported when first
used, so the modules that need none of them (``schemas``) work without the extra;
without it, using a name raises ``ModuleNotFoundError`` saying in one line which extra to install.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolwire.server.factory import create_app
    from toolwire.server.run import configure_server_logging, serve

_HOMES = {
    "create_app": "toolwire.server.factory",
    "configure_server_logging": "toolwire.server.run",
    "serve": "toolwire.server.run",
}
"""Public name → the module that defines it."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from toolwire.extras import extra_of, missing_extra_error

    try:
        module = import_module(home)
    except ModuleNotFoundError as error:
        if extra_of(error.name or "") is None:
            raise  # not an optional module: a broken installation, shown as it is
        raise missing_extra_error("toolwire.server", "server", error) from None
    return getattr(module, name)


__all__ = ["configure_server_logging", "create_app", "serve"]
