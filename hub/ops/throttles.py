"""Rate limits of the REST API (DRF throttles): a rate per anonymous client (its address) and per person, and
tighter rates per person for the expensive writes, each view naming its scope (``throttle_scope``):

- ``uploads``: opening an upload session; ``versions``: publishing a version or creating an artifact;
- ``conversions``: conversions, optimisations, containers, fine-tunes, benchmarks (each starts a job);
- ``inference``: ``…/infer`` and ``/collaborate``; ``generation``: ``…/generate`` and the OpenAI endpoints.

A scope applies to the writes (POST, PUT, PATCH, DELETE) of its views; reads count only against the client's
or person's rate. Rates are ``HUB_THROTTLE_<NAME>`` settings, "N/period" (period: s, min, h, day), "off" for none.
The views outside the API (pages, ``/oai``, the resolver…) count against the same client's and person's rates
through ``hub.ops.pagethrottle``, with this module's ``take``.

The counts live in Django's cache, which is what every process shares: Redis in the full stack (every node),
an SQLite file under ``var/`` in the embedded default (every process of its one host; ``hub.ops.sqlitecache``).
Each rate is a sliding window estimated from two fixed windows (the count of this window, plus the last
window's weighted by how much of it still overlaps): a constant two numbers per key whatever the rate, where
DRF's own throttles keep a list of every request's time. A refused request is 429 ``throttled`` naming the
rate and, in its message and ``Retry-After``, when a request will be taken again.

A busy person's requests are counted ahead (``Leases``): where a rate allows 2,000 or more requests a window, a
process that goes to the cache counts up to a thousandth of the rate at once and answers that many of the next
requests without going again (issue 39: two round trips to Redis cost ~0.65 ms, more than the rest of a
synchronous inference). The shared count so runs ahead of the requests answered by at most that thousandth per
process, and near the limit a process counts one request at a time; smaller rates are counted exactly, each
request in the cache.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import BaseThrottle

from hub.errors import HubError
from hub.ops.sqlitecache import SQLiteCache

log = logging.getLogger(__name__)
ATOMIC_INCR = (RedisCache, SQLiteCache)  # caches whose incr is one atomic step that keeps the key's expiry
COUNTED = "hub.throttle.counted"  # a WSGI environ key (no client can send one: headers become HTTP_*)
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PERIOD_WORDS = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
SCOPE_WORDS = {"anon": "requests", "user": "requests", "uploads": "upload sessions opened",
               "versions": "versions or artifacts created", "conversions": "conversion and other job requests",
               "inference": "inference requests", "generation": "generation requests"}


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """``"30/min"`` -> (30, 60); None for no limit ("", "0", "off", "none")."""
    text = (rate or "").strip().lower()
    if text in ("", "0", "off", "none"):
        return None
    number, _, period = text.partition("/")
    count = int(number)
    if count <= 0:
        return None
    amount = period.rstrip("abcdefghijklmnopqrstuvwxyz") or "1"
    unit = period[len(amount):] if period[:1].isdigit() else period
    if not unit or unit[0] not in PERIODS:
        raise ValueError(f"a rate is N/period with period s, min, h or day, not {rate!r}")
    return count, int(amount) * PERIODS[unit[0]]


class Throttled(HubError):
    """429 throttled: more requests than a rate allows; ``wait`` seconds until one is taken again."""

    def __init__(self, scope: str, count: int, seconds: int, wait: int) -> None:
        per = PERIOD_WORDS.get(seconds, f"{seconds} seconds")
        who = "client" if scope == "anon" else "person"
        super().__init__("throttled", f"Too many requests: this hub takes {count} {SCOPE_WORDS[scope]} per {per} "
                                      f"from one {who}. Try again in {wait} s (Retry-After), or spread the "
                                      "requests out.", scope=scope, limit=f"{count}/{per}", retry_after=wait)
        self.wait = wait


class Window:
    """One rate (``count`` per ``seconds``) over the shared cache, keyed by scope and identity."""

    def __init__(self, scope: str, count: int, seconds: int) -> None:
        self.scope, self.count, self.seconds = scope, count, seconds

    def keys(self, ident: str, now: float) -> tuple[str, str, float]:
        """The keys of this window's and the last window's counts, and how far into this window ``now`` is."""
        index = int(now // self.seconds)
        base = self._base(ident)
        return f"{base}:{index}", f"{base}:{index - 1}", now / self.seconds - index

    def key(self, ident: str, now: float) -> str:
        """The key of this window's count (``keys``' first)."""
        return f"{self._base(ident)}:{int(now // self.seconds)}"

    def _base(self, ident: str) -> str:
        return f"throttle:{self.scope}:{self.seconds}:{ident}"

    def fits(self, current: int, previous: int, into: float, more: int = 1) -> bool:
        """Whether ``more`` requests fit now."""
        return previous * (1 - into) + current + more <= self.count

    def lease(self) -> int:
        """How many requests a process counts at once: a thousandth of the rate, at least one."""
        return max(1, self.count // LEASE_SHARE)

    def wait(self, current: int, previous: int, into: float) -> int:
        """0 when one more request fits, else the whole seconds until one does."""
        if self.fits(current, previous, into):
            return 0
        if current + 1 > self.count:  # not before the next window, and then the last one still weighs in
            free = 1 - (self.count - 1) / current if current else 0
            return max(1, math.ceil((1 - into + free) * self.seconds))
        needed = 1 - (self.count - 1 - current) / previous  # the part of this window that must have passed
        return max(1, math.ceil((needed - into) * self.seconds))


LEASE_SHARE = 1000  # a process counts at most this fraction of a window's rate ahead (``Window.lease``)


class Leases:
    """Requests this process has counted in the shared cache ahead of answering them, by count key (scope,
    window, identity and the window's index: a new window starts with none) and rate. Bounded: past ``MAX_KEYS`` keys
    (people active at once in this process) the leftovers are dropped, which only leaves them counted."""

    MAX_KEYS = 10_000

    def __init__(self) -> None:
        self.held: dict[str, int] = {}
        self.lock = threading.Lock()

    def use(self, counts: list[tuple[Window, str]]) -> bool:
        """One request counted already in each (window, count key), if this process holds one of each (else
        nothing is used)."""
        keys = [self._held_as(window, key) for window, key in counts]
        with self.lock:
            if not all(self.held.get(key, 0) > 0 for key in keys):
                return False
            for key in keys:
                self.held[key] -= 1
            return True

    def add(self, window: Window, key: str, count: int) -> None:
        held = self._held_as(window, key)
        with self.lock:
            if held not in self.held and len(self.held) >= self.MAX_KEYS:
                self.held.clear()
            self.held[held] = self.held.get(held, 0) + count

    @staticmethod
    def _held_as(window: Window, key: str) -> str:
        return f"{key}/{window.count}"  # at this rate: a rate changed meanwhile starts afresh

    def clear(self) -> None:
        with self.lock:
            self.held.clear()


leases = Leases()


def take(windows: Iterable[tuple[Window, str]], now: float | None = None) -> Throttled | None:
    """Count one request against each (window, identity), or, if any window is full, count nothing and give
    its ``Throttled`` (the longest wait among the full ones). A request this process counted ahead in every
    window (``leases``) is taken without going to the cache; else one read of every count, then the writes (on
    Redis one round trip for both), each window's lease at once where it fits, else one request.

    A cache that cannot be reached (Redis down, a folder not writable) lets the request through, logged: rate
    limits protect the hub, and must not take its whole API down with them."""
    pairs = list(windows)
    if not pairs:
        return None
    now = time.time() if now is None else now
    if leases.use([(window, window.key(ident, now)) for window, ident in pairs]):
        return None
    keyed = [(window, *window.keys(ident, now)) for window, ident in pairs]
    try:
        counts = cache.get_many([key for _, current, previous, _ in keyed for key in (current, previous)])
        refusal: Throttled | None = None
        taken: list[tuple[Window, str, int, int | None]] = []  # the window, its key, how many, its count read
        for window, current, previous, into in keyed:
            counted, before = int(counts.get(current) or 0), int(counts.get(previous) or 0)
            wait = window.wait(counted, before, into)
            if wait and (refusal is None or wait > refusal.wait):
                refusal = Throttled(window.scope, window.count, window.seconds, wait)
            lease = window.lease()
            many = lease if lease > 1 and window.fits(counted, before, into, lease) else 1
            taken.append((window, current, many, counts.get(current)))
        if refusal is not None:
            return refusal
        if isinstance(caches[DEFAULT_CACHE_ALIAS], RedisCache):
            _count_on_redis([(key, many, 2 * window.seconds) for window, key, many, _ in taken])
        else:
            for window, key, many, known in taken:
                _count(key, known, 2 * window.seconds, many)
        for window, key, many, _ in taken:
            if many > 1:
                leases.add(window, key, many - 1)  # this request used one
    except Exception:  # noqa: BLE001 - any cache failure: counted as none, never a 500
        log.warning("rate limits: the cache could not be reached; the request was not counted", exc_info=True)
    return None


def _count_on_redis(keys: list[tuple[str, int, int]]) -> None:
    """``many`` more requests in each key, in one round trip: ``SET NX`` with the expiry (a new window), then
    ``INCRBY``, which keeps it. (Django's ``incr`` asks ``EXISTS`` first: two round trips a key.) The client is the
    Redis cache's own, and the keys are made as it makes them, so ``cache.get`` reads the counts."""
    backend = caches[DEFAULT_CACHE_ALIAS]
    pipe = backend._cache.get_client(write=True).pipeline(transaction=False)
    for key, many, timeout in keys:
        made = backend.make_and_validate_key(key)
        pipe.set(made, 0, ex=timeout, nx=True)
        pipe.incrby(made, many)
    pipe.execute()


def _count(key: str, known: int | None, timeout: int, many: int = 1) -> None:
    """``many`` more requests in ``key``. ``SQLiteCache`` increments in place and keeps the key's expiry; other
    caches' ``incr`` is a read and a write that would reset the expiry to the cache's default, so the count is
    written with its own."""
    if known is None and cache.add(key, many, timeout=timeout):
        return
    if isinstance(caches[DEFAULT_CACHE_ALIAS], ATOMIC_INCR):
        try:
            cache.incr(key, many)
            return
        except ValueError:  # expired in between
            cache.add(key, many, timeout=timeout)
            return
    counted = known if known is not None else int(cache.get(key) or 0)  # another process made it meanwhile
    cache.set(key, counted + many, timeout=timeout)


def window_for(scope: str) -> Window | None:
    """The configured rate of ``scope`` (``settings.HUB_THROTTLE_RATES``), None when unlimited."""
    return _window(scope, settings.HUB_THROTTLE_RATES.get(scope))


@lru_cache(maxsize=64)
def _window(scope: str, rate: str | None) -> Window | None:
    parsed = parse_rate(rate)
    return Window(scope, *parsed) if parsed else None


def windows_for(request, view) -> list[tuple[Window, str]]:
    """The windows a request counts against, each with the identity it is counted under."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        ident, general = f"u{user.pk}", "user"
    else:
        ident, general = f"a{BaseThrottle().get_ident(request)}", "anon"
    found = [(window_for(general), ident)]
    scope = getattr(view, "throttle_scope", None)
    if scope and request.method not in SAFE_METHODS:
        found.append((window_for(scope), ident))
    return [(window, who) for window, who in found if window is not None]


class RateThrottle(BaseThrottle):
    """The one DRF throttle of the API (``DEFAULT_THROTTLE_CLASSES``): the client's or person's rate and the
    view's scope, counted together (a refused request counts against none of them)."""

    def allow_request(self, request, view) -> bool:
        if request.META.get(COUNTED):  # counted by the express path, which handed the request over
            return True
        refusal = take(windows_for(request, view))
        if refusal is not None:
            raise refusal  # a coded 429 with the hub's message, rather than DRF's generic one
        return True


def allow_express(user_pk: int) -> bool:
    """For the gateway's express path (``hub.gateway.wsgi``), which answers a granted synchronous ``…/infer``
    without DRF: count it as DRF would (the person's rate and ``inference``); False, counting nothing, when
    either is full (the request then goes to Django, whose throttle refuses it with the coded 429)."""
    pairs = [(window, f"u{user_pk}") for window in (window_for("user"), window_for("inference")) if window]
    return take(pairs) is None
