"""A Content-Security-Policy on the hub's pages: scripts and styles from the hub alone (its pages have no inline
script or style), no plugins, no framing, forms posted to the hub only. A model card is sanitised already
(``hub.web.markdown``); the policy is the second wall should a card's HTML ever get through. On the S3 backend
the browser also talks to the object store (direct uploads, previews and downloads by presigned URL), so its
origin is allowed for connections and images, and with OpenID Connect on, the provider's for the forms that
sign in and out there."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# Pages made by other code, with inline scripts of their own (Swagger UI, Django's admin, the MkDocs site).
EXEMPT = ("/api/docs/", "/admin/", "/docs/")


def _origin(url: str, secure: bool = False) -> str:
    if "://" not in url:
        url = f"{'https' if secure else 'http'}://{url}"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def policy() -> str:
    """The policy for the settings in force (worked out per answer: a few string joins, and settings that tests and
    sites change stay true)."""
    store = settings.HUB_STORAGE
    store_origin = ""
    if store["BACKEND"] == "s3":
        store_origin = " " + _origin(store["S3_PUBLIC_ENDPOINT"] or store["S3_ENDPOINT"], bool(store["S3_SECURE"]))
    # Signing in and out at the site's identity provider: a form posted here is redirected there.
    provider = f" {_origin(settings.HUB_OIDC_ISSUER)}" if settings.HUB_OIDC_ENABLED and settings.HUB_OIDC_ISSUER else ""
    return ("default-src 'self'; script-src 'self'; style-src 'self'; "
            f"img-src 'self' data:{store_origin}; connect-src 'self'{store_origin}; font-src 'self'; "
            f"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'{provider}")


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
