"""``/metrics`` (issue 35, point 4): Prometheus text with request counts and latencies by route name (never by
path) merged over the host's web processes, job counts by kind and state, queue depth, the gateway's lanes and
the search index's generations; read from the host itself or with the metrics token."""

from __future__ import annotations

import json
import logging
import re
import socket
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from hub.gateway import presence
from hub.jobs.models import Job
from hub.ops.logs import QuietProbes, quiet_probes
from tests.ports import free_port

pytestmark = pytest.mark.django_db

LINE = re.compile(r'^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$|^# (HELP|TYPE) [a-z_]+ .+$')


def scrape(client: Client | None = None, **headers) -> str:
    answer = (client or Client()).get("/metrics", **headers)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=0.0.4")
    text = answer.content.decode()
    bad = [line for line in text.splitlines() if not LINE.match(line)]
    assert not bad, bad
    return text


def value(text: str, name: str, **labels: str) -> float | None:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} " if labels else f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_requests_are_counted_by_route_name_never_by_path(owner, anon):
    """Counted as deltas: this process's counters also hold what earlier tests in it asked."""
    def counts(text: str) -> dict[str, float]:
        return {
            "detail": value(text, "hub_http_requests_total", route="api:artifact-detail", status="404") or 0,
            "list": value(text, "hub_http_requests_total", route="api:artifact-list", status="200") or 0,
            "unmatched": value(text, "hub_http_requests_total", route="unmatched", status="404") or 0,
            "duration": value(text, "hub_http_request_duration_seconds_count", route="api:artifact-detail",
                              status_class="4xx") or 0,
            "bucket": value(text, "hub_http_request_duration_seconds_bucket", route="api:artifact-detail",
                            status_class="4xx", le="+Inf") or 0,
            "errors": value(text, "hub_http_errors_total", code="not_found") or 0,
        }

    before = counts(scrape())
    for i in range(5):
        anon.get(f"/api/v1/artifacts/alice/missing-{i}/")
    anon.get("/api/v1/artifacts/")
    Client().get("/no/such/page/at/all")
    Client().get("/healthz")
    text = scrape()
    after = counts(text)
    assert {key: after[key] - before[key] for key in after} == {
        "detail": 5, "list": 1, "unmatched": 1, "duration": 5, "bucket": 5,
        "errors": 5}, "by the answers' codes (the five API 404s)"
    assert "missing-" not in text and "/no/such" not in text
    assert "healthz" not in text, "probes are not counted"


def test_the_host_web_processes_are_merged(anon, settings):
    """Another web process's counts, as its file has them, are added to this one's."""
    anon.get("/api/v1/artifacts/")
    before = value(scrape(), "hub_http_requests_total", route="api:artifact-list", status="200")
    other = {"counts": [["api:artifact-list", "200", 7]], "histograms": []}
    (settings.HUB_METRICS_DIR / f"{socket.gethostname()}-999999999.json").write_text(json.dumps(other))
    assert value(scrape(), "hub_http_requests_total", route="api:artifact-list", status="200") == before + 7


def test_jobs_by_kind_and_state_and_the_queue(owner):
    Job.objects.create(kind="convert", queue="convert", created=timezone.now() - timedelta(seconds=90))
    Job.objects.create(kind="convert", queue="convert")
    Job.objects.create(kind="infer", state=Job.State.FAILED)
    text = scrape()
    assert value(text, "hub_jobs", kind="convert", state="queued") == 2
    assert value(text, "hub_jobs", kind="infer", state="failed") == 1
    assert value(text, "hub_jobs", kind="infer", state="running") == 0, "every kind and state, zero too"
    assert value(text, "hub_job_queue_depth", queue="convert") == 2
    assert 89 < value(text, "hub_job_queue_oldest_seconds", queue="convert") < 200
    assert value(text, "hub_worker_lane_alive", queue="cpu") == 0
    assert value(text, "hub_search_generation") is not None
    assert value(text, "hub_scrape_error", source="jobs") == 0


def test_a_source_that_is_down_is_flagged_not_a_failed_scrape(settings):
    settings.HUB_GATEWAY_URL = f"redis://127.0.0.1:{free_port()}/0"
    presence._presence.cache_clear()
    try:
        text = scrape()
    finally:
        presence._presence.cache_clear()
    assert value(text, "hub_scrape_error", source="lanes") == 1
    assert value(text, "hub_worker_lane_alive", queue="cpu") is None
    assert value(text, "hub_scrape_error", source="jobs") == 0


def test_only_the_host_itself_or_the_token_holder_reads_them(settings):
    refused = Client(REMOTE_ADDR="10.0.0.5").get("/metrics")
    assert refused.status_code == 403 and refused["X-Error-Code"] == "permission_denied"
    proxied = Client().get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert proxied.status_code == 403, "a proxy on the host forwards the world"
    settings.HUB_METRICS_TOKEN = "s3cret-metrics"
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong["X-Error-Code"] == "invalid_token"
    scrape(Client(REMOTE_ADDR="10.0.0.5"), HTTP_AUTHORIZATION="Bearer s3cret-metrics")


def test_probes_and_scrapes_stay_out_of_the_access_log():
    quiet_probes()
    quiet_probes()
    access = logging.getLogger("granian.access")
    assert sum(isinstance(f, QuietProbes) for f in access.filters) == 1

    def record(path: str) -> logging.LogRecord:
        return access.makeRecord("granian.access", logging.INFO, __file__, 1, "%(path)s",
                                 ({"path": path, "status": 200},), None)

    assert not access.filter(record("/readyz")) and not access.filter(record("/metrics"))
    assert access.filter(record("/api/v1/artifacts/"))


@pytest.mark.services
def test_granian_access_log_leaves_probes_out(tmp_path):
    """The hub as hub_serve serves it (granian with --access-log): people's requests are logged, probes not."""
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from hub.web.server import web_command
    from tests.conftest import ROOT, stop_process, wait_for_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(tmp_path / "var"))
    log = open(tmp_path / "web.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(web_command(sys.executable, f"127.0.0.1:{port}", 1, access_log=True), cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=60, proc=proc)
        for path in ("/healthz", "/readyz", "/metrics", "/no-such-page", "/healthz"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            except urllib.error.HTTPError:
                pass  # /readyz: 503 on this unmigrated var; the page: 404
    finally:
        stop_process(proc)
        log.close()
    text = (tmp_path / "web.log").read_text()
    assert '"GET /no-such-page' in text, text
    assert not any(f'"GET {path} ' in text for path in ("/healthz", "/readyz", "/metrics")), text
