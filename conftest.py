"""Tests of an install without every extra: what needs a missing one is skipped, with a reason.

``pip install toolwire[dev]`` alone (or with one plugin) must collect every test. A test module
whose imports need a missing extra (``fastapi`` for ``[server]``, ``redis`` for ``[redis]``, …;
``toolwire.extras`` says which module is whose) is skipped with the line saying which extra to
install; a plugin whose package is not installed has its tests skipped the same way, before its
``conftest.py`` imports it. A test that needs an extra only at run time (a ``toolwire serve``
process, an MCP server) says so with ``@pytest.mark.requires_extra("server")``.

Under ``CI=true`` (``.ci/run``, every extra installed) a missing extra is an error instead, as
the Redis tests fail there without ``redis-server``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest

from toolwire.extras import extra_of, installed, missing_modules, needs_extra

ROOT = Path(__file__).parent
PLUGINS = ROOT / "plugins"

DEV_MODULES = {"yaml": "pyyaml", "respx": "respx", "playwright": "playwright"}
"""Modules of the ``[dev]`` extra the tests import, by the package that brings them."""


def under_ci() -> bool:
    """Whether every extra must be there (``CI=true``)."""
    return os.environ.get("CI", "").lower() == "true"


def missing_reason(what: str, module: str) -> str | None:
    """Why ``what`` (a test module), needing ``module``, cannot run here, or None when no extra
    or plugin brings ``module``."""
    extra = extra_of(module)
    if extra is not None:
        return needs_extra(what, extra, missing_modules(extra) or [module])
    top = module.partition(".")[0]
    if top in DEV_MODULES:
        return needs_extra(what, "dev", [top])
    for project in sorted(PLUGINS.glob("*/pyproject.toml")):
        if (project.parent / top).is_dir():
            return plugin_missing(what, project.parent)
    return None


def plugin_name(folder: Path) -> str:
    """The distribution name of the bundled plugin in ``folder`` (``toolwire-pharma``)."""
    project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
    return str(project["name"])


def plugin_missing(what: str, folder: Path) -> str:
    return (
        f"{what} needs the {plugin_name(folder)} plugin, which is not installed: "
        f"pip install -e {folder.relative_to(ROOT)} (scripts/setup.sh installs it)"
    )


def plugin_installed(folder: Path) -> bool:
    try:
        metadata.distribution(plugin_name(folder))
    except metadata.PackageNotFoundError:
        return False
    return True


class ModuleNeedingExtras(pytest.Module):
    """A test module that is skipped (an error under CI) when an extra it imports is missing."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        try:
            return super().collect()
        except self.CollectError as error:
            missing = error.__cause__
            if not isinstance(missing, ModuleNotFoundError) or missing.name is None:
                raise
            reason = missing_reason(self.nodeid, missing.name)
            if reason is None or installed(missing.name):
                raise  # not an optional module, or it is there and failed for another reason
            if under_ci():
                raise self.CollectError(
                    f"{reason}; under CI=true every extra must be installed\n{error}"
                ) from missing
            raise pytest.skip.Exception(reason, allow_module_level=True) from None


class PluginNotInstalled(pytest.Directory):
    """A plugin's tests folder whose plugin is not installed: skipped (an error under CI)
    without importing its ``conftest.py``, which imports the plugin."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        reason = plugin_missing(self.nodeid, self.path.parent)
        if under_ci():
            raise self.CollectError(f"{reason}; under CI=true every plugin must be installed")
        raise pytest.skip.Exception(reason, allow_module_level=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires_extra(*extras): the test needs these extras of toolwire (server, mcp, ...) at "
        "run time: skipped without one, an error under CI=true",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``requires_extra(...)`` (one that starts ``toolwire serve`` or an MCP server
    in another process, or whose app reports a missing extra as a problem) is skipped outside CI
    when one is missing, and fails under CI."""
    for marker in item.iter_markers("requires_extra"):
        for extra in marker.args:
            missing = missing_modules(extra)
            if not missing:
                continue
            reason = needs_extra(item.nodeid, extra, missing)
            if under_ci():
                pytest.fail(f"{reason}; under CI=true every extra must be installed")
            pytest.skip(reason)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
    return ModuleNeedingExtras.from_parent(parent, path=module_path)


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if path.name == "tests" and path.parent.parent == PLUGINS and not plugin_installed(path.parent):
        return PluginNotInstalled.from_parent(parent, path=path)
    return None
