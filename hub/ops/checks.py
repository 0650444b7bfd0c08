"""Readiness: is each dependency a request needs reachable now? The database, the Celery broker, the object
store and the search index, each asked at once in its own thread and given ``HUB_READY_TIMEOUT_S`` to answer,
so that one hung dependency makes the answer "not ready" within the timeout instead of hanging the probe."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)


class NotReady(Exception):
    """A dependency answered, but is not ready; the message says why (no secrets: never a URL)."""


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    ms: float
    detail: str = ""

    def as_dict(self) -> dict:
        out: dict = {"ok": self.ok, "ms": round(self.ms, 1)}
        if self.detail:
            out["detail"] = self.detail
        return out


def database(timeout: float) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # this thread's own connection; the pool thread may not run again soon


def broker(timeout: float) -> None:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folders = [Path(v) for k, v in getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).items()
                   if k in ("data_folder_in", "data_folder_out")]
        for folder in folders:
            if not (folder.is_dir() and os.access(folder, os.W_OK)):
                raise NotReady("the embedded broker's folders are missing or not writable")
        return
    if url.startswith(("redis://", "rediss://")):
        _ping_redis(url, timeout)
        return
    from kombu import Connection

    with Connection(url, connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)


def lanes(timeout: float) -> None:
    """The gateway's Redis, when it is not the broker's."""
    _ping_redis(settings.HUB_GATEWAY_URL, timeout)


def _ping_redis(url: str, timeout: float) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    finally:
        client.close()


def store(timeout: float) -> None:
    from hub.storage import get_blob_store

    get_blob_store().check(timeout)


def search(timeout: float) -> None:
    """The index was built by this code's format, and this process holds its copy (started if not)."""
    from hub.search import index_copy
    from hub.search.index import INDEX_FORMAT
    from hub.search.models import SearchState

    try:
        built = SearchState.objects.filter(pk=1).values_list("format", flat=True).first()
    finally:
        connection.close()
    if built is None:
        raise NotReady("the search index was never built: run `python manage.py migrate`")
    if built != INDEX_FORMAT:
        raise NotReady(f"the search index has format {built} and this hub reads format {INDEX_FORMAT}: run "
                       "`python manage.py migrate` (or `hub_reindex`)")
    if not index_copy.loaded():
        index_copy.warm()
        raise NotReady("this web process is still loading its copy of the search index")


def checks() -> dict[str, Callable[[float], None]]:
    """The checks that apply to this configuration, by the name the answer gives them."""
    found = {"database": database, "broker": broker, "store": store, "search": search}
    gateway = settings.HUB_GATEWAY_URL
    if gateway != settings.CELERY_BROKER_URL and gateway.startswith(("redis://", "rediss://")):
        found["lanes"] = lanes
    return found


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """A few threads shared by every probe (made on first use): a check that hangs holds one until its own
    timeout ends it, and probes meanwhile wait for a free one (and then say "timed out")."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="readyz")
        return _pool


def _timed(name: str, check: Callable[[float], None], timeout: float) -> Outcome:
    started = time.perf_counter()
    try:
        check(timeout)
    except NotReady as exc:
        return Outcome(name, False, (time.perf_counter() - started) * 1000, str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"; the class names it, never the text
        log.warning("readiness: %s is not ready", name, exc_info=True)
        return Outcome(name, False, (time.perf_counter() - started) * 1000, f"unreachable ({type(exc).__name__})")
    return Outcome(name, True, (time.perf_counter() - started) * 1000)


def run(timeout: float | None = None) -> list[Outcome]:
    """Every check, at once; one that has not answered within ``timeout`` seconds counts as not ready."""
    timeout = settings.HUB_READY_TIMEOUT_S if timeout is None else timeout
    started = time.perf_counter()
    futures = {name: _executor().submit(_timed, name, check, timeout) for name, check in checks().items()}
    outcomes = []
    for name, future in futures.items():
        left = max(0.0, timeout - (time.perf_counter() - started))
        try:
            outcomes.append(future.result(timeout=left + 0.05))
        except FutureTimeout:
            outcomes.append(Outcome(name, False, (time.perf_counter() - started) * 1000,
                                    f"no answer within {timeout:g} s"))
    return outcomes
