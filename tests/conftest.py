"""Generic fixtures shared by the framework's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from _build_samples import WriteFile
from toolwire.logging import configure_logging


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Each test starts and ends with structlog unconfigured, so one test's App.load() (which
    configures logging at ``warning``) never hides another test's captured ``info`` events."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory with no toolwire environment variables set."""
    for name in ("TOOLWIRE_CONFIG", "TOOLWIRE_PLUGINS", "TOOLWIRE_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """Write ``text`` to ``tmp_path / name`` (creating folders) and return the path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def info_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """toolwire's logging at ``info``, so ``structlog.testing.capture_logs()`` sees build steps."""
    monkeypatch.setenv("TOOLWIRE_LOG_LEVEL", "info")
    configure_logging(force=True)
    yield
    structlog.reset_defaults()
