"""The embedded model's launcher (``toolwire.llm.embedded_server``): its options and what it
sets on llama.cpp's parameters for them."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

from toolwire.llm import embedded_server


class Kinds(Enum):
    COMMON_SPECULATIVE_TYPE_NONE = 0
    COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE = 1
    COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE = 6


def params() -> SimpleNamespace:
    cpu = SimpleNamespace(n_threads=0)
    draft = SimpleNamespace(
        mparams=SimpleNamespace(path=""), cpuparams=cpu, cpuparams_batch=SimpleNamespace()
    )
    return SimpleNamespace(speculative=SimpleNamespace(types=[Kinds(0)], draft=draft))


RUNTIME = SimpleNamespace(common_speculative_type=Kinds)
REQUIRED = ["--model", "m.gguf", "--alias", "m", "--port", "1"]


def test_ngram_lookup_is_on_by_default_and_can_be_turned_off() -> None:
    shipped = params()
    embedded_server._speculation(RUNTIME, shipped, embedded_server.arguments(REQUIRED), 2)
    assert shipped.speculative.types == [Kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]

    off = params()
    args = embedded_server.arguments([*REQUIRED, "--no-lookup"])
    embedded_server._speculation(RUNTIME, off, args, 2)
    assert off.speculative.types == [Kinds.COMMON_SPECULATIVE_TYPE_NONE]


def test_a_draft_model_takes_the_place_of_the_lookup_with_the_servers_threads() -> None:
    drafted = params()
    args = embedded_server.arguments([*REQUIRED, "--draft", "small.gguf"])
    embedded_server._speculation(RUNTIME, drafted, args, 2)
    assert drafted.speculative.types == [Kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    assert drafted.speculative.draft.mparams.path == "small.gguf"
    assert drafted.speculative.draft.cpuparams.n_threads == 2


def test_flash_attention_and_the_kv_type_keep_llama_cpps_defaults_unless_named() -> None:
    args = embedded_server.arguments(REQUIRED)
    assert (args.flash_attn, args.kv_type) == ("auto", "f16")
    assert embedded_server.FLASH_ATTENTION[args.flash_attn] == -1
