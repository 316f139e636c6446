"""The embedded model: assembling the GGUF, starting the server, and a few end-to-end answers.

Tests marked ``local_model`` start llama.cpp with the real 0.5B model (a few seconds each); CI
runs them. They keep to unambiguous questions a small model gets right.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from toolwire.errors import ConfigError, ModelError
from toolwire.llm import OpenAIGateway, Purpose, SuitabilityQuestion, create_language_model
from toolwire.llm import local as local_module
from toolwire.llm.local import LocalModelServer, assemble_model
from toolwire.settings import LLMSettings


def test_assembly_refuses_parts_that_do_not_hash_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    for index, part in enumerate(parts):
        part.write_bytes(bytes([index]) * 1000)
    monkeypatch.setattr(local_module, "_part_paths", lambda: parts)
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match="sha256") as raised:
        assemble_model(cache)
    assert "force-reinstall" in str(raised.value)
    assert list(cache.iterdir()) == []  # nothing half-written is left behind


def test_a_missing_part_package_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_module, "PART_PACKAGES", ("toolwire_no_such_part_package",))
    with pytest.raises(ConfigError, match=r"toolwire\[local\]"):
        assemble_model(tmp_path)


def test_the_cache_directory_follows_toolwire_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path))
    assert local_module.model_cache_dir() == tmp_path / "models"


@pytest.mark.local_model
async def test_a_server_that_cannot_start_reports_its_output(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    server = LocalModelServer(bogus, startup_timeout_s=60)
    with pytest.raises(ModelError, match="exited with code") as raised:
        await server.ensure_started()
    assert "last output" in str(raised.value)
    assert server.base_url is None


class DrugPair(BaseModel):
    """The two drugs the user asks about."""

    drug_a: str
    drug_b: str


@pytest.fixture
async def embedded() -> AsyncIterator[OpenAIGateway]:
    model = create_language_model(LLMSettings(), environ={})
    assert isinstance(model, OpenAIGateway)
    yield model
    await model.aclose()


@pytest.mark.local_model
async def test_embedded_model_extracts_a_drug_pair(embedded: OpenAIGateway) -> None:
    pair = await embedded.extract(
        DrugPair, "Can I take ibuprofen together with warfarin?", purpose=Purpose.PARAMETERS
    )
    assert pair is not None
    assert {pair.drug_a.lower(), pair.drug_b.lower()} == {"ibuprofen", "warfarin"}


TOOLS = [
    SuitabilityQuestion(
        tool_name="weather.forecast", question="Does the task ask about the weather?"
    ),
    SuitabilityQuestion(
        tool_name="pharma.interactions",
        question="Does the task ask whether two medicines can be taken together?",
    ),
    SuitabilityQuestion(
        tool_name="finance.exchange",
        question="Does the task ask to convert money between currencies?",
    ),
]


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("message", "tool"),
    [
        ("Will it rain in Budapest tomorrow?", "weather.forecast"),
        ("Can I take ibuprofen together with warfarin?", "pharma.interactions"),
        ("How many euros is 100 US dollars?", "finance.exchange"),
    ],
)
async def test_embedded_model_picks_the_right_tool(
    embedded: OpenAIGateway, message: str, tool: str
) -> None:
    answers = await embedded.suitability(message, TOOLS)
    assert answers[tool] is True
