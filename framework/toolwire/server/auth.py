"""Bearer-token authentication of the ``/v1`` endpoints (the health endpoints stay open)."""

from __future__ import annotations

import hmac
import os
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolwire.errors import ConfigError
from toolwire.server.problems import ApiError

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="The token in the environment variable named by server.token_env.",
)


def read_token(token_env: str) -> str | None:
    """The expected token; None (no authentication) when the variable is unset.

    A variable that is set but empty is a mistake, not a wish to turn authentication off.
    """
    value = os.environ.get(token_env)
    if value is None:
        return None
    if not value.strip():
        raise ConfigError(
            f"the environment variable {token_env} (server.token_env) is set but empty; "
            "set it to a token, or unset it to run without authentication"
        )
    return value


def check_token(expected: str | None, credentials: HTTPAuthorizationCredentials | None) -> None:
    """Raise a 401 ``ApiError`` unless the request carries the expected bearer token."""
    if expected is None:
        return
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(
            401,
            "unauthorized",
            "this endpoint needs an 'Authorization: Bearer <token>' header",
            headers=challenge,
        )
    if not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise ApiError(401, "unauthorized", "the bearer token is not valid", headers=challenge)


async def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> None:
    """FastAPI dependency guarding the API routes."""
    check_token(request.app.state.toolwire.token, credentials)
