"""``package.module:Name`` references in the configuration (a tool's ``class``, a domain's
``orchestrator``), imported at build time."""

from __future__ import annotations

import importlib
from types import ModuleType
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
    at the line shown, whatever the reference says.
    """
    if _is_missing(module_name, error):
        return (
            f"cannot import module {module_name!r} ({describe(error)}); correct the module "
            "path or install the package that provides it"
        )
    if isinstance(error, SyntaxError):
        what, where = f"{type(error).__name__}: {error.msg}", _syntax_line(error)
    else:
        what, where = describe(error), _raising_line(module_name, error)
    at = f", at {where}" if where else ""
    return f"module {module_name!r} raised while importing{at}: {what}; {_import_fix(error)}"


def _is_missing(module_name: str, error: BaseException) -> bool:
    """Whether ``error`` says that ``module_name`` itself, or a package above it, does not
    exist (a module it imports that is missing is a failure of that module instead)."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    return missing is not None and (module_name == missing or module_name.startswith(f"{missing}."))


def _syntax_line(error: SyntaxError) -> str | None:
    """``path:line`` of a syntax error: the file that does not compile (the module, or one it
    imports)."""
    if error.filename is None:
        return None
    return f"{error.filename}:{error.lineno}" if error.lineno else error.filename


def _raising_line(module_name: str, error: BaseException) -> str | None:
    """``path:line`` of the innermost frame in the module's own package: the author's line that
    raised, or that called the library which did."""
    package = module_name.partition(".")[0]
    where = None
    frame = error.__traceback__
    while frame is not None:
        name = str(frame.tb_frame.f_globals.get("__name__", ""))
        if name == package or name.startswith(f"{package}."):
            where = f"{frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}"
        frame = frame.tb_next
    return where


def _import_fix(error: BaseException) -> str:
    """What to do about a module that raised: install what it imports, or fix it."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        return f"install the package that provides {error.name!r}"
    return "fix the module there (its path is right)"
