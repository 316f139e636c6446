"""No import cycles in the toolwire package: contracts live below the modules that use them.

The graph is read with ``ast`` from the sources, not from ``sys.modules``: every ``import`` counts,
at module level, under ``if TYPE_CHECKING:`` and inside functions alike (a deferred import is a
dependency too). One kind of edge is left out: a package's ``__init__`` importing its own modules
to re-export them (Python loads a package before any of its modules, so the facade depends on
them, not the other way round).
"""

from __future__ import annotations

import ast
from pathlib import Path

import toolwire

PACKAGE_ROOT = Path(toolwire.__file__).parent


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name → source file, for every module of the package at ``root``."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            # ``from package import module`` imports the module; anything else, the package.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    if is_package:  # a facade re-exporting its own modules
        found = {target for target in found if not target.startswith(f"{name}.")}
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """Each set of modules that import each other (directly or round about), sorted."""
    modules = module_files(root)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(name: str) -> None:  # Tarjan's strongly connected components
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in graph[name]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return sorted(cycles)


def describe(cycles: list[list[str]], root: Path) -> str:
    modules = module_files(root)
    lines = []
    for cycle in cycles:
        lines.append(" ↔ ".join(cycle))
        for name in cycle:
            targets = sorted(imported_modules(name, modules[name], modules) & set(cycle))
            lines.append(f"    {name} imports {', '.join(targets)}")
    return "\n".join(lines)


def test_the_toolwire_package_has_no_import_cycles() -> None:
    cycles = import_cycles(PACKAGE_ROOT)
    assert cycles == [], "import cycles (move the shared contract down):\n" + describe(
        cycles, PACKAGE_ROOT
    )


def test_the_check_finds_cycles_of_every_kind(tmp_path: Path) -> None:
    """The check itself: a cycle through a deferred import, one through a TYPE_CHECKING import
    and one of three modules are each found; a facade importing its own modules is not one."""
    package = tmp_path / "demo"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from demo.a import A\nfrom demo.sub import helper\n",
        "a.py": "from demo.b import B\nA = 1\n",
        "b.py": "def f():\n    from demo import a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from demo.d import D\n",
        "d.py": "from .c import C\n",
        "e.py": "import demo.f\n",
        "f.py": "from demo import g\n",
        "g.py": "from demo.e import E\n",
        "sub/__init__.py": "from demo.sub.helper import helper\n",
        "sub/helper.py": "import demo.sub\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")

    assert import_cycles(package) == [
        ["demo.a", "demo.b"],
        ["demo.c", "demo.d"],
        ["demo.e", "demo.f", "demo.g"],
    ]
    assert "demo.b imports demo.a" in describe(import_cycles(package), package)
