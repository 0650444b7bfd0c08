"""Refused requests answered in the hub's style: a CSRF failure (``CSRF_FAILURE_VIEW``) and other 403s of
the pages (``handler403``). Each carries its code in ``X-Error-Code``, as every hub error does; a client of
the API, or one that asks for JSON, gets the API's coded JSON error instead of a page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from hub import errors

CSRF_DETAIL = ("The form was refused because its security token (CSRF) was missing or out of date. Reload the page "
               "and send the form again; if it happens again, allow cookies for this site (the token is kept in "
               "one).")
FORBIDDEN_DETAIL = "You do not have permission to do this."


def _wants_json(request: HttpRequest) -> bool:
    accept = request.META.get("HTTP_ACCEPT", "").lower()
    return request.path.startswith("/api/") or ("json" in accept and "html" not in accept)


def refused(request: HttpRequest, code: str, detail: str, heading: str, advice: list[str]) -> HttpResponse:
    """The 403 page (or the API's JSON error) for ``code``, with ``X-Error-Code``."""
    if _wants_json(request):
        return errors.json_error(request, code, detail)
    context = {"heading": heading, "detail": detail, "advice": advice, "code": code}
    response = render(request, "403.html", context, status=errors.STATUS[code])
    response["X-Error-Code"] = code
    response["Cache-Control"] = "no-store"
    return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form sent without its CSRF cookie or token (Django's ``reason`` is not shown:
    it speaks of Referer headers and cookies in Django's terms)."""
    return refused(request, "csrf_failed", CSRF_DETAIL, "The form could not be sent", [
        "Reload the page you came from, then send the form again.",
        "If this happens again, allow cookies for this site: the form's security token is kept in one.",
        "If you signed in or out in another tab, reload this page first.",
    ])


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403``: a page that refuses the request (``PermissionDenied``)."""
    return refused(request, "permission_denied", FORBIDDEN_DETAIL, "Not allowed", [
        "If this is yours or shared with you, log in first.",
        "Otherwise ask the owner to add you as a collaborator.",
    ])
