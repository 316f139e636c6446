"""The directory toolwire keeps what it can rebuild in: the assembled embedded model (``models``)
and the search indexes (``index``).

One function for both, so that the two never end up in different places for the same
environment. It imports nothing of toolwire: the model cache and the index both use it without
depending on each other or on an optional extra.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def cache_root() -> Path:
    """``$TOOLWIRE_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolwire``, else ``~/.cache/toolwire``;
    a ``~`` in either variable is the home directory (a value written in a ``.env`` file or a
    quoted shell assignment reaches toolwire unexpanded)."""
    explicit = os.environ.get("TOOLWIRE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "toolwire"


def new_cache_file(target: Path, prefix: str = "") -> tuple[Path, int]:
    """A new, empty file beside ``target`` to be written and then put in its place, and its
    descriptor open for writing. Created with the permissions of any new file (``0o666`` less
    the umask), not ``mkstemp``'s owner-only ones: a cache filled by another user (a container
    image built as root) stays readable for the user who runs toolwire."""
    path = target.with_name(f"{prefix}{target.name}.{secrets.token_hex(8)}.tmp")
    return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
