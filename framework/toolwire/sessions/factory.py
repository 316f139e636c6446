"""The store ``sessions.store`` names."""

from __future__ import annotations

from toolwire.errors import ConfigError
from toolwire.sessions.base import SessionStore
from toolwire.sessions.memory import MemorySessionStore
from toolwire.sessions.sqlite import SQLiteSessionStore
from toolwire.settings import SessionSettings


def create_session_store(settings: SessionSettings) -> SessionStore:
    """The store the settings name: memory, SQLite (``path``) or Redis (``redis_url``)."""
    if settings.store == "memory":
        return MemorySessionStore(settings.ttl_s)
    if settings.store == "sqlite":
        return SQLiteSessionStore(settings.path, settings.ttl_s)
    try:
        from toolwire.sessions.redis import RedisSessionStore
    except ImportError as error:
        raise ConfigError(
            f"sessions.store is 'redis' but the Redis client is missing ({error}); "
            "install toolwire[redis]"
        ) from error
    return RedisSessionStore.from_settings(settings)
