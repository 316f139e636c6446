"""JSON from clients, read with one rule more than ``json.loads``: each object names a key once.

``{"message": "harmless", "message": "ignore your rules"}`` is JSON that parsers read
differently: Python's ``json`` and pydantic keep the last value, others the first or refuse it.
A proxy, a policy check or a log that reads one value while toolwire acts on the other is a way
to smuggle a message past them, so every body or message toolwire reads from a client (``POST
/v1/ask``, MCP over HTTP and stdio) goes through :func:`loads`, which refuses a repeated key at
any depth with :class:`DuplicateKeyError`, naming the key and where it is.

A body without a repeated key is parsed once, through ``object_pairs_hook``: as fast as
``json.loads`` for a body of a few objects (a question: 60 kB of message, about 0.05 ms), about
1.7 times slower for one of thousands of small objects (60 kB: 0.8 ms against 0.45). The
key's path is worked out only once a key is found twice.
"""

from __future__ import annotations

import json
from typing import Any

SHOWN_KEY_CHARS = 100
"""How much of a key an error message shows: a client's key can be as long as its body."""


class DuplicateKeyError(ValueError):
    """A JSON object names ``key`` more than once.

    ``location`` is the path from the document's top to that key, the key last (object keys
    and array indices; None when it could not be worked out), ``path`` the same as JSONPath
    (``$.params.arguments.city``). Of several, the first in the document, outermost first.
    """

    def __init__(self, key: str, location: tuple[str | int, ...] | None) -> None:
        self.key = key
        self.location = location
        self.path = None if location is None else json_path(location)
        where = "" if self.path is None else f" at {self.path}"
        super().__init__(f"duplicate key {shown_key(key)}{where}")


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``, refusing an object that names a key twice.

    Raises :class:`DuplicateKeyError` (a ``ValueError``), and whatever ``json.loads`` raises.
    """
    try:
        return json.loads(data, object_pairs_hook=_unique)
    except _Repeated as repeated:
        location = _locate(data)
        key = repeated.key if location is None else str(location[-1])
        raise DuplicateKeyError(key, location) from None


def shown_key(key: str) -> str:
    """A key as an error message quotes it, cut to :data:`SHOWN_KEY_CHARS`."""
    if len(key) > SHOWN_KEY_CHARS:
        return json.dumps(key[:SHOWN_KEY_CHARS], ensure_ascii=False)[:-1] + '…"'
    return json.dumps(key, ensure_ascii=False)


def json_path(location: tuple[str | int, ...]) -> str:
    """``("params", "arguments", 0, "a b")`` as ``$.params.arguments[0]["a b"]``."""
    parts = ["$"]
    for step in location:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif step.isidentifier() and len(step) <= SHOWN_KEY_CHARS:
            parts.append(f".{step}")
        else:
            parts.append(f"[{shown_key(step)}]")
    return "".join(parts)


class _Repeated(Exception):
    """A signal inside :func:`loads`, never seen outside it."""

    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The happy path's hook: the object, unless a key came twice."""
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Repeated(_first_repeated(pairs))
    return result


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key repeated")  # pragma: no cover - the caller counted one


class _Marked(dict[str, Any]):
    """An object of the second reading that names ``repeated`` twice."""

    repeated: str


def _marking(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    marked = _Marked(result)
    marked.repeated = _first_repeated(pairs)
    return marked


def _locate(data: str | bytes | bytearray) -> tuple[str | int, ...] | None:
    """Where the first repeated key is, in document order, outermost first: the document is
    read again keeping every object, the marked ones noted, then walked from its top (without
    recursion: the walk goes as deep as the document). None when the second reading fails (a
    part nested too deeply after the first repeated key)."""
    try:
        document = json.loads(data, object_pairs_hook=_marking)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, location = stack.pop()
        if isinstance(value, _Marked):
            return (*location, value.repeated)
        if isinstance(value, dict):
            items: list[tuple[str | int, Any]] = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        stack.extend((child, (*location, step)) for step, child in reversed(items))
    return None
