"""The API's rate limits (hub.ops.throttles): real request sequences that trip small configured rates, against the
cache the settings give (the SQLite cache under var/ here; Redis in the services tier), and two processes sharing
one count on each."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub.ops import throttles
from hub.ops.throttles import Window, parse_rate, take
from tests.conftest import client_for

ROOT = Path(__file__).resolve().parents[2]


def rates(settings, **scoped: str) -> None:
    settings.HUB_THROTTLE_RATES = {**dict.fromkeys(settings.HUB_THROTTLE_RATES, "off"), **scoped}


def test_rates_are_parsed_and_off_means_none():
    assert parse_rate("30/min") == (30, 60)
    assert parse_rate("5/10s") == (5, 10)
    assert parse_rate("1000/day") == (1000, 86400)
    assert parse_rate("2/hour") == (2, 3600)
    assert parse_rate("off") is None and parse_rate("0") is None and parse_rate("") is None
    with pytest.raises(ValueError):
        parse_rate("3/fortnight")


def test_the_sliding_window_weighs_the_last_window_by_what_still_overlaps():
    window = Window("user", 10, 60)
    assert window.wait(current=0, previous=0, into=0.0) == 0
    assert window.wait(current=9, previous=0, into=0.5) == 0  # the 10th fits
    assert window.wait(current=10, previous=0, into=0.5) == 30 + 6  # next window, and 1/10 of it must pass
    # 10 last window, 4 now, a quarter in: 7.5 + 4 + 1 > 10; fits once half of this window has passed
    assert window.wait(current=4, previous=10, into=0.25) == 15
    assert window.wait(current=4, previous=10, into=0.45) > 0
    assert window.wait(current=4, previous=10, into=0.5) == 0


def test_a_refused_request_counts_against_no_window(settings):
    rates(settings, user="3/min", inference="1/min")
    both = [(throttles.window_for("user"), "u1"), (throttles.window_for("inference"), "u1")]
    assert take(both, now=1000.0) is None
    refusal = take(both, now=1001.0)
    assert refusal is not None and refusal.extra["scope"] == "inference"
    user_only = [(throttles.window_for("user"), "u1")]
    assert take(user_only, now=1002.0) is None  # the refused request did not use one of the three
    assert take(user_only, now=1003.0) is None
    assert take(user_only, now=1004.0).extra["scope"] == "user"


def test_a_person_past_their_rate_gets_429_throttled_with_retry_after_and_others_are_not_affected(
        db, settings, owner, other):
    rates(settings, user="3/min")
    alice, mallory = client_for(owner), client_for(other)
    for _ in range(3):
        assert alice.get("/api/v1/me").status_code == 200
    refused = alice.get("/api/v1/me")
    assert refused.status_code == 429
    assert refused["X-Error-Code"] == "throttled"
    body = refused.json()
    assert body["code"] == "throttled" and body["scope"] == "user" and body["limit"] == "3/minute"
    wait = int(refused["Retry-After"])
    assert 1 <= wait <= 120 and body["retry_after"] == wait
    assert f"Try again in {wait} s" in body["detail"]
    assert mallory.get("/api/v1/me").status_code == 200  # another person counts on their own


def test_anonymous_clients_are_counted_by_address(db, settings, anon):
    rates(settings, anon="2/min")
    for _ in range(2):
        assert anon.get("/api/v1/artifacts/", REMOTE_ADDR="192.0.2.7").status_code == 200
    refused = anon.get("/api/v1/artifacts/", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 429 and refused.json()["scope"] == "anon"
    # a forged X-Forwarded-For does not make another client (HUB_PROXY_COUNT is 0: no proxy is trusted)
    assert anon.get("/api/v1/artifacts/", REMOTE_ADDR="192.0.2.7",
                    HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429
    assert anon.get("/api/v1/artifacts/", REMOTE_ADDR="192.0.2.8").status_code == 200


def test_an_expensive_write_has_its_tighter_rate_and_reads_go_on(db, settings, api):
    rates(settings, user="100/min", versions="2/min")
    for name in ("one", "two"):
        assert api.post("/api/v1/artifacts/", {"kind": "model", "name": name}, format="json").status_code == 201
    refused = api.post("/api/v1/artifacts/", {"kind": "model", "name": "three"}, format="json")
    assert refused.status_code == 429 and refused.json()["scope"] == "versions"
    assert "versions or artifacts created per minute" in refused.json()["detail"]
    from hub.registry.models import Artifact

    assert not Artifact.objects.filter(name="three").exists()
    assert api.get("/api/v1/artifacts/").status_code == 200  # the scope limits writes only
    upload = api.post("/api/v1/uploads/", {"size": 4, "filename": "a.bin"}, format="json")
    assert upload.status_code == 201  # another scope


@pytest.mark.parametrize("backend", ["hub.ops.sqlitecache.SQLiteCache",  # the embedded default's
                                     "django.core.cache.backends.filebased.FileBasedCache"])  # incr: get + set
def test_counts_live_as_long_as_their_window(db, settings, api, owner, backend):
    """A count expires two windows after it was made however often it is written: Django's file cache's ``incr``
    would write it back with the cache's default expiry (300 s)."""
    from django.core.cache import cache

    settings.CACHES = {"default": {"BACKEND": backend, "LOCATION": str(settings.HUB_UPLOAD_DIR.parent / "cache")}}
    rates(settings, user="100/hour")
    for _ in range(3):
        assert api.get("/api/v1/me").status_code == 200
    window = throttles.Window("user", 100, 3600)
    key, _, _ = window.keys(f"u{owner.pk}", time.time())
    assert cache.get(key) == 3
    later = time.time() + 3000  # the cache's default expiry (300 s) long past, the window's (7200 s) not
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time", lambda: later)
        assert cache.get(key) == 3
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time", lambda: later + 4300)
        assert cache.get(key) is None


