"""A Content-Security-Policy on the hub's pages: scripts and styles from the hub alone (its pages have no inline
script or style), no plugins, no framing, forms posted to the hub only. A model card is sanitised already
(``hub.web.markdown``); the policy is the second wall should a card's HTML ever get through. On the S3 backend
the browser also talks to the object store (direct uploads, previews and downloads by presigned URL), so its
origin is allowed for connections and images."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# Pages made by other code, with inline scripts of their own (Swagger UI, Django's admin, the MkDocs site).
EXEMPT = ("/api/docs/", "/admin/", "/docs/")


@cache
def policy() -> str:
    store = settings.HUB_STORAGE
    origin = ""
    if store["BACKEND"] == "s3":
        endpoint = store["S3_PUBLIC_ENDPOINT"] or store["S3_ENDPOINT"]
        origin = endpoint if "://" in endpoint else f"{'https' if store['S3_SECURE'] else 'http'}://{endpoint}"
        origin = " " + origin.rstrip("/")
    return ("default-src 'self'; script-src 'self'; style-src 'self'; "
            f"img-src 'self' data:{origin}; connect-src 'self'{origin}; font-src 'self'; object-src 'none'; "
            "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


class ContentSecurityPolicyMiddleware:
    """``Content-Security-Policy`` on every HTML answer that does not set its own (``EXEMPT`` paths aside)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response
                and not request.path.startswith(EXEMPT)):
            response["Content-Security-Policy"] = policy()
        return response
