"""The directory toolwire keeps what it can rebuild in: the assembled embedded model (``models``)
and the search indexes (``index``).

One function for both, so that the two never end up in different places for the same
environment. It imports nothing of toolwire: the model cache and the index both use it without
depending on each other or on an optional extra.
"""

from __future__ import annotations

import os
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
