"""The embedded model's launcher (``toolwire.llm.embedded_server``): its options and what it
sets on llama.cpp's parameters for them."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

import pytest

from toolwire.llm import embedded_server


class FlashAttention(Enum):  # llama_flash_attn_type
    AUTO = -1
    DISABLED = 0
    ENABLED = 1


class GgmlType(Enum):
    F16 = 1
    Q8_0 = 8


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


RUNTIME = SimpleNamespace(
    common_speculative_type=Kinds, llama_flash_attn_type=FlashAttention, ggml_type=GgmlType
)
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


@pytest.mark.parametrize(
    ("named", "flash_attention", "kv_type"),
    [
        ([], FlashAttention.AUTO, GgmlType.F16),
        (["--flash-attn", "on", "--kv-type", "q8_0"], FlashAttention.ENABLED, GgmlType.Q8_0),
        (["--kv-type", "q8_0"], FlashAttention.AUTO, GgmlType.Q8_0),
        (["--flash-attn", "off"], FlashAttention.DISABLED, GgmlType.F16),
    ],
    ids=["defaults", "on-q8_0", "q8_0", "off"],
)
def test_flash_attention_and_the_kv_type_keep_llama_cpps_defaults_unless_named(
    named: list[str], flash_attention: FlashAttention, kv_type: GgmlType
) -> None:
    passed = SimpleNamespace()
    embedded_server._attention(RUNTIME, passed, embedded_server.arguments([*REQUIRED, *named]))
    assert passed.flash_attn_type == flash_attention
    assert passed.cache_type_k == passed.cache_type_v == kv_type


def test_a_quantised_kv_cache_without_flash_attention_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        embedded_server.arguments([*REQUIRED, "--kv-type", "q8_0", "--flash-attn", "off"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --kv-type q8_0 needs flash attention (a quantised V cache), and --flash-attn off "
        "turns it off: name --flash-attn on or auto, or --kv-type f16\n"
    )
