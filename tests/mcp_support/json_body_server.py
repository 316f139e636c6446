"""An MCP server over streamable HTTP whose every answer is one plain JSON body, for tests of
bodies too large to read (``python json_body_server.py --http PORT``, on 127.0.0.1).

Its tool ``dump`` answers as ``answer`` says: ``short`` (a small result), ``endless`` (a JSON
body that never ends, sent 64 KiB at a time without a Content-Length) or ``gzip`` (5 MB of JSON
compressed to a few kilobytes, with the compressed Content-Length).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PIECE = b"x" * 65_536
DUMP = {
    "name": "dump",
    "description": "Dump the warehouse's records.",
    "inputSchema": {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["short", "endless", "gzip"]}},
        "required": ["answer"],
    },
}


def answer(request_id: int | str, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}


async def endless(request_id: int | str) -> AsyncIterator[bytes]:
    yield answer(request_id, text(""))[: -len(b'"}]}}')]  # the text left open, forever
    while True:
        yield PIECE
        await asyncio.sleep(0.01)


def call(request_id: int | str, arguments: dict[str, Any]) -> Response:
    if arguments["answer"] == "endless":
        return StreamingResponse(endless(request_id), media_type="application/json")
    if arguments["answer"] == "gzip":
        body = gzip.compress(answer(request_id, text("x" * 5_000_000)))
        headers = {"content-encoding": "gzip"}
        return Response(body, media_type="application/json", headers=headers)
    return Response(answer(request_id, text("a short answer")), media_type="application/json")


async def mcp(request: Request) -> Response:
    message = await request.json()
    request_id, params = message.get("id"), message.get("params") or {}
    if request_id is None:
        return Response(status_code=202)
    if message["method"] == "initialize":
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "warehouse", "version": "1"},
        }})  # fmt: skip
    if message["method"] == "tools/list":
        return Response(answer(request_id, {"tools": [DUMP]}), media_type="application/json")
    return call(request_id, params["arguments"])


app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
