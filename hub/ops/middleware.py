"""The operations endpoints, answered before the rest of Django's middleware (no session, CSRF, host check,
authentication or throttle: a load balancer's probe reaches the process by its address), and the timing of
every other request for ``/metrics``.

- ``/healthz``: liveness. The process answers; nothing else is touched.
- ``/readyz``: readiness. 200 when every dependency answered (``hub.ops.checks``), else 503 ``unready`` naming
  those that did not; the body gives every check with its time.
- ``/metrics``: Prometheus text (``hub.ops.metrics``), for ``Authorization: Bearer <HUB_METRICS_TOKEN>``, or,
  with no token configured, for a request from this host that no proxy forwarded.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from hub import errors
from hub.ops import checks, metrics
from hub.ops.counters import REQUESTS

PATHS = ("/healthz", "/readyz", "/metrics")


def route_of(request: HttpRequest) -> str:
    """The URL pattern's name (``api:artifact-list``): never the path, so the label's values are bounded."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return match.view_name or "unnamed"
    if request.path_info.startswith("/" + settings.STATIC_URL.lstrip("/")):
        return "static"
    return "unmatched"


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "alive"})


def readyz(request: HttpRequest) -> HttpResponse:
    outcomes = checks.run()
    body = {outcome.name: outcome.as_dict() for outcome in outcomes}
    failed = [outcome.name for outcome in outcomes if not outcome.ok]
    if not failed:
        return JsonResponse({"status": "ready", "checks": body})
    detail = "; ".join(f"{outcome.name}: {outcome.detail}" for outcome in outcomes if not outcome.ok)
    response = errors.json_error(request, "unready", f"Not ready: {detail}.", not_ready=failed, checks=body)
    response["Retry-After"] = "5"
    return response


# Headers a proxy on the hub's host adds for the client it forwards: any of them means the request is not the
# host's own, whatever its address.
FORWARDING = ("X-Forwarded-For", "Forwarded", "X-Real-IP", "X-Forwarded-Host", "X-Client-IP", "True-Client-IP",
              "CF-Connecting-IP", "X-Cluster-Client-IP", "Fastly-Client-IP", "X-Original-Forwarded-For")


def _may_scrape(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics, else the coded refusal."""
    token = settings.HUB_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not given:
            response = errors.json_error(request, "not_authenticated", "Send Authorization: Bearer <the hub's "
                                         "HUB_METRICS_TOKEN> to read the metrics.")
        elif hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return None
        else:
            response = errors.json_error(request, "invalid_token", "That is not the hub's metrics token.")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    try:
        local = ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        local = False
    if local and not any(request.headers.get(name) for name in FORWARDING):
        return None
    return errors.json_error(request, "permission_denied", "The metrics are read from the hub's own host, or with "
                             "the token its administrators set in HUB_METRICS_TOKEN.")


def metrics_view(request: HttpRequest) -> HttpResponse:
    refused = _may_scrape(request)
    if refused is not None:
        return refused
    return HttpResponse(metrics.render(), content_type=metrics.CONTENT_TYPE)


VIEWS: dict[str, Callable[[HttpRequest], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz,
                                                            "/metrics": metrics_view}


class OperationsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = VIEWS.get(request.path_info)
        if view is not None:
            if request.method not in ("GET", "HEAD"):
                response = errors.json_error(request, "method_not_allowed", f"{request.path_info} answers GET and "
                                             "HEAD only.")
                response["Allow"] = "GET, HEAD"
            else:
                response = view(request)
            response["Cache-Control"] = "no-store"
            response._has_been_logged = True  # a probe's 503 every few seconds is not Django's error log's business
            if request.method == "HEAD":
                response.content = b""
            return response
        started = time.perf_counter()
        response = self.get_response(request)
        REQUESTS.observe(route_of(request), response.status_code, time.perf_counter() - started,
                         response.get("X-Error-Code", ""))
        REQUESTS.flush(settings.HUB_METRICS_DIR)
        return response
