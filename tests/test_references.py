"""``package.module:Name`` references: why one does not import, and what to do about it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _build_samples import WriteFile
from toolwire.references import UnresolvedReference, import_reference


@pytest.fixture
def importable(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WriteFile]:
    """``write_file`` into a package ``shop_refs`` that can be imported, forgotten after the
    test (the next test's package is in another directory)."""
    monkeypatch.syspath_prepend(str(isolated))
    write_file("shop_refs/__init__.py", "")
    yield write_file
    for name in [name for name in sys.modules if name.split(".")[0] == "shop_refs"]:
        del sys.modules[name]


def unresolved(reference: str) -> str:
    with pytest.raises(UnresolvedReference) as raised:
        import_reference(reference)
    return str(raised.value)


@pytest.mark.parametrize(
    ("reference", "missing"),
    [("shop_refs.tool:Tool", "shop_refs.tool"), ("shop_refz.tools:Tool", "shop_refz")],
    ids=["module", "package above it"],
)
def test_a_module_that_is_not_there_is_the_references_to_correct(
    importable: WriteFile, reference: str, missing: str
) -> None:
    module = reference.partition(":")[0]
    assert unresolved(reference) == (
        f"{reference!r}: cannot import module {module!r} (ModuleNotFoundError: No module named "
        f"{missing!r}); correct the module path or install the package that provides it"
    )


def test_a_module_that_raises_while_importing_is_shown_at_the_line_that_raised(
    importable: WriteFile,
) -> None:
    """It used to be told to correct its module path, which was right."""
    path = importable("shop_refs/tools.py", (
        "import os\n"
        "\n"
        "DATA_DIR = os.environ.get('SHOP_REFS_DATA_DIR')\n"
        "if DATA_DIR is None:\n"
        "    raise RuntimeError('DATA_DIR not set')\n"
    ))  # fmt: skip
    assert unresolved("shop_refs.tools:Tool") == (
        f"'shop_refs.tools:Tool': module 'shop_refs.tools' raised while importing, at {path}:5: "
        "RuntimeError: DATA_DIR not set; fix the module there (its path is right)"
    )


def test_the_line_shown_is_the_authors_not_the_librarys(importable: WriteFile) -> None:
    path = importable("shop_refs/tools.py", "import json\n\nCATALOGUE = json.loads('{')\n")
    message = unresolved("shop_refs.tools:Tool")
    assert f"raised while importing, at {path}:3: JSONDecodeError: " in message


def test_a_syntax_error_is_shown_at_its_line(importable: WriteFile) -> None:
    path = importable("shop_refs/tools.py", "class Tool:\n    pass\n\ndef lookup(:\n    pass\n")
    message = unresolved("shop_refs.tools:Tool")
    assert message.startswith(
        f"'shop_refs.tools:Tool': module 'shop_refs.tools' raised while importing, at {path}:4: "
        "SyntaxError: "
    )
    assert message.endswith("; fix the module there (its path is right)")


def test_a_module_whose_own_import_is_missing_names_what_to_install(
    importable: WriteFile,
) -> None:
    path = importable("shop_refs/tools.py", "import shop_refs_missing_dependency\n")
    assert unresolved("shop_refs.tools:Tool") == (
        f"'shop_refs.tools:Tool': module 'shop_refs.tools' raised while importing, at {path}:1: "
        "ModuleNotFoundError: No module named 'shop_refs_missing_dependency'; install the "
        "package that provides 'shop_refs_missing_dependency'"
    )


def test_a_syntax_error_of_code_the_module_ran_is_shown_at_the_module_line_that_ran_it(
    importable: WriteFile,
) -> None:
    """``ast.literal_eval`` raises a SyntaxError of the string it read: it used to be shown
    ``at <unknown>:1``."""
    path = importable("shop_refs/tools.py", "import ast\n\nRULES = ast.literal_eval(\"{'a': \")\n")
    assert unresolved("shop_refs.tools:Tool") == (
        f"'shop_refs.tools:Tool': module 'shop_refs.tools' raised while importing, at {path}:3: "
        "SyntaxError: '{' was never closed; fix the module there (its path is right)"
    )


def test_a_module_of_its_own_package_that_raises_is_shown_at_its_line(
    importable: WriteFile,
) -> None:
    importable("shop_refs/tools.py", "from shop_refs import helpers\n")
    helpers = importable("shop_refs/helpers.py", "import json\n\nDATA = json.loads('{')\n")
    assert f"raised while importing, at {helpers}:3: JSONDecodeError: " in unresolved(
        "shop_refs.tools:Tool"
    )


def test_a_missing_module_of_its_own_package_is_no_package_to_install(
    importable: WriteFile,
) -> None:
    """It used to be told to "install the package that provides 'shop_refs.gone'"."""
    path = importable("shop_refs/tools.py", "import shop_refs.gone\n")
    assert unresolved("shop_refs.tools:Tool") == (
        f"'shop_refs.tools:Tool': module 'shop_refs.tools' raised while importing, at {path}:1: "
        "ModuleNotFoundError: No module named 'shop_refs.gone'; package 'shop_refs' has no "
        "submodule 'gone'; correct the import there"
    )


@pytest.fixture
def namespace(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WriteFile]:
    """``write_file``, with ``ours`` and ``theirs`` on the path: two distributions' portions of
    the namespace package ``shop_ns`` (no ``__init__.py``), forgotten after the test."""
    monkeypatch.syspath_prepend(str(isolated / "theirs"))
    monkeypatch.syspath_prepend(str(isolated / "ours"))
    yield write_file
    for name in [name for name in sys.modules if name.split(".")[0] == "shop_ns"]:
        del sys.modules[name]


def test_a_namespace_package_is_not_the_modules_own_code(namespace: WriteFile) -> None:
    """Every file under the top-level package counted as the module's own: the line shown was
    another distribution's, in the same namespace package."""
    path = namespace("ours/shop_ns/shop.py", "from shop_ns import lib\n\nDATA = lib.load()\n")
    namespace("theirs/shop_ns/lib.py", "import json\n\ndef load():\n    return json.loads('{')\n")
    message = unresolved("shop_ns.shop:Tool")
    assert message.startswith(
        f"'shop_ns.shop:Tool': module 'shop_ns.shop' raised while importing, at {path}:3: "
        "JSONDecodeError: "
    )


def test_a_missing_module_of_a_namespace_package_may_be_another_distributions(
    namespace: WriteFile,
) -> None:
    namespace("ours/shop_ns/shop.py", "import shop_ns.payments\n")
    assert unresolved("shop_ns.shop:Tool").endswith(
        "ModuleNotFoundError: No module named 'shop_ns.payments'; package 'shop_ns' has no "
        "submodule 'payments' here; correct the import there, or install the distribution "
        "that provides 'shop_ns.payments'"
    )