def test_an_unreachable_cache_lets_requests_through(db, settings, api, caplog):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}  # nothing listens on port 1
    rates(settings, user="1/min")
    assert api.get("/api/v1/me").status_code == 200
    assert api.get("/api/v1/me").status_code == 200
    assert "the cache could not be reached" in caplog.text


def test_the_openai_endpoints_say_when_to_retry(db, settings, api):
    rates(settings, generation="1/min")
    api.post("/v1/completions", {"model": "alice/nothing", "prompt": "hi"}, format="json")
    refused = api.post("/v1/completions", {"model": "alice/nothing", "prompt": "hi"}, format="json")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["code"] == "throttled"


def test_the_schema_documents_429_with_retry_after_on_every_operation(db, anon):
    schema = anon.get("/api/schema/?format=json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            answer = operation["responses"].get("429")
            assert answer is not None, (method, path)
            assert "Retry-After" in answer["headers"]


def test_the_default_rates_are_valid_and_on():
    from django.conf import settings

    for scope in ("anon", "user", "uploads", "versions", "conversions", "inference", "generation"):
        assert parse_rate(settings.HUB_THROTTLE_RATES[scope]) is not None


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.parametrize("cache_kind", ["sqlite", pytest.param("redis", marks=pytest.mark.services)])
def test_two_processes_share_one_count(db, settings, owner, cache_kind):
    """Two separate clients of the same cache (this process, and another Python process) count together: the
    embedded default's SQLite file, and the stack's Redis."""
    if cache_kind == "redis":
        url = os.environ.get("HUB_BROKER_URL", "")
        if not url.startswith("redis://"):
            pytest.skip("needs the services' Redis (HUB_BROKER_URL): run with scripts/services.sh")
        assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
        env = {**os.environ, "HUB_CACHE_URL": url}
    else:
        path = str(settings.HUB_UPLOAD_DIR.parent / "cache.sqlite3")
        settings.CACHES = {"default": {**settings.CACHES["default"], "BACKEND": "hub.ops.sqlitecache.SQLiteCache",
                                       "LOCATION": path}}
        env = {key: value for key, value in os.environ.items() if key != "HUB_BROKER_URL"}
        env["HUB_CACHE_URL"] = path
    rates(settings, user="3/min")
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    alice = client_for(owner)
    assert alice.get("/api/v1/me").status_code == 200
    code = ("import django; django.setup()\n"
            "from django.conf import settings\n"
            f"settings.CACHES['default']['KEY_PREFIX'] = {prefix!r}\n"
            "from hub.ops import throttles\n"
            "window = throttles.Window('user', 3, 60)\n"
            f"print([throttles.take([(window, 'u{owner.pk}')]) is None for _ in range(3)])\n")
    env.update(DJANGO_SETTINGS_MODULE="hub.settings", PYTHONPATH=f"{ROOT}:{ROOT / 'client'}")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True, True, False]"  # it saw this process's request: 2 more fit, not 3
    refused = alice.get("/api/v1/me")  # and this process sees the other's two
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    if cache_kind == "redis":  # counted with the window's expiry, in the cache's own key format
        from django.core.cache import caches

        backend = caches["default"]
        key, _, _ = throttles.Window("user", 3, 60).keys(f"u{owner.pk}", time.time())
        assert backend.get(key) == 3
        assert 0 < backend._cache.get_client(key).ttl(backend.make_and_validate_key(key)) <= 120


def test_a_large_rate_is_counted_a_thousandth_at_a_time_and_exactly_near_its_limit(settings, monkeypatch):
    """At 10,000 a minute a process counts 10 requests at once and answers the next 9 without the cache; the shared
    count runs ahead of the requests by less than that. Near the limit it counts one at a time, and refuses at it."""
    from django.core.cache import cache

    rates(settings, user="10000/min")
    window = throttles.window_for("user")
    reads: list[int] = []

    class Counted:  # the cache, its reads counted
        def get_many(self, keys):
            reads.append(1)
            return cache.get_many(keys)

        def __getattr__(self, name):
            return getattr(cache, name)

    monkeypatch.setattr(throttles, "cache", Counted())
    now = 60_000.0  # the start of a window
    for index in range(25):
        assert take([(window, "u1")], now=now + index * 0.01) is None
    key, _, _ = window.keys("u1", now)
    assert len(reads) == 3 and cache.get(key) == 30  # 3 trips for 25 requests; 5 counted ahead, not yet answered

    throttles.leases.clear()  # another process, a little later: the count near the limit
    cache.set(key, 9_985, timeout=120)
    answered = sum(take([(window, "u1")], now=now + 1 + index * 0.01) is None for index in range(20))
    assert answered == 15 and cache.get(key) == 10_000  # 9,985 + 15 one at a time (a lease of 10 no longer fits)
    refusal = take([(window, "u1")], now=now + 2)
    assert refusal is not None and refusal.extra["scope"] == "user"


def test_a_rate_under_two_thousand_a_window_is_counted_request_by_request(settings):
    from django.core.cache import cache

    rates(settings, user="1999/min")
    window = throttles.window_for("user")
    assert window.lease() == 1
    assert window.key("u1", 60_030.5) == window.keys("u1", 60_030.5)[0]  # the leases' key is the count's
    for index in range(5):
        assert take([(window, "u1")], now=60_000.0 + index) is None
    assert cache.get(window.keys("u1", 60_000.0)[0]) == 5 and throttles.leases.held == {}
