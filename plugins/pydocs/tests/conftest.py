from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One index cache for the whole session: the corpus is built once (~1 s)."""
    return tmp_path_factory.mktemp("pydocs-index")


@pytest.fixture(autouse=True)
def _cache_dir(
    request: pytest.FixtureRequest, index_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index in a temporary cache, except on the embedded model: its 1.1 GB file stays in
    the user's cache instead of being assembled again in every test session."""
    if request.node.get_closest_marker("local_model") is None:
        monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(index_cache))
