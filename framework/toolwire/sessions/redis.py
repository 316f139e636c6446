"""The Redis session store (``toolwire[redis]``): one store shared by every replica.

Each conversation is a hash ``<prefix><session id>`` with the fields ``domain``, ``task`` (the
conversation as JSON, :func:`~toolwire.sessions.base.session_payload`; the field keeps its earlier
name), ``version`` and, when an API key started it, ``owner`` (the key's name). Creating
and saving run as Lua scripts, so the version check and the
write are one atomic step on the Redis server: of two replicas saving the same round, exactly one
succeeds and the other gets ``SessionConflictError`` while the stored task stays as the winner left
it. Every write renews the key's time to live (``SessionSettings.ttl_s``), so a conversation is
forgotten ``ttl_s`` seconds after its last turn.
"""

from __future__ import annotations

from typing import Any

import structlog

from toolwire.extras import missing_extra_error

try:
    import redis.asyncio as redis_asyncio
    from redis.exceptions import RedisError, ResponseError
except ImportError as error:  # imported directly without the extra: one line naming it
    raise missing_extra_error("toolwire.sessions.redis", "redis", error) from None

from toolwire.conversation import Conversation
from toolwire.errors import (
    SessionConflictError,
    SessionError,
    SessionStoreUnavailableError,
    UnreadableSessionError,
)
from toolwire.redaction import redact, session_ref
from toolwire.sessions.base import (
    StoredSession,
    new_session_id,
    session_payload,
    stored_session,
    unknown_session,
)
from toolwire.settings import SessionSettings

log = structlog.get_logger(__name__)

DEFAULT_KEY_PREFIX = "toolwire:session:"

# KEYS[1] session key; ARGV: domain, task JSON, ttl seconds, owner ("" for none). Returns 1 when
# created, 0 when the key already exists (a session id collision, retried with a fresh id).
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'domain', ARGV[1], 'task', ARGV[2], 'version', 1)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'owner', ARGV[4])
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""

# KEYS[1] session key; ARGV: expected version, task JSON, ttl seconds.
# Returns {0, new version} when saved, {1, stored version} on a conflict, {2, 0} when missing,
# {3, 0} when the stored version is not a number (damaged).
_SAVE = """
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored then
  return {2, 0}
end
stored = tonumber(stored)
if not stored then
  return {3, 0}
end
if stored ~= tonumber(ARGV[1]) then
  return {1, stored}
end
redis.call('HSET', KEYS[1], 'task', ARGV[2], 'version', stored + 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {0, stored + 1}
"""

_SAVED, _CONFLICT, _MISSING, _DAMAGED = 0, 1, 2, 3
_MAX_ID_ATTEMPTS = 5

TIMEOUT_S = 5.0
"""How long a connection to Redis, or one reply, may take before the store counts as
unavailable (a URL's own ``socket_timeout`` / ``socket_connect_timeout`` win)."""


class RedisSessionStore:
    """A ``SessionStore`` on Redis, safe to share between processes and hosts."""

    description = "the Redis session store"
    """How an unknown session's error names this store (not its URL: callers read that error)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        ttl_s: int = 86_400,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        client: redis_asyncio.Redis | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        self._client: redis_asyncio.Redis = client or redis_asyncio.Redis.from_url(
            url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s
        )
        self.ttl_s = ttl_s
        self._prefix = key_prefix
        self._url = url
        self._create = self._client.register_script(_CREATE)
        self._save = self._client.register_script(_SAVE)

    @classmethod
    def from_settings(cls, settings: SessionSettings) -> RedisSessionStore:
        """The store the ``sessions`` section of the configuration describes."""
        return cls(settings.redis_url, ttl_s=settings.ttl_s)

    def _key(self, session_id: str) -> str:
        return f"{self._prefix}{session_id}"

    async def create(
        self, domain: str, conversation: Conversation, owner: str | None = None
    ) -> StoredSession:
        payload = session_payload(conversation)
        for _ in range(_MAX_ID_ATTEMPTS):
            session_id = new_session_id()
            created = await self._call(
                self._create,
                session_id,
                [domain, payload, self.ttl_s, owner or ""],
            )
            if created == 1:
                log.debug("session_created", session=session_ref(session_id), store="redis")
                return StoredSession(
                    session_id=session_id,
                    domain=domain,
                    conversation=conversation,
                    version=1,
                    owner=owner,
                )
        raise SessionError(
            f"could not find an unused session id in {_MAX_ID_ATTEMPTS} attempts; "
            f"check that nothing else writes keys under the prefix {self._prefix!r}"
        )

    async def load(self, session_id: str) -> StoredSession:
        try:
            raw = await self._client.hgetall(self._key(session_id))
        except RedisError as error:
            raise self._failed(error, session_id) from error
        if not raw:
            raise unknown_session(self, session_id)
        fields = {_text(name): _text(value) for name, value in raw.items()}
        return stored_session(
            session_id,
            fields.get("domain"),
            fields.get("task"),
            fields.get("version"),
            fields.get("owner"),
        )

    async def save(self, session: StoredSession) -> StoredSession:
        status, version = await self._call(
            self._save,
            session.session_id,
            [session.version, session_payload(session.conversation), self.ttl_s],
        )
        if status == _MISSING:
            raise unknown_session(self, session.session_id)
        if status == _DAMAGED:
            raise SessionError(
                f"the stored conversation {session.session_id!r} cannot be saved: its stored "
                "version is not a number (damaged); start a new conversation"
            )
        if status == _CONFLICT:
            log.info(
                "session_conflict",
                session=session_ref(session.session_id),
                expected_version=session.version,
                actual_version=version,
                store="redis",
            )
            raise SessionConflictError(session.session_id, session.version, int(version))
        return session.model_copy(update={"version": int(version)})

    async def delete(self, session_id: str) -> None:
        try:
            await self._client.delete(self._key(session_id))
        except RedisError as error:
            raise self._failed(error, session_id) from error

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, script: Any, session_id: str, args: list[Any]) -> Any:
        try:
            return await script(keys=[self._key(session_id)], args=args)
        except RedisError as error:
            raise self._failed(error, session_id) from error

    def _failed(self, error: RedisError, session_id: str) -> SessionError:
        """A Redis error as toolwire's: a key that holds another type than a hash is that
        conversation damaged (it alone is lost; it has no owner, so only a caller without one
        learns of it); anything else, the store unavailable."""
        if isinstance(error, ResponseError) and str(error).startswith("WRONGTYPE"):
            return UnreadableSessionError(
                f"the stored conversation {session_id!r} cannot be read: its key "
                f"{self._key(session_id)!r} holds another kind of Redis value than a toolwire "
                "conversation (written by something else); start a new conversation"
            )
        return SessionStoreUnavailableError(
            f"the Redis session store at {redact(self._url)} failed: {error}; "
            "check that Redis is running and sessions.redis_url is right"
        )


def _text(value: bytes | str) -> str | bytes:
    """A field name or value as text, whether or not the client decodes responses; bytes that
    are not UTF-8 stay bytes, which :func:`stored_session` reports as the damage they are."""
    if isinstance(value, str):
        return value
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value
