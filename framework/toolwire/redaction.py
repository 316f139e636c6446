"""Keep secrets out of logs and out of what callers see.

Two mechanisms, both applied to every log event by :func:`redact_event` (a structlog processor
that ``toolwire.logging`` installs) and to any text by :func:`redact`:

- **Known shapes**: API keys of the common providers (``sk-…``, ``AKIA…``, ``ghp_…``,
  ``xox…-``, ``AIza…``, ``hf_…``), bearer and basic credentials, the password of a URL
  (``postgres://user:***@host``) and ``password=``/``api_key=``/``secret=``/``token=`` values.
- **Known values**: the server's own API keys (:func:`register_secret`), values scoped to the
  current request (:func:`scrubbing`): a session id is logged as its short hash
  (:func:`session_ref`), never as the id that would let a reader of the log resume it; and values
  one caller knows (``redact(text, secrets=…)``: the model transport masks its server's API key
  in its errors however the key is shaped).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MASK = "***"

_API_KEY = (
    r"\b(?:sk-[A-Za-z0-9_-]{16,}"  # OpenAI (sk-…, sk-proj-…), Anthropic (sk-ant-…)
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,})"  # Hugging Face
)
_CREDENTIAL_SCHEME = r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}"
_URL_PASSWORD = r"(?i)\b([a-z][a-z0-9+.-]{0,31}://[^\s:/?#@]*:)[^\s/?#]+(@)"  # to the last @
_KEY_VALUE = (
    r"(?i)\b(password|passwd|pwd|api[_-]?key|secret|token|access[_-]?key|auth)\b"
    r"([\"']?\s*[=:]\s*[\"']?)([^\s\"',;&}]+)"  # JSON's quotes, and Python's in a repr
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(_URL_PASSWORD), rf"\1{MASK}\2"),
    (re.compile(_CREDENTIAL_SCHEME), rf"\1\2{MASK}"),
    (re.compile(_KEY_VALUE), rf"\1\2{MASK}"),
    (re.compile(_API_KEY), MASK),
)

_TRIGGERS = re.compile(
    "|".join(
        re.escape(trigger)
        for trigger in (
            "://", "bearer", "basic", "pass", "pwd", "api", "secret", "token", "access", "auth",
            "sk-", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "xox", "aiza",
            "hf_",
        )
    )
)  # fmt: skip
"""Every secret shape contains one of these (in lower case): text without any skips the
patterns, which is most text (one search of literals is far cheaper than the patterns)."""

_known_secrets: set[str] = set()
_scrubbed: ContextVar[Mapping[str, str] | None] = ContextVar("toolwire_scrubbed", default=None)


def register_secret(value: str) -> None:
    """Mask this exact value wherever it appears (the server's API keys, read at start)."""
    if value:
        _known_secrets.add(value)


@contextmanager
def scrubbing(replacements: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and tasks it starts), replace each key by its value in every event."""
    outer = _scrubbed.get() or {}
    token = _scrubbed.set({**outer, **{raw: shown for raw, shown in replacements.items() if raw}})
    try:
        yield
    finally:
        _scrubbed.reset(token)


def session_ref(session_id: str) -> str:
    """How logs name a session: a short hash that correlates events but cannot resume it."""
    # surrogatepass: an id from a command line that was not UTF-8 is hashed, not a crash
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def redact(text: str, *, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret value (``secrets`` too) and secret shape masked."""
    for raw, shown in (_scrubbed.get() or {}).items():
        text = text.replace(raw, shown)
    for secret in (*_known_secrets, *secrets):
        if secret:
            text = text.replace(secret, MASK)
    if _TRIGGERS.search(text.lower()) is None:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redacted(value: Any) -> Any:
    """A log value with the strings inside it redacted (lists, tuples, dicts walked)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return type(value)(redacted(item) for item in value)
    if isinstance(value, dict):
        return {key: redacted(item) for key, item in value.items()}
    return value


def redact_event(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: redact every value of the event (run after ``format_exc_info``)."""
    for key, value in event_dict.items():
        event_dict[key] = redacted(value)
    return event_dict
