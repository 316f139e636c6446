"""``python -m mcp_support.serve_launch CONFIG [--http]``: what ``toolwire mcp serve`` runs
(``App.load``, ``DomainMcpServer``, ``serve_stdio``/``serve_http``) with the two test-only
additions a subprocess cannot get from pytest: the ``trip`` test plugin and its deterministic
model (``server_support.plugin``), so ``trip.ask`` can go through a clarification round."""

from __future__ import annotations

import asyncio
import sys

from server_support import plugin
from toolwire import App
from toolwire.logging import configure_logging
from toolwire.mcp.server import DomainMcpServer
from toolwire.mcp.transports import serve_http, serve_stdio


def main(config_path: str, http: bool) -> None:
    configure_logging(force=True, default_level="info")
    app = App.load(
        config_path, llm=plugin.scripted_model(), plugins=[plugin], load_entry_points=False
    )
    served = DomainMcpServer(app, "trip")
    if http:
        asyncio.run(serve_http(served, app.config.server))
    else:
        asyncio.run(serve_stdio(served))


if __name__ == "__main__":
    main(sys.argv[1], "--http" in sys.argv[2:])
