"""A Django cache backend in one SQLite file, shared by every process of a host: the embedded default's cache,
where the API's rate counts live (``hub.ops.throttles``) when there is no Redis.

Why not one of Django's own: the file cache writes every value by a rename over the old file, which ext4 turns
into a flush of the data (about 2 ms a write on this build machine, ``bench/throttle.py``); the database cache
would take the write lock of the SQLite database that the worker writes to, on every API request. Here the file
is the cache's alone, in WAL mode and without ``fsync`` (a lost count after a power cut is harmless), and
``incr`` is one atomic ``UPDATE`` that keeps the key's expiry, as Redis's ``INCRBY`` does.
"""

from __future__ import annotations

import os
import pickle
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

SCHEMA = "CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value BLOB, expires REAL) WITHOUT ROWID"
PURGE_ONE_IN = 200  # a write removes the expired rows once in this many


def _dump(value: Any) -> Any:
    return value if type(value) is int else pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def _load(stored: Any) -> Any:
    return stored if isinstance(stored, int) else pickle.loads(stored)  # noqa: S301 - this host's own file


class SQLiteCache(BaseCache):
    """``LOCATION``: the SQLite file (its folder is made)."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.path = Path(location)
        self.local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self.local, "db", None)
        if db is None or self.local.pid != os.getpid():  # never a connection made before a fork
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=5, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(SCHEMA)
            self.local.db, self.local.pid = db, os.getpid()
        return db

    def _expiry(self, timeout: Any) -> float:
        expires = self.get_backend_timeout(timeout)
        return float("inf") if expires is None else expires

    def get(self, key, default=None, version=None):
        key = self.make_and_validate_key(key, version=version)
        row = self._db().execute("SELECT value FROM cache WHERE key = ? AND expires > ?", (key, time.time())).fetchone()
        return default if row is None else _load(row[0])

    def get_many(self, keys, version=None):
        made = {self.make_and_validate_key(key, version=version): key for key in keys}
        if not made:
            return {}
        marks = ",".join("?" * len(made))
        rows = self._db().execute(f"SELECT key, value FROM cache WHERE key IN ({marks}) AND expires > ?",  # noqa: S608
                                  (*made, time.time())).fetchall()
        return {made[key]: _load(value) for key, value in rows}

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        key = self.make_and_validate_key(key, version=version)
        self._write("INSERT OR REPLACE INTO cache (key, value, expires) VALUES (?, ?, ?)",
                    (key, _dump(value), self._expiry(timeout)))

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        key = self.make_and_validate_key(key, version=version)
        done = self._write("INSERT INTO cache (key, value, expires) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                           "SET value = excluded.value, expires = excluded.expires WHERE cache.expires <= ?",
                           (key, _dump(value), self._expiry(timeout), time.time()))
        return done == 1

    def incr(self, key, delta=1, version=None):
        key = self.make_and_validate_key(key, version=version)
        row = self._db().execute("UPDATE cache SET value = value + ? WHERE key = ? AND expires > ? "
                                 "AND typeof(value) = 'integer' RETURNING value", (delta, key, time.time())).fetchone()
        if row is None:
            raise ValueError(f"Key '{key}' not found")
        return row[0]

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        key = self.make_and_validate_key(key, version=version)
        return self._write("UPDATE cache SET expires = ? WHERE key = ? AND expires > ?",
                           (self._expiry(timeout), key, time.time())) == 1

    def delete(self, key, version=None):
        key = self.make_and_validate_key(key, version=version)
        return self._write("DELETE FROM cache WHERE key = ?", (key,)) == 1

    def has_key(self, key, version=None):
        key = self.make_and_validate_key(key, version=version)
        return self._db().execute("SELECT 1 FROM cache WHERE key = ? AND expires > ?", (key, time.time())).fetchone() \
            is not None

    def clear(self):
        self._db().execute("DELETE FROM cache")

    def close(self, **kwargs):
        """Kept open: Django closes caches after every request, and a connection per request costs more than
        the request's counts."""

    def _write(self, sql: str, params: tuple) -> int:
        db = self._db()
        if random.randrange(PURGE_ONE_IN) == 0:  # noqa: S311 - not for security
            db.execute("DELETE FROM cache WHERE expires <= ?", (time.time(),))
        return db.execute(sql, params).rowcount
