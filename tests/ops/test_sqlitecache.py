"""The embedded default's cache (hub.ops.sqlitecache.SQLiteCache): Django's cache API over one SQLite file, with
expiry, and an atomic ``incr`` that keeps the key's expiry; two threads and two connections see one count."""

from __future__ import annotations

import threading
import time

import pytest

from hub.ops.sqlitecache import SQLiteCache


@pytest.fixture
def cache(tmp_path) -> SQLiteCache:
    return SQLiteCache(str(tmp_path / "run" / "cache.sqlite3"), {"TIMEOUT": 300, "KEY_PREFIX": "t"})


def test_the_cache_api(cache):
    assert cache.get("a") is None and cache.get("a", 7) == 7
    cache.set("a", {"any": ["value"]})
    assert cache.get("a") == {"any": ["value"]}
    assert not cache.add("a", 1) and cache.add("b", 1)
    assert cache.get_many(["a", "b", "c"]) == {"a": {"any": ["value"]}, "b": 1}
    assert cache.incr("b", 4) == 5 and cache.get("b") == 5
    with pytest.raises(ValueError):
        cache.incr("missing")
    assert cache.has_key("b") and cache.delete("b") and not cache.has_key("b")
    cache.clear()
    assert cache.get("a") is None


def test_expiry_and_an_increment_keeps_it(cache, monkeypatch):
    now = time.time()
    cache.set("n", 1, timeout=10)
    cache.incr("n")
    monkeypatch.setattr(time, "time", lambda: now + 9)
    assert cache.get("n") == 2
    monkeypatch.setattr(time, "time", lambda: now + 11)
    assert cache.get("n") is None and not cache.has_key("n")
    with pytest.raises(ValueError):
        cache.incr("n")
    assert cache.add("n", 1, timeout=10)  # an expired key can be added again
    cache.set("forever", 1, timeout=None)
    monkeypatch.setattr(time, "time", lambda: now + 10**9)
    assert cache.get("forever") == 1


def test_increments_from_threads_and_connections_are_not_lost(cache, tmp_path):
    cache.set("n", 0)
    other = SQLiteCache(str(tmp_path / "run" / "cache.sqlite3"), {"TIMEOUT": 300, "KEY_PREFIX": "t"})

    def count(which: SQLiteCache) -> None:
        for _ in range(200):
            which.incr("n")

    threads = [threading.Thread(target=count, args=(which,)) for which in (cache, other, cache, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get("n") == 800
