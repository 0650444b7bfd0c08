"""Rate limits of everything Django answers outside the REST API: the pages (``hub.web``), ``/oai``, the resolver
(``/ark:…``, ``/pid/…``), landing pages and linksets, ``/sparql``, sign-in and the admin.

They count against the API's own rates (``hub.ops.throttles``): the same shared cache, the same sliding window,
the same ``HUB_THROTTLE_ANON`` per anonymous address and ``HUB_THROTTLE_USER`` per signed-in person, so a
person's pages and API calls draw on one allowance (a page's scripts call the API). Views of the REST API are
left to its DRF throttle, so nothing is counted twice; the probes (``/healthz``, ``/readyz``, ``/metrics``,
answered before this middleware) and static files never count. ``/sparql`` counts as a page here, and its query
slots (``HUB_SPARQL_CONCURRENCY``) still bound how many queries run at once: the rate bounds a flood of cheap
ones, the slots the cost of slow ones.

A refused request is 429 with ``Retry-After``, answered in the asker's terms: the coded JSON error ``throttled``
to a client that asks for JSON, a short text to ``/oai`` (OAI-PMH harvesters honour the status and the header)
and to other data clients, and a small page that says when to try again to a browser.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from rest_framework.views import APIView

from hub import errors
from hub.ops.middleware import PATHS
from hub.ops.throttles import Throttled, take, windows_for

TEXT_PATHS = ("/oai",)  # machine protocols whose clients want a short text, whatever they accept


def counted_by_the_api(view_func: Callable) -> bool:
    """True for a view of the REST API (a DRF ``APIView``, also behind ``functools.wraps``): its own throttle
    counts it."""
    cls = getattr(view_func, "cls", None)
    return isinstance(cls, type) and issubclass(cls, APIView)


def refusal_response(request: HttpRequest, refusal: Throttled) -> HttpResponse:
    """The 429 for ``refusal``, in the form the request asks for, with ``Retry-After`` and ``X-Error-Code``."""
    accept = request.META.get("HTTP_ACCEPT", "").lower()
    wants_page = (not accept or "html" in accept or "*/*" in accept) and request.path_info not in TEXT_PATHS
    if "json" in accept and "html" not in accept:
        response = errors.json_error(request, "throttled", refusal.message, **refusal.extra)
    elif wants_page:
        page = render_to_string("429.html", {"wait": refusal.wait, "limit": refusal.extra["limit"],
                                             "who": "address" if refusal.extra["scope"] == "anon" else "person"})
        response = HttpResponse(page, status=429)
    else:
        response = HttpResponse(refusal.message + "\n", status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(refusal.wait)
    response["X-Error-Code"] = "throttled"
    response["Cache-Control"] = "no-store"
    return response


class PageThrottleMiddleware:
    """Counts each request for a view outside the REST API against the client's or person's rate (after
    ``AuthenticationMiddleware``: a signed-in person is counted as themselves); past it, the 429."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable, view_args, view_kwargs) -> HttpResponse | None:
        path = request.path_info
        if counted_by_the_api(view_func) or path in PATHS or path.startswith("/" + settings.STATIC_URL.lstrip("/")):
            return None
        refusal = take(windows_for(request, view_func))
        return None if refusal is None else refusal_response(request, refusal)
