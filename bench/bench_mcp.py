"""What an MCP tool source costs: App.load with and without a declared server, the first call
(which starts the server), later calls over the reused connection, and the same tool work done
in process for comparison.

The server is the tests' notes server (``tests/mcp_support/notes_server.py``, written with the
SDK, started over stdio). Run: ``.venv/bin/python bench/bench_mcp.py [calls]``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolwire import App
from toolwire.mcp import McpTool
from toolwire.testing import ScriptedModel

NOTES_SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp_support" / "notes_server.py"
BASE = "default_domain: office\nsessions: {store: memory}\ndomains: [{name: office}]\n"
SERVER = (
    "mcp_servers:\n"
    f"  - {{name: notes, command: {json.dumps([sys.executable, str(NOTES_SERVER)])}}}\n"
)


def timed_load(path: Path) -> tuple[App, float]:
    started = time.perf_counter()
    app = App.load(path, llm=ScriptedModel(), load_entry_points=False)
    return app, time.perf_counter() - started


async def calls(tool: McpTool, count: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    await tool.call(title="groceries")
    first = time.perf_counter() - started
    later = []
    for _ in range(count):
        started = time.perf_counter()
        await tool.call(title="groceries")
        later.append(time.perf_counter() - started)
    return first, later


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        without, with_server = Path(folder, "none.yaml"), Path(folder, "notes.yaml")
        without.write_text(BASE, encoding="utf-8")
        with_server.write_text(BASE + SERVER, encoding="utf-8")
        _app, load_without = timed_load(without)
        app, load_with = timed_load(with_server)
        tool = app.tool("read_note")
        assert isinstance(tool, McpTool)
        first, later = await calls(tool, count)
        await app.aclose()
    median = statistics.median(later)
    print(f"App.load without MCP servers     {load_without * 1000:8.1f} ms")
    print(f"App.load with one stdio server   {load_with * 1000:8.1f} ms  (starts it, lists, stops)")
    print(f"first call (starts the server)   {first * 1000:8.1f} ms")
    print(
        f"later calls, median of {count:<4}     {median * 1000:8.2f} ms  "
        f"(p90 {statistics.quantiles(later, n=10)[-1] * 1000:.2f} ms)"
    )
    print(f"ratio first call / later call    {first / median:8.0f} x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
