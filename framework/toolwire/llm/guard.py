"""The switch that forbids real model requests (``toolwire.testing.block_model_requests``).

The flag lives on the package, ``toolwire.llm.ALLOW_MODEL_REQUESTS``, and every gateway that
reaches a real model calls :func:`ensure_model_requests_allowed` before each request.
"""

from __future__ import annotations


class ModelRequestsBlockedError(BaseException):
    """A real model request was made while ``toolwire.llm.ALLOW_MODEL_REQUESTS`` is False.

    Derives from ``BaseException`` (like pytest's own outcome exceptions) so that the
    orchestrator's "a tool raised, record it and continue" handling never swallows it: a test that
    reaches a real model fails loudly instead of passing with a recorded failure.
    """

    def __init__(self, purpose: str) -> None:
        self.purpose = purpose
        super().__init__(
            f"a real model request for {purpose!r} was made while model requests are blocked "
            "(toolwire.llm.ALLOW_MODEL_REQUESTS is False); script it with "
            "toolwire.testing.ScriptedModel instead"
        )


def ensure_model_requests_allowed(purpose: str) -> None:
    """Raise :class:`ModelRequestsBlockedError` when real model requests are switched off."""
    import toolwire.llm as package

    if not package.ALLOW_MODEL_REQUESTS:
        raise ModelRequestsBlockedError(purpose)
