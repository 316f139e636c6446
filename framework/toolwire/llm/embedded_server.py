"""The embedded model's server process: ``python -m toolwire.llm.embedded_server --model …``.

A small launcher around xllamacpp (a prebuilt wheel of llama.cpp's own C++ server). It runs in a
child process of toolwire (:class:`toolwire.llm.local.LocalModelServer`) so that a crash in native
code never takes the application down, and so that the parent can stop it with a signal. Every
setting that llama.cpp would otherwise default is set here explicitly: the served model name,
context size, threads, sampling defaults (the request's temperature wins; no repetition penalty),
one slot, a bounded prompt cache in RAM, and speculative decoding from n-grams of the prompt.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

SEED = 42
"""Fixed sampling seed: the same request gives the same answer (temperature 0 is greedy anyway)."""


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m toolwire.llm.embedded_server")
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name the server answers to")
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: every core)")
    parser.add_argument("--cache-mib", type=int, default=512, help="prompt cache in RAM (MiB)")
    parser.add_argument(
        "--flash-attn", choices=sorted(FLASH_ATTENTION), default="auto", help="flash attention"
    )
    parser.add_argument(
        "--kv-type", choices=sorted(KV_TYPES), default="f16", help="KV cache element type"
    )
    parser.add_argument(
        "--draft", default=None, help="GGUF of a draft model: speculative decoding with it"
    )
    parser.add_argument(
        "--lookup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="speculative decoding from n-grams of the prompt, no draft model (on: the same "
        "answers, a few per cent faster where an answer quotes its context; bench/embedded/LOG.md)",
    )
    args = parser.parse_args(argv)
    if args.kv_type != "f16" and args.flash_attn == "off":
        # llama.cpp refuses it too, but only after loading the model, as it creates the context.
        parser.error(
            f"--kv-type {args.kv_type} needs flash attention (a quantised V cache), and "
            "--flash-attn off turns it off: name --flash-attn on or auto, or --kv-type f16"
        )
    return args


FLASH_ATTENTION = {"auto": -1, "off": 0, "on": 1}
"""llama.cpp's flash attention setting by name (``llama_flash_attn_type``)."""
KV_TYPES = {"f16": 1, "q8_0": 8}
"""KV cache element types by name (``ggml_type``); a quantised V cache needs flash attention."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    import xllamacpp  # the `local` extra; the parent checked it is installed

    threads = args.threads or usable_cores()
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: every call of a question reuses its KV cache
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.cache_prompt = True
    params.cache_ram_mib = args.cache_mib
    # Look in the prompt cache before every request. With a similarity threshold the server keeps
    # the slot's tokens without looking whenever the request shares half of them (two tools'
    # parameter extractions share the rules and the instruction), and a longer match saved from
    # an earlier question (the same tool's extraction, everything up to the task) stays unused.
    params.slot_prompt_similarity = 0.0
    _attention(xllamacpp, params, args)
    _speculation(xllamacpp, params, args, threads)
    params.verbosity = 1  # errors and warnings only: the parent keeps the tail for start failures
    sampling = params.sampling
    sampling.temp = 0.0
    sampling.top_k = 40
    sampling.top_p = 1.0
    sampling.min_p = 0.0
    sampling.penalty_repeat = 1.0
    sampling.seed = SEED

    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # before the server's threads start
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        print(f"toolwire: the model server did not start: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"toolwire: serving {args.alias} on {server.listening_address}", file=sys.stderr)
    sys.stderr.flush()
    signal.sigwait(stop_signals)
    # llama.cpp's threads are not joined: the process ends here, the OS frees the model.
    os._exit(0)


def _attention(xllamacpp: Any, params: Any, args: argparse.Namespace) -> None:
    """Flash attention and the KV cache's element type (K and V alike), as named."""
    params.flash_attn_type = xllamacpp.llama_flash_attn_type(FLASH_ATTENTION[args.flash_attn])
    params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type(KV_TYPES[args.kv_type])


def _speculation(xllamacpp: Any, params: Any, args: argparse.Namespace, threads: int) -> None:
    """Speculative decoding: a draft model proposes tokens the served model checks in one
    batch, or (``--lookup``) n-grams of the prompt do, which pays where an answer copies its
    context."""
    kinds = xllamacpp.common_speculative_type
    speculative = params.speculative
    if args.draft:
        speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        draft = speculative.draft
        draft.mparams.path = args.draft
        draft.cpuparams.n_threads = draft.cpuparams_batch.n_threads = threads
    elif args.lookup:
        speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]


if __name__ == "__main__":
    sys.exit(main())
