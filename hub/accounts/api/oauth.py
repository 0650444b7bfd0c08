"""The device grant's endpoints (RFC 8628 3.1, 3.4; RFC 6749 5): form-encoded POSTs from a public client, JSON
answers. An error carries the RFC's ``error`` and ``error_description`` and the hub's ``code``, ``detail`` and
``X-Error-Code`` (the same names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from hub.accounts import device
from hub.errors import STATUS, HubError, error_body


def _answer(request: HttpRequest, work: Callable[[], dict[str, Any]]) -> JsonResponse:
    try:
        response = JsonResponse(work())
    except HubError as exc:
        body = {"error": exc.code, "error_description": exc.message,
                **error_body(exc.code, exc.message, request, **exc.extra)}
        response = JsonResponse(body, status=STATUS[exc.code])
        response["X-Error-Code"] = exc.code
    response["Cache-Control"] = "no-store"  # RFC 6749 5.1: tokens are never cached
    return response


def _field(request: HttpRequest, name: str) -> str:
    value = request.POST.get(name, "")
    if not value:
        raise HubError("invalid_request", f"The form field {name!r} is missing (send it form-encoded).")
    return value


@csrf_exempt
@require_POST
def device_authorization(request: HttpRequest) -> JsonResponse:
    """A device code and a user code for a client (``client_id``, optional ``scope``: read or write)."""
    return _answer(request, lambda: device.start(_field(request, "client_id"), request.POST.get("scope", "")))


@csrf_exempt
@require_POST
def token(request: HttpRequest) -> JsonResponse:
    """The device code exchanged for tokens, or a refresh token for new ones."""

    def work() -> dict[str, Any]:
        grant = _field(request, "grant_type")
        if grant == device.GRANT_TYPE:
            return device.exchange(_field(request, "device_code"), _field(request, "client_id"))
        if grant == "refresh_token":
            return device.refresh(_field(request, "refresh_token"), _field(request, "client_id"))
        raise HubError("unsupported_grant_type", f"grant_type is {device.GRANT_TYPE} or refresh_token, "
                                                 f"not {grant!r}.")

    return _answer(request, work)
