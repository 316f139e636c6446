"""A server process for the tests: ``python -m server_support.launch CONFIG``.

It runs exactly what ``toolwire serve`` runs (``configure_server_logging``, ``App.load``,
``toolwire.server.serve``), with two test-only additions a subprocess cannot get from pytest: the
test plugin and the deterministic model (unless ``$TOOLWIRE_TEST_REAL_MODEL`` is set: then the
model the configuration's ``llm`` section names, a fake OpenAI-compatible server in the tests).
The port comes from the config (0: a free one); the ``server_listening`` log event on stderr says
which.
"""

from __future__ import annotations

import asyncio
import os
import sys

from server_support import plugin
from toolwire import App
from toolwire.server import configure_server_logging, serve


def main(config_path: str) -> None:
    configure_server_logging()
    model = None if os.environ.get("TOOLWIRE_TEST_REAL_MODEL") else plugin.scripted_model()
    app = App.load(config_path, llm=model, plugins=[plugin], load_entry_points=False)
    asyncio.run(serve(app))


if __name__ == "__main__":
    main(sys.argv[1])
