"""Bearer-token authentication of the ``/v1`` endpoints (the health endpoints stay open).

The server knows a list of named API keys: ``server.token_env`` holds the key named
``default``, and ``server.api_keys`` names more, each with its own variable. A request's token is
compared with every key in constant time; the matching key's name is the request's *caller*,
bound into its log events and to the conversations it starts. No key configured: no
authentication, and every caller is anonymous (``None``).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolwire.errors import ConfigError, Problem
from toolwire.redaction import register_secret
from toolwire.server.problems import ApiError
from toolwire.settings import ServerSettings

DEFAULT_KEY_NAME = "default"
"""The name of the key read from ``server.token_env``."""

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="One of the server's API keys (server.token_env, server.api_keys).",
)


@dataclass(frozen=True)
class ApiKey:
    name: str
    token: str

    def __repr__(self) -> str:  # never show the token, not even in a traceback
        return f"ApiKey(name={self.name!r})"


def read_api_keys(
    settings: ServerSettings, environ: Mapping[str, str] | None = None
) -> list[ApiKey]:
    """The server's keys from the environment; one ``ConfigError`` listing every problem.

    ``server.token_env`` unset means no ``default`` key; a variable of ``server.api_keys`` that
    is unset, or any variable that is set but empty (or only white space), is a mistake. Two
    keys with one name or one token are refused: a token must say who is calling. White space
    around a token is not part of it (a secret made from a file, such as a Kubernetes secret
    from ``kubectl create secret --from-file``, keeps the file's trailing newline in the
    variable, and no client can send a token ending in one): it is stripped.
    """
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    keys: list[ApiKey] = []
    wanted = [(DEFAULT_KEY_NAME, settings.token_env, False)]
    wanted += [(key.name, key.token_env, True) for key in settings.api_keys]
    for name, variable, required in wanted:
        value = environ.get(variable)
        if value is None:
            if required:
                problems.append(
                    f"API key {name!r}: the environment variable {variable} is not set; set it "
                    "to the key's token, or remove the key from server.api_keys"
                )
            continue
        token = value.strip()
        if not token:
            problems.append(
                f"API key {name!r}: the environment variable {variable} is set but empty; set "
                "it to the key's token, or unset it"
            )
            continue
        keys.append(ApiKey(name, token))
    problems += _duplicates(keys)
    if problems:
        raise ConfigError([Problem(problem) for problem in problems])
    for key in keys:
        register_secret(key.token)  # masked wherever a log event might show it
    return keys


def _duplicates(keys: Sequence[ApiKey]) -> list[str]:
    problems = []
    names = [key.name for key in keys]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"two API keys are named {name!r}; give each key its own name")
    seen: dict[str, str] = {}
    for key in keys:
        if key.token in seen:
            problems.append(
                f"API keys {seen[key.token]!r} and {key.name!r} have the same token; give each "
                "key its own token, so that a token says who is calling"
            )
        seen.setdefault(key.token, key.name)
    return problems


def authenticate(
    keys: Sequence[ApiKey], credentials: HTTPAuthorizationCredentials | None
) -> str | None:
    """The caller's key name; None without authentication; a 401 ``ApiError`` otherwise.

    Every key is compared (no early exit), so the time taken does not tell which key or how
    much of one matched.
    """
    if not keys:
        return None
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(
            401,
            "unauthorized",
            "this endpoint needs an 'Authorization: Bearer <token>' header",
            headers=challenge,
        )
    presented = credentials.credentials.encode()
    caller: str | None = None
    for key in keys:
        if hmac.compare_digest(presented, key.token.encode()) and caller is None:
            caller = key.name
    if caller is None:
        raise ApiError(401, "unauthorized", "the bearer token is not valid", headers=challenge)
    return caller


async def authenticated_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> str | None:
    """FastAPI dependency guarding the API routes; the caller's key name (None: no keys)."""
    return authenticate(request.app.state.toolwire.api_keys, credentials)
