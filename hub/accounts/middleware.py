"""Sign-in paused on a Django page other than the hub's login (the admin's): a 429 with ``Retry-After``, not a
500. The API answers through ``hub.errors.api_exception_handler`` and the login page through its view."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from hub.accounts.throttle import LockedOut


class LockedOutMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, LockedOut):
            return None
        response = HttpResponse(exception.message, status=429, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(exception.wait)
        response["X-Error-Code"] = exception.error_code
        return response
