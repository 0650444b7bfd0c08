"""What the API's rate limits (hub.ops.throttles) cost one request: ``take()`` over the two windows a write counts
against (the person's rate and its scope), on the embedded default's SQLite cache, on Django's file cache (for
comparison: why the embedded default does not use it) and, when ``HUB_BROKER_URL`` names a Redis (``eval
"$(scripts/services.sh start)"``), on Redis; against one ``cache.get`` on the same cache in the same run (the
cheapest thing a cache can do).

    .venv/bin/python bench/throttle.py [--calls 3000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "client")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")


def timed(calls: int, fn) -> tuple[float, float]:
    """(p50, p95) of ``fn()`` in microseconds."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    import django

    django.setup()
    from django.core.cache import cache
    from django.test import override_settings

    from hub.ops import throttles

    scratch = tempfile.mkdtemp(prefix="bench-throttle-")
    backends = {"sqlite": {"BACKEND": "hub.ops.sqlitecache.SQLiteCache", "LOCATION": f"{scratch}/cache.sqlite3"},
                "file": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": scratch,
                         "OPTIONS": {"MAX_ENTRIES": 10000}}}
    broker = os.environ.get("HUB_BROKER_URL", "")
    if broker.startswith("redis://"):
        backends["redis"] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": broker,
                             "KEY_PREFIX": f"bench-{os.getpid()}"}
    windows = [(throttles.Window("user", 10**9, 60), "u1"), (throttles.Window("inference", 10**9, 60), "u1")]
    print(f"{'cache':6} {'get p50 µs':>11} {'take p50 µs':>12} {'take p95 µs':>12} {'take / get':>11}")
    for name, conf in backends.items():
        with override_settings(CACHES={"default": conf}):
            cache.set("bench-probe", 1, 600)
            throttles.take(windows)  # the keys exist, as they do after a client's first request
            get_p50, _ = timed(args.calls, lambda: cache.get("bench-probe"))
            take_p50, take_p95 = timed(args.calls, lambda: throttles.take(windows))
            cache.clear() if name != "redis" else None
        print(f"{name:6} {get_p50:11.1f} {take_p50:12.1f} {take_p95:12.1f} {take_p50 / get_p50:10.1f}x")


if __name__ == "__main__":
    main()
