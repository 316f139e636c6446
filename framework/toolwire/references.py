"""``package.module:Name`` references in the configuration (a tool's ``class``, a domain's
``orchestrator``), imported at build time."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from toolwire.errors import PLUGIN_FAILURES


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
        raise UnresolvedReference(
            f"{reference!r}: cannot import module {module_name!r} "
            f"({type(error).__name__}: {error}); correct the module path or install the "
            "package that provides it"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if target is None:
        raise UnresolvedReference(
            f"{reference!r}: module {module_name!r} has no {attribute!r}", module
        )
    return target
