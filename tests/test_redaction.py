"""Secrets never reach a log line: known shapes, registered values, scrubbed session ids."""

from __future__ import annotations

import io
import json
import time

import pytest
import structlog

from toolwire.logging import configure_logging
from toolwire.redaction import redact, register_secret, scrubbing, session_ref


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "could not connect: postgresql://app:hunter2@db.internal:5432/orders",
            "postgresql://app:***@db.internal:5432/orders",
        ),
        ("redis://:pw-only@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://:pw-only@with@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),  # @ in it
        ("upstream said: Authorization: Bearer abcdefgh12345678", "Bearer ***"),
        ("Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUv", "provided: ***"),
        ("key AKIAABCDEFGHIJKLMNOP rejected", "key *** rejected"),
        ("dsn: host=db password=hunter2 user=app", "password=*** user=app"),
        ('{"api_key": "abc123xyz", "model": "m"}', '{"api_key": "***", "model": "m"}'),
    ],
)
def test_secret_shapes_are_masked(text: str, shown: str) -> None:
    redacted = redact(text)

    assert shown in redacted
    secrets = ("hunter2", "pw-only", "with@", "abcdefgh12345678", "AbCdEfGh", "AKIAAB", "abc123xyz")
    for secret in secrets:
        assert secret not in redacted


@pytest.mark.parametrize("unit", ["a.", "a-", "a+"], ids=["dots", "dashes", "pluses"])
def test_hostile_text_is_redacted_in_linear_time(unit: str) -> None:
    """Every log event and every error text a caller sees is redacted on the event loop: a URL
    scheme of unbounded length made 64 KB of ``a.a.a…://`` (a tool's error quoting a page, an
    MCP server's error text) take 11 s, and 256 KB three minutes, while the server answered
    nobody. Now a scheme is at most 32 characters and the time grows with the length."""
    text = unit * 128_000 + "://host"
    began = time.perf_counter()
    redacted = redact(text)
    assert time.perf_counter() - began < 2.0
    assert redacted == text
    long_scheme = "postgresql+asyncpg://app:hunter2@db.internal/orders"
    assert redact(long_scheme) == "postgresql+asyncpg://app:***@db.internal/orders"


def test_ordinary_text_is_left_alone() -> None:
    text = "3 prompt_tokens, max_tokens=256; the token is not valid; tool pharma.lookup failed"
    assert redact(text) == text


def test_registered_values_and_scrubbed_values_are_masked() -> None:
    register_secret("tenant-a-key-0123")
    with scrubbing({"Sess10nId": "<session 1a2b>"}):
        inside = redact("key tenant-a-key-0123 resumed Sess10nId")
    outside = redact("Sess10nId")

    assert inside == "key *** resumed <session 1a2b>"
    assert outside == "Sess10nId"  # scrubbing is scoped to the request that set it


def test_values_a_caller_knows_are_masked_whatever_their_shape() -> None:
    text = "Incorrect API key provided: plain-key. password=hunter2"

    assert redact(text, secrets=["plain-key"]) == "Incorrect API key provided: ***. password=***"
    assert redact(text, secrets=[""]) == "Incorrect API key provided: plain-key. password=***"


def test_session_refs_are_short_stable_and_do_not_reveal_the_id() -> None:
    ref = session_ref("4mGD4mdNsecretSessionId")
    assert ref == session_ref("4mGD4mdNsecretSessionId") != session_ref("another")
    assert len(ref) == 12 and "4mGD" not in ref


def test_every_logged_value_is_redacted_before_it_is_rendered() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream, force=True, default_level="info")
    try:
        log = structlog.get_logger("test")
        log.warning(
            "tool_failed",
            problem="OperationalError: postgresql://app:hunter2@db/x",
            nested={"calls": ["Bearer abcdefgh12345678"]},
        )
        try:
            raise RuntimeError("password=hunter2")
        except RuntimeError:
            log.exception("request_crashed")
    finally:
        structlog.reset_defaults()

    text = stream.getvalue()
    assert "hunter2" not in text and "abcdefgh12345678" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["problem"] == "OperationalError: postgresql://app:***@db/x"
    assert first["nested"] == {"calls": ["Bearer ***"]}
    assert "password=***" in second["exception"]
