"""Switch real model requests off for a block of code (a test, usually)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import toolwire.llm as llm_package


@contextmanager
def block_model_requests() -> Iterator[None]:
    """Inside the block every real model request raises ``ModelRequestsBlockedError``.

    Sets ``toolwire.llm.ALLOW_MODEL_REQUESTS`` to False and restores the previous value after.
    Scripted models are unaffected.
    """
    previous = llm_package.ALLOW_MODEL_REQUESTS
    llm_package.ALLOW_MODEL_REQUESTS = False
    try:
        yield
    finally:
        llm_package.ALLOW_MODEL_REQUESTS = previous
