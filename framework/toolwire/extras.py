"""toolwire's optional extras: the modules each brings, and the one line that says one is missing.

``pip install toolwire`` alone gives the Python API and every command; a command or a module
that needs an extra checks for it where it is used (never at import of ``toolwire``,
``toolwire.cli`` or ``toolwire.testing``) and says, in one line, which extra to install::

    toolwire serve needs the server extra (fastapi is missing): pip install 'toolwire[server]'
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from types import MappingProxyType

EXTRA_MODULES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "local": ("xllamacpp",),
        "local-small": ("xllamacpp",),
        "server": ("fastapi", "uvicorn"),
        "redis": ("redis",),
        "mcp": ("mcp", "json_schema_to_pydantic", "fastapi", "uvicorn"),
        "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    }
)
"""Extra → the modules it installs that toolwire imports (pyproject.toml declares the packages)."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found on the path; nothing is imported but its
    parent packages)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing; a module without a spec
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (none: the extra is there)."""
    return [module for module in EXTRA_MODULES[extra] if not installed(module)]


def extra_of(module: str) -> str | None:
    """The extra that brings ``module`` (``"fastapi.testclient"``: its top-level package
    counts), or None when no extra does."""
    top = module.partition(".")[0]
    for extra, modules in EXTRA_MODULES.items():
        if any(name.partition(".")[0] == top for name in modules):
            return extra
    return None


def needs_extra(what: str, extra: str, missing: Sequence[str]) -> str:
    """The one line saying that ``what`` (a command, a module, a setting) needs ``extra``."""
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"{what} needs the {extra} extra ({', '.join(missing)} {verb} missing): "
        f"pip install 'toolwire[{extra}]'"
    )


def missing_extra_error(what: str, extra: str, error: ImportError) -> ModuleNotFoundError:
    """``error`` (an optional module that failed to import) as the one line of
    :func:`needs_extra`, keeping the missing module's name."""
    missing = missing_modules(extra) or [error.name or str(error)]
    return ModuleNotFoundError(needs_extra(what, extra, missing), name=error.name)


__all__ = [
    "EXTRA_MODULES",
    "extra_of",
    "installed",
    "missing_extra_error",
    "missing_modules",
    "needs_extra",
]
