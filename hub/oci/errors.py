"""Errors as the OCI Distribution specification answers them: ``{"errors": [{"code", "message", "detail"}]}``,
plus the hub's own ``code``/``detail``/``request_id`` and ``X-Error-Code`` (hub.errors' table holds the codes)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from hub.errors import STATUS, HubError

API_VERSION = ("Docker-Distribution-API-Version", "registry/2.0")


class OciError(HubError):
    """A refusal with one of the specification's codes; ``challenge`` adds ``WWW-Authenticate``."""

    def __init__(self, code: str, message: str, detail: Any = None, challenge: str = "") -> None:
        super().__init__(code, message)
        self.spec_detail = detail
        self.challenge = challenge


def error_response(request: HttpRequest, error: HubError) -> JsonResponse:
    """The JSON answer to ``error`` (any HubError: a hub code outside the spec's list is named as it is)."""
    detail = getattr(error, "spec_detail", None)
    body = {"errors": [{"code": error.code, "message": error.detail, "detail": detail if detail is not None else {}}],
            "code": error.code, "detail": error.detail,
            "request_id": getattr(request, "request_id", "")}
    response = JsonResponse(body, status=STATUS[error.code])
    response["X-Error-Code"] = error.code
    response[API_VERSION[0]] = API_VERSION[1]
    if getattr(error, "challenge", ""):
        response["WWW-Authenticate"] = error.challenge
    return response
