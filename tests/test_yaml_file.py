"""Hostile and broken YAML files: each is a ``path:line:`` problem, found quickly, never a
traceback, a hang or a crash of the C parser."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _build_samples import WriteFile
from toolwire import ConfigError
from toolwire.cli import app as cli
from toolwire.config import PluginConfigFile, load_app_config, load_file
from toolwire.errors import Problem
from toolwire.yaml_file import (
    MAX_ALIAS_EXPANSION,
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
)

BILLION_LAUGHS = """\
default_domain: shop
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def only_problem(path: Path) -> Problem:
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    (problem,) = raised.value.problems
    assert problem.path == str(path)
    return problem


def test_a_billion_laughs_file_is_refused_before_it_expands(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file("laughs.yaml", BILLION_LAUGHS)
    assert path.stat().st_size < 500

    problem = only_problem(path)

    assert problem.line == 3  # the first alias
    assert f"more than the {MAX_ALIAS_EXPANSION} allowed" in problem.message


def test_too_many_aliases_are_refused_at_the_first_one_over_the_budget(
    isolated: Path, write_file: WriteFile
) -> None:
    lines = ["base: &base 1"] + [f"k{n}: *base" for n in range(MAX_ALIASES + 5)]
    path = write_file("aliases.yaml", "\n".join(lines) + "\n")

    problem = only_problem(path)

    assert problem.line == MAX_ALIASES + 2
    assert f"more than {MAX_ALIASES} aliases" in problem.message


@pytest.mark.parametrize(
    "text",
    ["default_domain: shop\nllm: &self {model: tiny, again: *self}\n",
     "default_domain: shop\nllm: &self\n  - 1\n  - *self\n"],
    ids=["mapping", "list"],
)  # fmt: skip
def test_an_alias_inside_its_own_anchor_is_refused_at_the_anchor(
    isolated: Path, write_file: WriteFile, text: str
) -> None:
    """A recursive value: before, a RecursionError and a traceback."""
    problem = only_problem(write_file("recursive.yaml", text))

    assert problem.line == 2
    assert problem.message == (
        "the anchor (&name) on this line is used inside its own value (*name); a configuration "
        "cannot be recursive: write the values out"
    )


def test_a_few_aliases_and_merge_keys_still_work(isolated: Path, write_file: WriteFile) -> None:
    path = write_file(
        "anchors.yaml",
        "domains: [{name: shop}]\n"
        "tools:\n"
        "  - {name: a, class: '_build_samples:LookupTool', domain: shop, settings: &s {limit: 2}}\n"
        "  - {name: b, class: '_build_samples:LookupTool', domain: shop, settings: *s}\n"
        "  - {name: c, class: '_build_samples:LookupTool', domain: shop, settings: {<<: *s}}\n",
    )

    config = load_file(path, PluginConfigFile)

    assert [tool.settings for tool in config.tools] == [{"limit": 2}] * 3


@pytest.mark.parametrize("nesting", ["flow", "block"])
def test_deep_nesting_is_refused_before_the_parser_builds_it(
    isolated: Path, write_file: WriteFile, nesting: str
) -> None:
    if nesting == "flow":
        text = "default_domain: x\ndeep: " + "[" * 100_000 + "\n"
        line = 2
    else:
        depth = MAX_DEPTH + 5
        text = "".join(f"{' ' * level}k{level}:\n" for level in range(depth)) + " " * depth + "x\n"
        line = MAX_DEPTH + 1  # the collection that opens level MAX_DEPTH + 1
    path = write_file("deep.yaml", text)

    problem = only_problem(path)

    assert problem.line == line
    assert f"nesting deeper than {MAX_DEPTH} levels" in problem.message


@pytest.mark.parametrize("layout", ["flow", "block"])
def test_a_file_of_many_tiny_values_is_refused_quickly_before_composing(
    isolated: Path, write_file: WriteFile, layout: str
) -> None:
    """Under the size limit, 400,000 items took 6 s to compose and construct before the check."""
    if layout == "flow":
        text = "default_domain: x\nitems: [" + "1," * 400_000 + "1]\n"
        line = 2
    else:
        text = "default_domain: x\nitems:\n" + "- 1\n" * 250_000
        line = MAX_NODES - 2  # the file's mapping, default_domain, x, items and the list first
    path = write_file("many.yaml", text)
    assert path.stat().st_size <= MAX_FILE_BYTES

    started = time.perf_counter()
    problem = only_problem(path)

    assert time.perf_counter() - started < 1
    assert problem.line == line
    assert f"more than {MAX_NODES} values" in problem.message


def test_a_byte_that_is_not_utf8_is_located(isolated: Path) -> None:
    path = isolated / "latin1.yaml"
    path.write_bytes("default_domain: shop\nllm:\n  model: caf\xe9\n".encode("latin-1"))

    problem = only_problem(path)

    assert (
        str(problem) == f"{path}:3: the file is not UTF-8: byte 0xe9 at column 13; save it as UTF-8"
    )


def test_a_control_character_is_located(isolated: Path) -> None:
    path = isolated / "control.yaml"
    path.write_bytes(b"default_domain: shop\nllm:\n  model: a\x01b\n")

    problem = only_problem(path)

    assert problem.line == 3 and "character U+0001 is not allowed" in problem.message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1" * 5000, "cannot be read as int (Exceeds the limit (4300 digits)"),
        ("2020-13-45", "'2020-13-45' cannot be read as timestamp (month must be in 1..12)"),
        ("0000-01-01", "cannot be read as timestamp (year 0 is out of range)"),
        ("!!bool maybe", "'maybe' cannot be read as bool"),
    ],
    ids=["5000-digits", "month-13", "year-0", "bool-tag"],
)
def test_a_scalar_its_tag_cannot_convert_is_located(
    isolated: Path, write_file: WriteFile, value: str, says: str
) -> None:
    """The safe constructor raised a bare ValueError or KeyError: a traceback from check."""
    path = write_file("app.yaml", f"default_domain: shop\nllm:\n  max_retries: {value}\n")

    problem = only_problem(path)

    assert problem.line == 3
    assert says in problem.message and problem.message.endswith("quote it if it is text")
    assert "set_int_max_str_digits" not in problem.message


def test_a_symlink_to_dev_zero_is_not_read(isolated: Path) -> None:
    link = isolated / "zero.yaml"
    link.symlink_to("/dev/zero")

    problem = only_problem(link)

    assert problem.message.startswith("cannot read configuration: not a regular file (a character")


def test_a_fifo_is_refused_without_waiting_for_a_writer(isolated: Path) -> None:
    fifo = isolated / "pipe.yaml"
    os.mkfifo(fifo)

    assert "not a regular file (a FIFO)" in only_problem(fifo).message


def test_a_directory_is_refused(isolated: Path) -> None:
    (isolated / "conf.yaml").mkdir()
    assert "not a regular file (a directory)" in only_problem(isolated / "conf.yaml").message


def test_an_oversized_file_is_refused_unread(isolated: Path) -> None:
    path = isolated / "huge.yaml"
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing to read, the size alone refuses it

    problem = only_problem(path)

    assert problem.message.startswith(f"the file is {MAX_FILE_BYTES + 1} bytes")


def test_check_reports_a_hostile_file_as_one_located_line(isolated: Path) -> None:
    link = isolated / "zero.yaml"
    link.symlink_to("/dev/zero")

    result = CliRunner().invoke(cli, ["check", "--config", str(link)])

    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert f"{link}: cannot read configuration: not a regular file" in result.output
