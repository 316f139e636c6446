"""The pydocs corpus: language reference topics and standard-library docstrings, as pages."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from collections.abc import Iterable, Iterator

from toolwire.search import Page, PageSource, split_into_pages

SOURCE_VERSION = "1"
"""Bump when the way pages are made changes: part of the index fingerprint."""

PAGE_CHARS = 1500

MODULES: tuple[str, ...] = (
    "abc", "argparse", "asyncio", "base64", "bisect", "collections", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "decimal", "enum", "fractions", "functools", "glob", "hashlib",
    "heapq", "itertools", "json", "logging", "math", "operator", "os", "pathlib", "pickle",
    "random", "re", "shutil", "sqlite3", "statistics", "string", "subprocess", "tempfile",
    "textwrap", "threading", "typing", "unittest", "urllib.parse", "uuid", "zipfile",
)  # fmt: skip
"""The standard-library modules whose docstrings are indexed."""

_ALIASES = {"os": ("posix", "nt")}
"""Modules whose functions are implemented in (and report) another module."""

MAX_MEMBER_DOC_CHARS = 1200
MAX_METHODS_PER_CLASS = 25


def topic_doc_id(topic: str) -> str:
    return f"ref-{topic}"


def module_doc_id(module: str) -> str:
    return f"lib-{module}"


class PydocsSource(PageSource):
    """Pages of the reference topics, then of each module in :data:`MODULES`."""

    name = "pydocs"

    def __init__(self, modules: Iterable[str] = MODULES) -> None:
        self.modules = tuple(modules)

    def fingerprint(self) -> str:
        """The interpreter's version and the module list decide the text; no need to read it."""
        key = "\n".join([SOURCE_VERSION, str(PAGE_CHARS), sys.version, *self.modules])
        return hashlib.sha256(key.encode()).hexdigest()

    def load_pages(self) -> Iterator[Page]:
        yield from topic_pages()
        for module in self.modules:
            yield from module_pages(module)


def topic_pages() -> Iterator[Page]:
    """The language reference topics shipped in ``pydoc_data.topics``."""
    from pydoc_data.topics import topics

    for topic in sorted(topics):
        text = topics[topic].strip()
        title = text.splitlines()[0].strip() if text else topic
        yield from split_into_pages(
            topic_doc_id(topic), f"{title} (language reference)", text, max_chars=PAGE_CHARS
        )


def module_pages(module_name: str) -> list[Page]:
    """A module's docstring, then each public function's and class's, with signatures."""
    module = importlib.import_module(module_name)
    summary = (inspect.getdoc(module) or "").strip()
    first_line = summary.splitlines()[0] if summary else ""
    title = f"{module_name} module" + (f": {first_line}" if first_line else "")
    parts = [summary] if summary else []
    for name in _public_names(module):
        member = getattr(module, name, None)
        parts += _member_sections(module_name, name, member)
    return split_into_pages(
        module_doc_id(module_name), title, "\n\n".join(parts), max_chars=PAGE_CHARS
    )


def _public_names(module: object) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in dir(module) if not name.startswith("_")]
    return sorted(set(names))


def _own(member: object, module_name: str) -> bool:
    """Functions and classes defined in the module's package (not constants, not re-exports
    of another library, whose docstrings would repeat)."""
    if not (inspect.isclass(member) or inspect.isroutine(member)):
        return False
    home = getattr(member, "__module__", "") or ""
    root = module_name.split(".")[0]
    return home.lstrip("_").split(".")[0] in {root, *_ALIASES.get(root, ())}


def _member_sections(module_name: str, name: str, member: object) -> list[str]:
    if not _own(member, module_name):
        return []
    doc = inspect.getdoc(member)
    if not doc:
        return []
    sections = [f"{module_name}.{name}{_signature(member)}\n{_clip(doc)}"]
    if inspect.isclass(member):
        methods = 0
        for attribute, value in sorted(vars(member).items()):
            if attribute.startswith("_") or not inspect.isroutine(value):
                continue
            method_doc = inspect.getdoc(value)
            if not method_doc:
                continue
            method = getattr(member, attribute, value)
            sections.append(
                f"{module_name}.{name}.{attribute}{_signature(method)}\n{_clip(method_doc)}"
            )
            methods += 1
            if methods >= MAX_METHODS_PER_CLASS:
                break
    return sections


def _signature(member: object) -> str:
    try:
        return str(inspect.signature(member))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def _clip(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_MEMBER_DOC_CHARS:
        return text
    return text[:MAX_MEMBER_DOC_CHARS].rsplit(" ", 1)[0] + " …"
