"""``package.module:Name`` references in the configuration (a tool's ``class``, a domain's
``orchestrator``), imported at build time."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from types import FrameType, ModuleType
from typing import Any

from toolwire.errors import PLUGIN_FAILURES, describe


class UnresolvedReference(Exception):
    """Why a reference cannot be imported; ``module`` is set when only the name is missing."""

    def __init__(self, message: str, module: ModuleType | None = None) -> None:
        super().__init__(message)
        self.module = module


def import_reference(reference: str) -> Any:
    """The object ``reference`` names; ``UnresolvedReference`` says why it cannot be had."""
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name or not attribute:
        raise UnresolvedReference(f"{reference!r} must be written 'package.module:ClassName'")
    try:
        module = importlib.import_module(module_name)
    except PLUGIN_FAILURES as error:  # sys.exit() at import too
        raise UnresolvedReference(f"{reference!r}: {import_failure(module_name, error)}") from error
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if target is None:
        raise UnresolvedReference(
            f"{reference!r}: module {module_name!r} has no {attribute!r}", module
        )
    return target


def import_failure(module_name: str, error: BaseException) -> str:
    """Why ``module_name`` did not import, and what to do about it.

    Only a module that is not there is the reference's to correct (or a package to install);
    one that is there but raised while it ran, or does not compile, is the module's own to fix,
    at the line shown (see :func:`_raising_line`), whatever the reference says.
    """
    if _is_missing(module_name, error):
        return (
            f"cannot import module {module_name!r} ({describe(error)}); correct the module "
            "path or install the package that provides it"
        )
    if isinstance(error, SyntaxError):
        what = f"{type(error).__name__}: {error.msg}"
        where = _syntax_line(error) or _raising_line(module_name, error)
    else:
        what, where = describe(error), _raising_line(module_name, error)
    at = f", at {where}" if where else ""
    fix = _import_fix(module_name, error)
    return f"module {module_name!r} raised while importing{at}: {what}; {fix}"


def _is_missing(module_name: str, error: BaseException) -> bool:
    """Whether ``error`` says that ``module_name`` itself, or a package above it, does not
    exist (a module it imports that is missing is a failure of that module instead)."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    return missing is not None and (module_name == missing or module_name.startswith(f"{missing}."))


def _syntax_line(error: SyntaxError) -> str | None:
    """``path:line`` of a file that does not compile (the module, or one it imports); None when
    the error names no real file: code the module ran compiled a string (``ast.literal_eval``,
    ``compile``), whose ``filename`` is ``<unknown>`` or ``<string>``."""
    if not error.filename or error.filename.startswith("<"):
        return None
    return f"{error.filename}:{error.lineno}" if error.lineno else error.filename


def _raising_line(module_name: str, error: BaseException) -> str | None:
    """``path:line`` of the innermost frame in the module's own code: the author's line that
    raised, or that called the library which did.

    Own code is the module itself, the packages above it (their ``__init__.py``), and any file
    under the outermost of them that is a regular package (a directory with an
    ``__init__.py``: one distribution's). A namespace package (``acme`` of ``acme.shop``) spans
    several distributions' directories, so the files under it are not the module's own; nor are
    the standard library's, another package's or toolwire's.
    """
    frames = list(traceback.walk_tb(error.__traceback__))
    chain = _package_chain(module_name)
    code = [frame for frame, _ in frames]
    root = next((d for d in (_package_dir(name, code) for name in chain) if d), None)
    where = None
    for frame, line in frames:
        filename = frame.f_code.co_filename
        own_name = frame.f_globals.get("__name__") in chain
        if own_name or (root is not None and _is_under(filename, root)):
            where = f"{filename}:{line}"
    return where


def _package_chain(module_name: str) -> list[str]:
    """``"a.b.c"`` → ``["a", "a.b", "a.b.c"]``: the module and the packages above it."""
    parts = module_name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _package_dir(name: str, frames: list[FrameType]) -> str | None:
    """The directory of ``name`` when it is a regular package (its ``__init__.py`` there); None
    for a namespace package, a plain module or one never loaded."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if file is None:  # a package whose own __init__ raised is no longer in sys.modules
        file = next(
            (f.f_globals.get("__file__") for f in frames if f.f_globals.get("__name__") == name),
            None,
        )
    if not isinstance(file, str) or os.path.basename(file) != "__init__.py":
        return None
    return os.path.dirname(os.path.abspath(file))


def _is_under(filename: str, directory: str) -> bool:
    if filename.startswith("<"):
        return False
    path = os.path.normcase(os.path.abspath(filename))
    return path.startswith(os.path.normcase(directory) + os.sep)


def _import_fix(module_name: str, error: BaseException) -> str:
    """What to do about a module that raised: install what it imports, correct an import of
    its own package's module that is not there, or fix it."""
    if not (isinstance(error, ModuleNotFoundError) and error.name):
        return "fix the module there (its path is right)"
    missing = error.name
    package, _, leaf = missing.rpartition(".")
    if package and package.partition(".")[0] == module_name.partition(".")[0]:
        top = sys.modules.get(package.partition(".")[0])
        if top is not None and getattr(top, "__file__", None) is None:  # a namespace package
            return (
                f"package {package!r} has no submodule {leaf!r} here; correct the import there, "
                f"or install the distribution that provides {missing!r}"
            )
        return f"package {package!r} has no submodule {leaf!r}; correct the import there"
    return f"install the package that provides {missing!r}"
