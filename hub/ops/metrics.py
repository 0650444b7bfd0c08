"""``/metrics`` in Prometheus's text format (version 0.0.4), written by hand (no client library needed):

- ``hub_http_requests_total{route,status}`` and ``hub_http_request_duration_seconds{route,status_class}``: the
  web processes of this host, merged (``hub.ops.counters``); the time is until the response starts;
- ``hub_jobs{kind,state}``, ``hub_job_queue_depth{queue}`` and ``hub_job_queue_oldest_seconds{queue}``: from the
  Job table (one grouped count, and one over queued jobs through the state index);
- ``hub_worker_lane_alive{queue}``: whether a worker serves the gateway's lane of each device;
- ``hub_search_generation`` and ``hub_search_process_generation``: the index's latest change and the one this
  process's copy answers for (their difference is how far behind it is);
- ``hub_scrape_error{source}``: 1 for a source that could not be read this time (its series are then absent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone

from hub.ops.counters import BUCKETS, REQUESTS, merged

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def sample(name: str, labels: dict[str, object], value: float) -> str:
    inner = ",".join(f'{key}="{label(v)}"' for key, v in labels.items())
    return f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}"


def family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def requests_part() -> list[str]:
    folder = settings.HUB_METRICS_DIR
    REQUESTS.flush(folder, force=True)
    data = merged(folder, REQUESTS.snapshot())
    counts = [sample("hub_http_requests_total", {"route": route, "status": code}, n)
              for (route, code), n in sorted(data["counts"].items())]
    histogram = []
    for (route, klass), series in sorted(data["histograms"].items()):
        labels = {"route": route, "status_class": klass}
        for bound, n in zip(BUCKETS, series, strict=False):
            histogram.append(sample("hub_http_request_duration_seconds_bucket", {**labels, "le": f"{bound:g}"}, n))
        histogram += [sample("hub_http_request_duration_seconds_bucket", {**labels, "le": "+Inf"}, series[-2]),
                      sample("hub_http_request_duration_seconds_count", labels, series[-2]),
                      sample("hub_http_request_duration_seconds_sum", labels, round(series[-1], 6))]
    errors = [sample("hub_http_errors_total", {"code": code}, n) for code, n in sorted(data["errors"].items())]
    return [*family("hub_http_errors_total", "counter", "Coded error answers (X-Error-Code) of the web processes "
                    "of this host: storage_unavailable, broker_unavailable, throttled, ...", errors),
            *family("hub_http_requests_total", "counter", "HTTP requests answered by the web processes of this "
                    "host, by route name and status.", counts),
            *family("hub_http_request_duration_seconds", "histogram", "Time until the response started, by route "
                    "name and status class.", histogram)]


def jobs_part() -> list[str]:
    from hub.jobs import kinds
    from hub.jobs.models import Job

    found = {(kind, state): n for kind, state, n in
             Job.objects.order_by().values_list("kind", "state").annotate(n=Count("pk"))}
    states = [state for state, _ in Job.State.choices]
    known = sorted({name for name, _ in kinds.choices()} | {kind for kind, _ in found})
    jobs = [sample("hub_jobs", {"kind": kind, "state": state}, found.get((kind, state), 0))
            for kind in known for state in states]
    queued = Job.objects.order_by().filter(state=Job.State.QUEUED).values_list("queue").annotate(
        n=Count("pk"), oldest=Min("created"))
    now = timezone.now()
    depth, oldest = [], []
    for queue, n, first in sorted(queued):
        depth.append(sample("hub_job_queue_depth", {"queue": queue}, n))
        oldest.append(sample("hub_job_queue_oldest_seconds", {"queue": queue}, round((now - first).total_seconds(), 3)))
    return [*family("hub_jobs", "gauge", "Jobs in the database, by kind and state.", jobs),
            *family("hub_job_queue_depth", "gauge", "Queued jobs waiting for a worker, by Celery queue.", depth),
            *family("hub_job_queue_oldest_seconds", "gauge", "Age of the oldest queued job, by Celery queue.", oldest)]


def lanes_part() -> list[str]:
    from hub.gateway.presence import alive, get_presence
    from hub.gateway.protocol import DEVICES

    presence = get_presence()
    alive = [sample("hub_worker_lane_alive", {"queue": device}, int(alive(presence, device))) for device in DEVICES]
    return family("hub_worker_lane_alive", "gauge", "1 when a worker serves the gateway's lane of this device.",
                  alive)


def search_part() -> list[str]:
    from hub.search import index_copy

    lines = family("hub_search_generation", "gauge", "The search index's latest change (its generation).",
                   [sample("hub_search_generation", {}, index_copy.generation())])
    held = index_copy.held_generation()
    if held is not None:
        lines += family("hub_search_process_generation", "gauge", "The generation this process's copy of the "
                        "search index answers for.", [sample("hub_search_process_generation", {}, held)])
    return lines


PARTS = {"jobs": jobs_part, "lanes": lanes_part, "search": search_part}


def render() -> str:
    """The whole exposition; a source that fails is left out and flagged, never a failed scrape."""
    started = time.perf_counter()
    lines = requests_part()
    errors = []
    for source, part in PARTS.items():
        try:
            lines += part()
        except Exception as exc:  # noqa: BLE001 - a database error, the lane's broker_unavailable, ...
            log.warning("metrics: %s could not be read (%s)", source, type(exc).__name__, exc_info=True)
            errors.append(source)
    lines += family("hub_scrape_error", "gauge", "1 for a source this scrape could not read.",
                    [sample("hub_scrape_error", {"source": s}, int(s in errors)) for s in PARTS])
    lines += family("hub_scrape_duration_seconds", "gauge", "How long this scrape took.",
                    [sample("hub_scrape_duration_seconds", {}, round(time.perf_counter() - started, 6))])
    return "\n".join(lines) + "\n"
