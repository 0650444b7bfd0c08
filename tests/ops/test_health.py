"""``/healthz`` and ``/readyz`` (issue 35, point 4): liveness touches nothing; readiness asks the real database,
broker, object store and search index (PostgreSQL and Redis under `make test`) and names what is not ready, in
a coded 503, within its timeout, whatever hangs."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from django.test import Client

from hub.gateway import presence
from hub.search import index_copy
from hub.search.index import INDEX_FORMAT
from hub.search.models import SearchState
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)  # the checks run in their own threads and connections


@pytest.fixture
def probe() -> Client:
    """A load balancer: it reaches the process by an address that is not one of ALLOWED_HOSTS."""
    return Client(HTTP_HOST="10.1.2.3:8000")


@pytest.fixture
def ready(settings, tmp_path):
    """Everything the hub needs, as this test run has it: the index built and this process's copy loaded, the
    embedded broker's folders made (under `make test` the broker is the real Redis)."""
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        folders = {k: str(tmp_path / "broker" / k) for k in ("data_folder_in", "data_folder_out")}
        settings.CELERY_BROKER_TRANSPORT_OPTIONS = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, **folders}
        for folder in folders.values():
            os.makedirs(folder, exist_ok=True)
    SearchState.objects.update_or_create(pk=1, defaults={"format": INDEX_FORMAT})
    index_copy.current()


def test_healthz_answers_without_touching_anything(probe, django_assert_num_queries, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # down: liveness does not care
    with django_assert_num_queries(0):
        answer = probe.get("/healthz")
    assert answer.status_code == 200 and answer.json() == {"status": "alive"}
    assert answer["Cache-Control"] == "no-store" and answer["X-Request-ID"]
    assert probe.head("/healthz").status_code == 200
    refused = probe.post("/healthz")
    assert refused.status_code == 405 and refused["X-Error-Code"] == "method_not_allowed"


def test_readyz_names_every_check_when_all_are_ready(probe, ready):
    answer = probe.get("/readyz")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) >= {"database", "broker", "store", "search"}
    assert all(check["ok"] for check in body["checks"].values()), body


def test_readyz_names_a_broker_that_is_down(probe, ready, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    answer = probe.get("/readyz")
    assert time.monotonic() - started < settings.HUB_READY_TIMEOUT_S + 1
    assert answer.status_code == 503 and answer["X-Error-Code"] == "unready", answer.content
    body = answer.json()
    assert body["code"] == "unready" and body["not_ready"] == ["broker"], body
    assert "broker" in body["detail"] and body["checks"]["database"]["ok"] and body["checks"]["search"]["ok"]
    assert "127.0.0.1" not in answer.content.decode(), "no address (or password) of a dependency is shown"


def test_a_dependency_that_hangs_is_not_ready_within_the_timeout(probe, ready, settings):
    """A Redis that accepts the connection and never answers (a listener that never reads)."""
    settings.HUB_READY_TIMEOUT_S = 0.5
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        started = time.monotonic()
        answer = probe.get("/readyz")
        took = time.monotonic() - started
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["broker"], answer.content
    assert took < 1.5, took


def test_readyz_on_every_store(backend, probe, ready):
    """The filesystem store and the real S3 server (SeaweedFS under `make test`) both answer ready."""
    answer = probe.get("/readyz")
    assert answer.status_code == 200 and answer.json()["checks"]["store"]["ok"], answer.content


def test_readyz_names_an_object_store_that_is_down(probe, ready, settings, tmp_path):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "s3", "S3_ENDPOINT": f"127.0.0.1:{free_port()}",
                            "S3_ACCESS_KEY": "k", "S3_SECRET_KEY": "s"}
    answer = probe.get("/readyz")
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["store"], answer.content
    (tmp_path / "file").write_bytes(b"")
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "file" / "blobs")}
    answer = probe.get("/readyz")
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["store"], answer.content


def test_readyz_waits_for_this_process_copy_of_the_search_index(probe, ready):
    index_copy.forget()
    answer = probe.get("/readyz")
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["search"], answer.content
    assert "loading" in answer.json()["checks"]["search"]["detail"]
    deadline = time.monotonic() + 10  # the probe started the build in the background
    while probe.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the copy was never loaded"
        time.sleep(0.05)


def test_readyz_says_when_the_index_must_be_rebuilt(probe, ready):
    SearchState.objects.filter(pk=1).update(format=INDEX_FORMAT - 1)
    answer = probe.get("/readyz")
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["search"]
    assert "migrate" in answer.json()["checks"]["search"]["detail"]


def test_the_gateway_redis_is_checked_when_it_is_not_the_broker(probe, ready, settings):
    settings.HUB_GATEWAY_URL = f"redis://127.0.0.1:{free_port()}/1"
    presence._presence.cache_clear()
    try:
        answer = probe.get("/readyz")
    finally:
        presence._presence.cache_clear()
    assert answer.status_code == 503 and answer.json()["not_ready"] == ["lanes"], answer.content


def test_probes_are_not_throttled_or_authenticated(probe, ready):
    """Many probes at once, with a bad token: every one answered (none 401, 429)."""
    answers: list[int] = []

    def ask() -> None:
        answers.append(Client(HTTP_HOST="10.1.2.3", HTTP_AUTHORIZATION="Bearer nonsense").get("/healthz").status_code)

    threads = [threading.Thread(target=ask) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 20
