"""The store ``sessions.store`` names, and toolwire's own three, registered like a plugin's.

Stores are registered through the ``register_session_stores`` hook; ``memory``, ``sqlite`` and
``redis`` register through the same hook from here (a built-in plugin, loaded before every other).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolwire.errors import ConfigError
from toolwire.extras import missing_modules, needs_extra
from toolwire.hookspecs import hookimpl
from toolwire.sessions.base import SessionStore
from toolwire.sessions.memory import MemorySessionStore
from toolwire.sessions.sqlite import SQLiteSessionStore
from toolwire.settings import SessionSettings

if TYPE_CHECKING:
    from toolwire.hookspecs import RegisterSessionStore
    from toolwire.plugins import SessionStoreProvider


def memory_store(settings: SessionSettings) -> SessionStore:
    """In this process's memory (tests, one-shot scripts)."""
    return MemorySessionStore(settings.ttl_s)


def sqlite_store(settings: SessionSettings) -> SessionStore:
    """A SQLite file (``sessions.path``): the embedded default."""
    return SQLiteSessionStore(settings.path, settings.ttl_s)


def redis_store(settings: SessionSettings) -> SessionStore:
    """Redis at ``sessions.redis_url``, shared by replicas (``toolwire[redis]``)."""
    missing = missing_modules("redis")
    if missing:
        raise ConfigError(needs_extra(REDIS_STORE_NEEDS, "redis", missing))
    from toolwire.sessions.redis import RedisSessionStore

    return RedisSessionStore.from_settings(settings)


REDIS_STORE_NEEDS = "sessions.store 'redis'"
"""What needs the redis extra, as its message names it."""


def redis_missing(store: SessionStoreProvider) -> str | None:
    """When ``store`` is the built-in Redis store and its extra is not installed, the one line
    saying so (``App.load`` checks it, so ``toolwire check`` reports it); else None."""
    missing = missing_modules("redis") if store.value is redis_store else []
    return needs_extra(REDIS_STORE_NEEDS, "redis", missing) if missing else None


@hookimpl
def register_session_stores(register: RegisterSessionStore) -> None:
    """The three built-in stores."""
    register("memory", memory_store)
    register("sqlite", sqlite_store)
    register("redis", redis_store)


def create_session_store(
    settings: SessionSettings, stores: Mapping[str, SessionStoreProvider] | None = None
) -> SessionStore:
    """The store ``settings.store`` names. ``stores``: the registered ones
    (``App.session_stores``); by default the built-in ones, found through the same hook."""
    from toolwire.plugins import built_by, discover

    if stores is None:
        stores = discover(load_entry_points=False).session_stores
    if settings.store not in stores:
        raise ConfigError(unknown_store(settings.store, stores))
    return built_by(stores[settings.store], "session store", SessionStore, settings)


def unknown_store(name: str, stores: Mapping[str, SessionStoreProvider]) -> str:
    """The message for a ``sessions.store`` no plugin registered."""
    known = ", ".join(sorted(stores)) or "none"
    return (
        f"sessions.store: unknown session store {name!r}; registered: {known} (a plugin adds one "
        "with the register_session_stores hook, docs/plugins.md)"
    )
