"""The HTTP service (``toolwire[server]``): FastAPI over one shared toolwire ``App``.

``create_app(app, settings)`` builds the ASGI application; ``serve(app)`` runs it with uvicorn
(what ``toolwire serve`` does). Endpoints: ``POST /v1/ask``, ``GET /v1/domains``,
``GET /v1/tools``, ``/healthz``, ``/readyz``, and the OpenAPI document at ``/openapi.json``.
"""

from toolwire.server.factory import create_app
from toolwire.server.run import configure_server_logging, serve

__all__ = ["configure_server_logging", "create_app", "serve"]
